"""Depthwise conv (one input channel per group) as direct loops specialized to the shapes.

Each input channel is copied into a zero-padded plane (``plane.py``); each output row is then
computed in vectors of outputs, every tap one multiply-add of a whole vector with its weight
in a register, at any stride, with FMAs (``byoc_wfma``: MLAS sums these in its own order
with FMAs too). A native region's epilogue (Relu, a residual) runs on each channel's output
while it is in cache.
"""

from __future__ import annotations

from ..emitter import Emit, Tensor
from .plane import MAX_TAPS, Plane, emit_plane, emit_window_rows

__all__ = ["MAX_TAPS", "emit_depthwise"]


def emit_depthwise(ctx: Emit, x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor,
                   dims: list[int], epilogue: str = "0") -> bool:
    """Returns whether it applied ``epilogue`` (a ``const byoc_epi *``, or "0")."""
    n, c, h, wd, m, oh, ow, kh, kw = dims[:9]
    g = Plane.of([h, wd, oh, ow, *dims[7:]])
    src = ctx.src
    ctx.need("window")
    with ctx.parallel("nc", n * m, n * m * oh * ow * kh * kw):
        src.line(f"const long co = nc % {m};")
        channel = f"({x.ptr} + (nc / {m} * {c} + co / {m // c}) * {h * wd})"
        emit_plane(ctx, channel, g, "0.0f")
        src.line(f"const float *restrict wk = {w.ptr} + co * {kh * kw};")
        for t in range(kh * kw):
            src.line(f"const byoc_wf w{t} = byoc_wsplat(wk[{t}]);")
        b = f"{bias.ptr}[co]" if bias is not None else "0.0f"
        src.line(f"const byoc_wf bv = byoc_wsplat({b});")
        src.line(f"float *restrict yc = {out.ptr} + nc * {oh * ow};")
        emit_window_rows(ctx, g, "yc", lambda taps, a, _: _sums(taps, kw, a))
        if epilogue != "0":
            src.line(f"({epilogue})->fn(yc, {oh * ow}, co, 1, {oh * ow}, ({epilogue})->ctx);")
    return epilogue != "0"


def _sums(taps: list[str], kw: int, a: str) -> list[str]:
    """``a`` = bias + the taps' products: an FMA chain per kernel row (the chains run side by
    side, where one would wait on each FMA before the next), added in row order."""
    rows = [taps[i:i + kw] for i in range(0, len(taps), kw)]
    out = []
    for i, row in enumerate(rows):
        first = f"byoc_wfma(w0, {row[0]}, bv)" if i == 0 else f"w{i * kw} * {row[0]}"
        out.append(f"byoc_wf {a}_{i} = {first};")
        out += [f"{a}_{i} = byoc_wfma(w{i * kw + j}, {v}, {a}_{i});"
                for j, v in enumerate(row) if j]
    out.append(f"byoc_wf {a} = " + " + ".join(f"{a}_{i}" for i in range(len(rows))) + ";")
    return out
