"""Shape plumbing for gradients, static where the types say enough, shape-agnostic otherwise.

A dim may be symbolic ("N"), so every helper decides at build time when the dims it needs are
known ints or provably equal symbols, and otherwise emits IR that reads the shape at run time
(Shape, NonZero, Expand). Both paths give the same numbers; the static one is smaller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..ir import Expr, TensorType
from ..op.onnx_bridge import elem_type
from .rule import Backward, GradientError, dtype_of, rank_of, static_shape


def dims_of(e: Expr) -> tuple | None:
    t = e.type
    return t.shape if isinstance(t, TensorType) else None


def shape_of(b: Backward, x: Expr) -> Expr:
    """x's shape as an int64 vector: a constant when static, else ``Shape(x)``."""
    s = static_shape(x)
    return b.ints(s) if s is not None else b.op("Shape", x)


def reshape_like(b: Backward, g: Expr, x: Expr) -> Expr:
    """``g`` reshaped to x's shape (nothing emitted when the static shapes already agree)."""
    s = static_shape(x)
    if s is not None and static_shape(g) == s:
        return g
    return b.op("Reshape", g, shape_of(b, x))


def expand_like(b: Backward, g: Expr, x: Expr) -> Expr:
    """``g`` broadcast to x's shape."""
    s = static_shape(x)
    if s is not None and static_shape(g) == s:
        return g
    return b.op("Expand", g, shape_of(b, x))


def fill_like(b: Backward, value: float, x: Expr) -> Expr:
    """A tensor of x's shape and dtype holding ``value`` (an Expand of a scalar, not a constant
    of x's size, so the module stays small)."""
    return b.op("Expand", b.const(value, x), shape_of(b, x))


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise GradientError(f"axis {a} out of range for rank {rank}")
        out.append(a + rank if a < 0 else a)
    return out


def unbroadcast(b: Backward, g: Expr, x: Expr) -> Expr:
    """dL/dx from dL/d(broadcast x): ``sum over the axes x was broadcast along``, in x's shape.

    Axes are found at build time when the dims allow (x's dim 1 under a larger output dim,
    and every leading axis x lacks); a symbolic dim that may or may not be 1, or an unknown
    rank, makes it a run-time choice: ``axes = NonZero(padded Shape(x) == 1)``, a ReduceSum
    that is a no-op on no axes.
    """
    gs, xs = dims_of(g), dims_of(x)
    if gs is None or xs is None:
        return _unbroadcast_at_run_time(b, g, x, None)
    pad = len(gs) - len(xs)
    if pad < 0:
        raise GradientError(f"gradient of rank {len(gs)} for an input of rank {len(xs)}")
    axes = list(range(pad))
    for i, dx in enumerate(xs):
        dg = gs[pad + i]
        if dx == 1:
            if dg != 1:
                axes.append(pad + i)
        elif not (isinstance(dx, int) or (dx is not None and dx == dg)):
            return _unbroadcast_at_run_time(b, g, x, pad)
    if not axes:
        return g
    summed = b.op("ReduceSum", g, b.ints(axes), keepdims=1)
    return reshape_like(b, summed, x) if pad else summed


def _unbroadcast_at_run_time(b: Backward, g: Expr, x: Expr, pad: int | None) -> Expr:
    """Sum over the axes where x, padded with leading 1s to g's rank, has a 1; ``pad`` is the
    rank difference, None when a rank is unknown too (then it is computed as well)."""
    shape = b.op("Shape", x)
    if pad is None:
        rank = b.op("Size", b.op("Shape", g))
        lead = b.op("Sub", b.op("Reshape", rank, b.ints([1])), b.op("Shape", shape))
        ones = b.op("ConstantOfShape", lead, value=np.ones(1, dtype=np.int64))
        padded = b.op("Concat", ones, shape, axis=0)
    else:
        padded = b.op("Concat", b.ints([1] * pad), shape, axis=0) if pad else shape
    axes = b.op("Reshape", b.op("NonZero", b.op("Equal", padded, b.ints([1]))), b.ints([-1]))
    summed = b.op("ReduceSum", g, axes, keepdims=1, noop_with_empty_axes=1)
    return b.op("Reshape", summed, shape)


def count_ratio(b: Backward, big: Expr, small: Expr) -> Expr:
    """``size(big) / size(small)`` as a scalar of big's dtype: the count a mean divides by."""
    sb, ss = static_shape(big), static_shape(small)
    if sb is not None and ss is not None:
        return b.const(math.prod(sb) / max(math.prod(ss), 1), big)
    dt = elem_type(dtype_of(big))
    return b.op("Div", b.op("Cast", b.op("Size", big), to=dt),
                b.op("Cast", b.op("Size", small), to=dt))


def swap_last(b: Backward, x: Expr) -> Expr:
    """x with its last two axes swapped (the matrix transpose of a batched matmul)."""
    r = rank_of(x)
    return b.op("Transpose", x, perm=[*range(r - 2), r - 1, r - 2])

