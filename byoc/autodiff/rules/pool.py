"""Gradients of pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

ONNX has no pooling backward ops, so each is written with forward ones: MaxPool's own argmax
Indices and a ScatterElements that adds g there; AveragePool as a ConvTranspose of g with a
ones kernel (the adjoint of a windowed sum), divided by each window's divisor first.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import Constant, Expr, TupleGetItem, TupleType
from ..rule import Backward, GradientRule, dtype_of, rank_of
from ..shapes import count_ratio, expand_like, fill_like, shape_of
from .conv import geometry, spatial, transpose_conv_to
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


def average_pool(b: Backward) -> list[Expr | None]:
    """y[o] = sum_{i in window(o)} x[i] / D[o]: dx = ConvTranspose(g / D, ones kernel).

    D is the kernel size, or with count_include_pad=0 and pads the count of real elements,
    k * AveragePool(ones, count_include_pad=1). Channels fold into the batch so one 1x1-channel
    kernel serves any channel count.
    """
    x = b.x(0)
    assert x is not None
    if int(b.attr("ceil_mode", 0)):
        raise b.fail("AveragePool with ceil_mode=1 has no gradient rule yet")
    kernel = list(b.attr("kernel_shape"))
    geo = geometry(b, x, kernel)
    size = math.prod(kernel)
    g = b.g
    if int(b.attr("count_include_pad", 0)) or not (any(geo.begin) or any(geo.end)):
        scaled = b.op("Mul", g, b.const(1.0 / size, g))
    else:
        attrs = {**b.call.attrs, "count_include_pad": 1}
        real = b.op("AveragePool", fill_like(b, 1.0, x), **attrs)
        scaled = b.op("Div", g, b.op("Mul", real, b.const(float(size), g)))
    nd = len(kernel)
    out_size = spatial(g)
    folded_shape = (b.ints([-1, 1, *out_size]) if out_size is not None else
                    b.op("Concat", b.ints([-1, 1]),
                         b.op("Slice", b.op("Shape", g), b.ints([2]), b.ints([2 + nd])), axis=0))
    folded = b.op("Reshape", scaled, folded_shape)
    ones = Constant(np.ones((1, 1, *kernel), dtype=dtype_of(x)))
    dx = transpose_conv_to(b, folded, ones, x, geo, group=1)
    return [b.op("Reshape", dx, shape_of(b, x))]


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
