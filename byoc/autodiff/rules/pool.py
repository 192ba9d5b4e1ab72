"""Gradients of pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

ONNX has no pooling backward ops, so each is written with forward ones: MaxPool's own argmax
Indices and a ScatterElements that adds g there; AveragePool as a ConvTranspose of g with a
ones kernel (the adjoint of a windowed sum), divided by each window's divisor first.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ...ir import Constant, Expr, TupleGetItem, TupleType
from ...op.kernels._window import window
from ..rule import Backward, GradientRule, dtype_of, rank_of
from ..shapes import count_ratio, expand_like, fill_like, shape_of
from .conv import Geometry, geometry, spatial, transpose_conv_to
from .reduce import share_among_maxima


def max_pool(b: Backward) -> list[Expr | None]:
    """y[o] = max_{i in window(o)} x[i]: dx[i] = sum of g[o] over the windows whose max is x[i],
    i.e. g scatter-added at the Indices output (flat row-major positions in x)."""
    x = b.x(0)
    assert x is not None
    if isinstance(b.call.type, TupleType) and int(b.attr("storage_order", 0)) == 0:
        indices = b.y(1)
    else:  # the forward kept no (row-major) indices: ask a MaxPool for them
        attrs = {k: v for k, v in b.call.attrs.items() if k != "storage_order"}
        indices = TupleGetItem(b.op("MaxPool", x, n_outputs=2, **attrs), 1)
    flat = b.ints([-1])
    zeros = b.op("Reshape", fill_like(b, 0, x), flat)
    summed = b.op("ScatterElements", zeros, b.op("Reshape", indices, flat),
                  b.op("Reshape", b.g, flat), axis=0, reduction="add")
    return [b.op("Reshape", summed, shape_of(b, x))]


def _ceil_as_pads(b: Backward, x: Expr, geo: Geometry) -> Geometry:
    """ceil_mode's extra windows as extra end padding, so floor-mode windows are the same."""
    size = spatial(x)
    if size is None:
        raise b.fail("AveragePool with ceil_mode=1 needs static spatial dims to be "
                     "differentiated")
    out = window(b.call.attrs, size, geo.kernel, ceil_mode=True).out
    end = tuple(max(e, (o - 1) * s + geo.extent(i) - n - bg)
                for i, (o, s, n, bg, e) in enumerate(zip(out, geo.strides, size, geo.begin,
                                                         geo.end)))
    return replace(geo, end=end)


def average_pool(b: Backward) -> list[Expr | None]:
    """y[o] = sum_{i in window(o)} x[i] / D[o]: dx = ConvTranspose(g / D, ones kernel).

    Unpadded, D is the kernel size. Otherwise D[o] = |W(o)| / AveragePool(ones)[o], with
    |W(o)| the real (unpadded) elements of window o, counted by a ones Conv over one plane:
    that is right for either count_include_pad, and for ceil_mode, whose extra windows are
    extra end padding. Channels fold into the batch so one 1x1-channel kernel serves any
    channel count.
    """
    x = b.x(0)
    assert x is not None
    kernel = list(b.attr("kernel_shape"))
    geo = geometry(b, x, kernel)
    if int(b.attr("ceil_mode", 0)):
        geo = _ceil_as_pads(b, x, geo)
    g = b.g
    nd = len(kernel)
    ones = Constant(np.ones((1, 1, *kernel), dtype=dtype_of(x)))
    if not (any(geo.begin) or any(geo.end)):
        scaled = b.op("Mul", g, b.const(1.0 / math.prod(kernel), g))
    else:
        size = spatial(x)
        plane = (b.ints([1, 1, *size]) if size is not None else
                 b.op("Concat", b.ints([1, 1]), _spatial_shape(b, x, nd), axis=0))
        plane_ones = b.op("Expand", b.const(1.0, x), plane)
        real = b.op("Conv", plane_ones, ones, strides=list(geo.strides),
                    dilations=list(geo.dilations), pads=geo.pads)
        mean_of_ones = b.op("AveragePool", plane_ones, **b.call.attrs)
        scaled = b.op("Mul", g, b.op("Div", mean_of_ones, real))
    out_size = spatial(g)
    folded_shape = (b.ints([-1, 1, *out_size]) if out_size is not None else
                    b.op("Concat", b.ints([-1, 1]), _spatial_shape(b, g, nd), axis=0))
    folded = b.op("Reshape", scaled, folded_shape)
    dx = transpose_conv_to(b, folded, ones, x, geo, group=1)
    return [b.op("Reshape", dx, shape_of(b, x))]


def _spatial_shape(b: Backward, x: Expr, nd: int) -> Expr:
    return b.op("Slice", b.op("Shape", x), b.ints([2]), b.ints([2 + nd]))


def global_average_pool(b: Backward) -> list[Expr | None]:
    """y[n, c] = mean over space of x[n, c]: dx = g / (spatial size), broadcast over space."""
    x = b.x(0)
    assert x is not None
    return [expand_like(b, b.op("Div", b.g, count_ratio(b, x, b.y())), x)]


def global_max_pool(b: Backward) -> list[Expr | None]:
    """y[n, c] = max over space: dx = g shared among the positions equal to the max."""
    x = b.x(0)
    assert x is not None
    return [share_among_maxima(b, x, b.y(), b.g, b.ints(range(2, rank_of(x))))]


RULES: dict[str, GradientRule] = {
    "MaxPool": max_pool, "AveragePool": average_pool,
    "GlobalAveragePool": global_average_pool, "GlobalMaxPool": global_max_pool,
}
