"""Gradients of data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Expand, Transpose,
Concat, Split, Slice, Pad, Gather, GatherElements.

Each output element is one input element, so the gradient moves g back: the inverse view, the
inverse permutation, a split of a concat, a zero-filled scatter of what a slice or gather read
(adding where a gather read an element twice).
"""

from __future__ import annotations

from ...ir import Expr, TupleType
from ...op import outputs
from ...op.onnx_bridge import elem_type
from ..rule import Backward, GradientRule, const_ints, dtype_of, rank_of, static_shape
from ..shapes import dims_of, fill_like, normalize_axes, reshape_like, shape_of, unbroadcast


def _x(b: Backward) -> Expr:
    x = b.x(0)
    assert x is not None
    return x


def view(b: Backward) -> list[Expr | None]:
    """y = x in another shape (Reshape, Flatten, Squeeze, Unsqueeze): dx = g in x's shape."""
    return [reshape_like(b, b.g, _x(b))]


def expand(b: Backward) -> list[Expr | None]:
    """y = broadcast(x): dx = g summed over the broadcast axes."""
    return [unbroadcast(b, b.g, _x(b))]


def transpose(b: Backward) -> list[Expr | None]:
    """y = permute(x, p): dx = permute(g, p^-1)."""
    r = rank_of(_x(b))
    perm = list(b.attr("perm") or reversed(range(r)))
    inverse = [0] * r
    for i, p in enumerate(perm):
        inverse[p] = i
    return [b.op("Transpose", b.g, perm=inverse)]


def _extent(b: Backward, x: Expr, axis: int) -> Expr:
    """x's length along ``axis`` as a 1-element int64 vector."""
    dims = dims_of(x)
    if dims is not None and isinstance(dims[axis], int):
        return b.ints([dims[axis]])
    return b.op("Slice", b.op("Shape", x), b.ints([axis]), b.ints([axis + 1]))


def concat(b: Backward) -> list[Expr | None]:
    """y = concat(x_1..x_n, axis): dx_i = the i-th piece of split(g, sizes of x_i)."""
    xs = [a for a in b.call.args if a is not None]
    if len(xs) == 1:
        return [b.g]
    axis = normalize_axes([int(b.attr("axis"))], rank_of(xs[0]))[0]
    lengths = [_extent(b, x, axis) for x in xs]
    static = [const_ints(n) for n in lengths]
    sizes = (b.ints([s[0] for s in static]) if all(s is not None for s in static)  # type: ignore
             else b.op("Concat", *lengths, axis=0))
    pieces = outputs(b.op("Split", b.g, sizes, axis=axis, n_outputs=len(xs)))
    return [p if b.need(j) else None for j, p in enumerate(pieces)]


def split(b: Backward) -> list[Expr | None]:
    """y_1..y_n = split(x, axis): dx = concat(g_1..g_n), zeros for pieces the loss ignores."""
    if not isinstance(b.call.type, TupleType):
        return [b.g]
    x = _x(b)
    axis = normalize_axes([int(b.attr("axis", 0))], rank_of(x))[0]
    pieces = [g if g is not None else fill_like(b, 0.0, b.y(i)) for i, g in enumerate(b.grads)]
    return [b.op("Concat", *pieces, axis=axis)]


def _scatter_back(b: Backward, x: Expr, picked: Expr, g: Expr, reduction: str) -> Expr:
    """dx[i] = sum of g where ``picked`` (flat positions in x, shaped like g) names i."""
    flat = b.ints([-1])
    zeros = b.op("Reshape", fill_like(b, 0.0, x), flat)
    scattered = b.op("ScatterElements", zeros, b.op("Reshape", picked, flat),
                     b.op("Reshape", g, flat), axis=0, reduction=reduction)
    return b.op("Reshape", scattered, shape_of(b, x))


def _static_slice_pads(b: Backward, x: Expr) -> list[int] | None:
    """Pads that undo the slice when it is a plain crop (static shape, constant bounds,
    steps of 1), else None."""
    shape = static_shape(x)
    starts, ends = const_ints(b.x(1)), const_ints(b.x(2))
    if shape is None or starts is None or ends is None:
        return None
    axes_arg, steps_arg = b.x(3), b.x(4)
    axes = const_ints(axes_arg) if axes_arg is not None else list(range(len(starts)))
    steps = const_ints(steps_arg) if steps_arg is not None else [1] * len(starts)
    if axes is None or steps is None or any(s != 1 for s in steps):
        return None
    r = len(shape)
    begin, end = [0] * r, [0] * r
    for axis, start, stop in zip(normalize_axes(axes, r), starts, ends):
        lo, hi, _ = slice(start, stop).indices(shape[axis])
        begin[axis], end[axis] = lo, shape[axis] - max(hi, lo)
    return begin + end


def slice_(b: Backward) -> list[Expr | None]:
    """y = x[starts:ends:steps]: dx = g written back where it was read, zeros elsewhere.

    A crop with known bounds is a Pad of g; anything else (run-time bounds, steps, symbolic
    dims) slices an iota of x's flat positions the same way and scatters g there."""
    x = _x(b)
    pads = _static_slice_pads(b, x)
    if pads is not None:
        return [b.op("Pad", b.g, b.ints(pads))]
    iota = b.op("Range", b.int_scalar(0), b.op("Size", x), b.int_scalar(1))
    picked = b.op("Slice", b.op("Reshape", iota, shape_of(b, x)), *b.call.args[1:])
    return [_scatter_back(b, x, picked, b.g, "none")]


def pad(b: Backward) -> list[Expr | None]:
    """y = pad(x, constant): dx = g cropped back to x (the values padded in take no
    gradient)."""
    x = _x(b)
    pads = const_ints(b.x(1))
    if b.attr("mode", "constant") != "constant" or pads is None or min(pads, default=0) < 0:
        raise b.fail("only constant Pad by constant non-negative pads has a gradient rule")
    r = rank_of(x)
    axes_arg = b.x(3)
    axes = normalize_axes(const_ints(axes_arg) or [], r) if axes_arg is not None else \
        list(range(r))
    starts = pads[:len(axes)]
    shape = static_shape(x)
    ends = (b.ints([s + shape[a] for s, a in zip(starts, axes)]) if shape is not None else
            b.op("Add", b.ints(starts), b.op("Gather", b.op("Shape", x), b.ints(axes), axis=0)))
    return [b.op("Slice", b.g, b.ints(starts), ends, b.ints(axes))]


def _nonnegative(b: Backward, indices: Expr, x: Expr, axis: int) -> Expr:
    """Indices with negatives wrapped (i < 0 -> i + n), as int64; constants checked now."""
    values = const_ints(indices)
    idx = indices if dtype_of(indices) == "int64" else b.op("Cast", indices,
                                                             to=elem_type("int64"))
    if values is not None and min(values, default=0) >= 0:
        return idx
    n = b.op("Squeeze", _extent(b, x, axis), b.ints([0]))
    return b.op("Where", b.op("Less", idx, b.int_scalar(0)), b.op("Add", idx, n), idx)


def gather(b: Backward) -> list[Expr | None]:
    """y = take(x, i, axis): dx = zeros with g added at the rows i names (repeats add up).

    ScatterND adds along x's first axis, so axis moves to the front of x and the index axes to
    the front of g, and the result moves back."""
    x, indices = _x(b), b.x(1)
    assert indices is not None
    r = rank_of(x)
    q = rank_of(indices)
    axis = normalize_axes([int(b.attr("axis", 0))], r)[0]
    idx = b.op("Unsqueeze", _nonnegative(b, indices, x, axis), b.ints([-1]))
    g = b.g
    if axis == 0:
        return [b.op("ScatterND", fill_like(b, 0.0, x), idx, g, reduction="add"), None]
    front = [axis, *range(axis), *range(axis + 1, r)]
    g_front = b.op("Transpose", g, perm=[*range(axis, axis + q), *range(axis),
                                         *range(axis + q, r - 1 + q)])
    shape = static_shape(x)
    moved_shape = (b.ints([shape[a] for a in front]) if shape is not None else
                   b.op("Gather", b.op("Shape", x), b.ints(front), axis=0))
    zeros = b.op("Expand", b.const(0.0, x), moved_shape)
    moved = b.op("ScatterND", zeros, idx, g_front, reduction="add")
    back = [0] * r
    for i, p in enumerate(front):
        back[p] = i
    return [b.op("Transpose", moved, perm=back), None]


def gather_elements(b: Backward) -> list[Expr | None]:
    """y[..i..] = x[..index[..i..]..] along axis: dx = scatter-add of g at those indices."""
    x, indices = _x(b), b.x(1)
    assert indices is not None
    axis = normalize_axes([int(b.attr("axis", 0))], rank_of(x))[0]
    idx = _nonnegative(b, indices, x, axis)
    return [b.op("ScatterElements", fill_like(b, 0.0, x), idx, b.g, axis=axis,
                 reduction="add"), None]


RULES: dict[str, GradientRule] = {
    **{op: view for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze")},
    "Expand": expand, "Transpose": transpose, "Concat": concat, "Split": split,
    "Slice": slice_, "Pad": pad, "Gather": gather, "GatherElements": gather_elements,
}
