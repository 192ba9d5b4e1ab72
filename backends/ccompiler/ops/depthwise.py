"""Depthwise conv (one input channel per group) as direct loops specialized to the shapes.

Each input channel is copied into a zero-padded plane (``plane.py``); the loop over an output
row then computes all taps at once, with the weights in registers, no bounds checks and trip
counts the compiler knows.
"""

from __future__ import annotations

from ..emitter import Emit, Tensor
from .plane import MAX_TAPS, emit_plane, emit_window_rows

__all__ = ["MAX_TAPS", "emit_depthwise"]


def emit_depthwise(ctx: Emit, x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor,
                   dims: list[int]) -> None:
    n, c, h, wd, m, oh, ow, kh, kw = dims[:9]
    geometry = [h, wd, oh, ow, *dims[7:]]
    src = ctx.src
    with ctx.parallel("nc", n * m, n * m * oh * ow * kh * kw):
        src.line(f"const long co = nc % {m};")
        channel = f"({x.ptr} + (nc / {m} * {c} + co / {m // c}) * {h * wd})"
        emit_plane(ctx, channel, geometry, "0.0f")
        src.line(f"const float *restrict wk = {w.ptr} + co * {kh * kw};")
        for t in range(kh * kw):
            src.line(f"const float w{t} = wk[{t}];")
        src.line(f"const float b = {f'{bias.ptr}[co]' if bias is not None else '0.0f'};")
        emit_window_rows(ctx, geometry, f"{out.ptr} + nc * {oh * ow} + oh * {ow}",
                         lambda terms: "b + " + " + ".join(f"w{t} * {v}"
                                                          for t, v in enumerate(terms)))
