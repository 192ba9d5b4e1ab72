"""A channel copied into a padded plane in scratch, so that window loops (depthwise convs,
max and average pools) need no bounds checks and read whole vectors, at any stride.

A plane row is the padded input row split into ``sw`` phases: padded column ``c`` lies in
phase ``c % sw`` at ``c // sw``. Tap (i, j) of output (oh, ow) then reads element
``ow + (j * dw) // sw`` of phase ``(j * dw) % sw`` of plane row ``oh * sh + i * dh``:
consecutive outputs read consecutive floats, stride 2 as well as 1 (no gather, no shuffle).
A phase is whole vectors long and reaches past the last output for every tap, so a row is
computed in vectors of ``BYOC_WW`` outputs (16 with AVX-512) starting at multiples of it, each
tap one aligned load or two shifted in registers (on AVX2 a tap near the vector is one
unaligned load), and a row's last, partial vector is stored by ``byoc_wstore_first`` (masked
with AVX-512, from the register's halves with AVX).

Depthwise convs pad with zeros, max pools with -infinity, average pools with zeros (a padded
tap adds +0 to a sum started at +0: the sum of the real taps, bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..emitter import Emit

MAX_TAPS = 64  # windows larger than this are left to loops that check bounds
LANES = 16  # the widest vector a row may be computed in (floats): each phase reaches past it


@dataclass(frozen=True)
class Plane:
    """The geometry of a window op over one channel: H, W, OH, OW, KH, KW, SH, SW, PH, PW,
    DH, DW (1-D ops seen as H = 1)."""

    h: int
    w: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int
    sw: int
    ph: int
    pw: int
    dh: int
    dw: int

    @classmethod
    def of(cls, dims: list[int]) -> Plane:
        return cls(*(int(d) for d in dims))

    @property
    def rows(self) -> int:
        """Plane rows: as far as the last output's window reaches (or the input, if further)."""
        return max(self.h + self.ph, (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1)

    @property
    def phase(self) -> int:
        """Floats per phase of a row, whole vectors of ``LANES``: as far as the loads of the
        row's last vector reach for every tap (a tap is read as one or two aligned vectors)."""
        last = (self.ow - 1) // LANES * LANES
        return last + -(-((self.kw - 1) * self.dw // self.sw) // LANES) * LANES + LANES

    @property
    def width(self) -> int:
        """Floats per plane row (all its phases)."""
        return self.sw * self.phase

    def tap(self, j: int) -> int:
        """Where tap column ``j`` starts in a plane row, for output 0."""
        c = j * self.dw
        return c % self.sw * self.phase + c // self.sw


def emit_plane(ctx: Emit, channel: str, g: Plane, fill: str) -> str:
    """Copy the channel at C pointer ``channel`` into a plane filled with ``fill``; returns the
    plane's pointer (``p``, declared in the current block). Each float is written once."""
    src = ctx.src
    rows, width, phase = g.rows, g.width, g.phase
    src.line(f"float *restrict p = {ctx.scratch(4 * rows * width)};")
    if g.ph:
        src.line(f"for (long i = 0; i < {min(g.ph, rows) * width}; i++) p[i] = {fill};")
    if rows > g.ph + g.h:
        src.line(f"for (long i = {(g.ph + g.h) * width}; i < {rows * width}; i++) p[i] = {fill};")
    copied = min(g.h, rows - g.ph)  # input rows below the last window are never read
    if copied <= 0:
        return "p"
    with src.block(f"for (long ih = 0; ih < {copied}; ih++)"):
        src.line(f"float *restrict row = p + (ih + {g.ph}) * {width};")
        src.line(f"const float *restrict xr = {channel} + ih * {g.w};")
        spans = []
        for q in range(g.sw):
            # phase q's element u is padded column q + sw * u, input column q + sw * u - pw
            lo = min(phase, max(0, -(-(g.pw - q) // g.sw)))
            spans.append((lo, max(lo, min(phase, (g.pw + g.w - 1 - q) // g.sw + 1))))
        # stride 2: both phases of the elements u in [v0, v1) from pairs of vectors of input
        # columns 2u - pw ..., split into even and odd lanes (the rest one float at a time)
        v0, v1 = (max(spans[0][0], spans[1][0]), min(spans[0][1], spans[1][1])) \
            if g.sw == 2 else (0, 0)
        if v1 > v0:
            ctx.need("window")
            src.line(f"long v = {v0};")
            with src.block(f"for (; v + BYOC_VW <= {v1}; v += BYOC_VW)"):
                src.line(f"const byoc_vf *s = (const byoc_vf *)(xr + 2 * v - {g.pw});")
                src.line("*(byoc_vf *)(row + v) = __builtin_shuffle(s[0], s[1], BYOC_EVEN);")
                src.line(f"*(byoc_vf *)(row + {phase} + v) = "
                         "__builtin_shuffle(s[0], s[1], BYOC_ODD);")
        for q, (lo, hi) in enumerate(spans):
            at = q * phase
            if lo:
                src.line(f"for (long u = {at}; u < {at + lo}; u++) row[u] = {fill};")
            if hi > lo and g.sw == 1:
                src.line(f"memcpy(row + {at + lo}, xr + {lo - g.pw}, {4 * (hi - lo)});")
            elif hi > lo:
                ranges = [(lo, hi)] if v1 <= v0 else [(lo, v0), ("v", hi)]
                for a, b in (r for r in ranges if r[0] != r[1]):
                    src.line(f"for (long u = {a}; u < {b}; u++) "
                             f"row[{at} + u] = xr[{q - g.pw} + {g.sw} * u];")
            if phase > hi:
                src.line(f"for (long u = {at + hi}; u < {at + phase}; u++) row[u] = {fill};")
    return "p"


def emit_window_rows(ctx: Emit, g: Plane, out_plane: str,
                     combine: Callable[[list[str], str, str], list[str]]) -> None:
    """Each output row of the plane at ``out_plane`` (OH x OW floats) in vectors: ``combine``
    takes the taps' vectors (C expressions, in (i, j) order), the name of the ``byoc_wf`` to
    compute from them and the output row (a C expression) and returns the statements (which
    may also use ``at``, the row's first output the vector holds).

    Vectors start at multiples of ``BYOC_WW``, where plane rows are aligned: a tap is one or
    two aligned loads and a shift across them in registers (``byoc_wtap``), not a load that
    straddles two cache lines (which costs two; a 5x5 window's 25 such loads per vector
    were its bottleneck on AVX-512); on AVX2 a tap at most two floats past the vector is one
    unaligned load (``byoc_wtap_near``: the shifts' shuffles bound 3x3 windows there). A
    row's last, partial vector is stored by ``byoc_wstore_first``."""
    src = ctx.src

    def body(at: str) -> None:
        src.line(f"const long at = {at};")
        tap = "byoc_wtap_near" if (g.kw - 1) * g.dw // g.sw <= 2 else "byoc_wtap"
        taps = [f"{tap}(r{i}, {g.tap(j)}, at)" for i in range(g.kh) for j in range(g.kw)]
        for line in combine(taps, "acc", "oh"):
            src.line(line)

    with src.block(f"for (long oh = 0; oh < {g.oh}; oh++)"):
        for i in range(g.kh):
            src.line(f"const float *restrict r{i} = p + (oh * {g.sh} + {i * g.dh}) * {g.width};")
        src.line(f"float *restrict yr = {out_plane} + oh * {g.ow};")
        with src.block(f"for (long o = 0; o + BYOC_WW <= {g.ow}; o += BYOC_WW)"):
            body("o")
            src.line("*(byoc_wf *)(yr + at) = acc;")
        with src.block(f"if ({g.ow} % BYOC_WW)"):
            body(f"{g.ow} / BYOC_WW * BYOC_WW")
            src.line(f"byoc_wstore_first(yr + at, acc, {g.ow} % BYOC_WW);")
