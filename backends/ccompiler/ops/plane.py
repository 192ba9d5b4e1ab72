"""A channel copied into a padded plane in scratch, so that window loops need no bounds checks.

Depthwise convs pad with zeros, max pools with -infinity. The plane reaches as far as the last
output's window does, so every tap of every output lands inside it.
"""

from __future__ import annotations

from ..emitter import Emit

MAX_TAPS = 64  # windows larger than this are left to loops that check bounds


def plane_size(dims: list[int]) -> tuple[int, int]:
    """(height, width) of the plane for H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW."""
    h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = dims
    return (max(h + ph, (oh - 1) * sh + (kh - 1) * dh + 1),
            max(w + pw, (ow - 1) * sw + (kw - 1) * dw + 1))


def emit_plane(ctx: Emit, channel: str, dims: list[int], fill: str) -> str:
    """Copy the channel at C pointer ``channel`` into a plane filled with ``fill``; returns the
    plane's pointer (``p``, declared in the current block)."""
    h, w, _, _, _, _, _, _, ph, pw, _, _ = dims
    hp, wp = plane_size(dims)
    src = ctx.src
    src.line(f"float *restrict p = {ctx.scratch(4 * hp * wp)};")
    if fill == "0.0f":
        src.line(f"memset(p, 0, {4 * hp * wp});")
    else:
        src.line(f"for (long i = 0; i < {hp * wp}; i++) p[i] = {fill};")
    src.line(f"for (long ih = 0; ih < {h}; ih++) "
             f"memcpy(p + (ih + {ph}) * {wp} + {pw}, {channel} + ih * {w}, {4 * w});")
    return "p"


def emit_window_rows(ctx: Emit, dims: list[int], out_row: str, combine) -> None:
    """For each output row: pointers to the plane rows its windows read, and one loop over the
    row assigning ``combine(terms)``, where terms are the C reads of the taps in order."""
    _, _, oh, ow, kh, kw, sh, sw, _, _, dh, dw = dims
    _, wp = plane_size(dims)
    src = ctx.src
    with src.block(f"for (long oh = 0; oh < {oh}; oh++)"):
        src.line(f"float *restrict yr = {out_row};")
        for i in range(kh):
            src.line(f"const float *restrict r{i} = p + (oh * {sh} + {i * dh}) * {wp};")
        terms = [f"r{i}[ow * {sw} + {j * dw}]" for i in range(kh) for j in range(kw)]
        src.line(f"for (long ow = 0; ow < {ow}; ow++) yr[ow] = {combine(terms)};")
