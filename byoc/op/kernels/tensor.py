"""Shape, layout, indexing and generator kernels (Reshape ... EyeLike).

Pure layout ops (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Slice, Split, Identity-like)
return numpy views of their input where possible; no kernel ever writes into its inputs.
"""

from __future__ import annotations

import math

import numpy as np

from ._registry import (
    arg,
    hold_blas,
    kernel,
    norm_axes,
    norm_axis,
    np_dtype,
    tensor_attr,
    via_float32,
)


def _ints(t: np.ndarray | None) -> list[int]:
    """An int tensor as a python list (python ints cannot overflow on INT64 sentinels)."""
    return [] if t is None else [int(v) for v in np.asarray(t).reshape(-1).tolist()]


def _scalar_int(t: np.ndarray) -> int:
    return int(np.asarray(t).reshape(-1)[0])


# --------------------------------------------------------------------------------------------
# Shape manipulation
# --------------------------------------------------------------------------------------------


@kernel("Reshape")
def reshape(attrs: dict, x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray, ...]:
    """Reshape; 0 copies the input dim (unless allowzero=1), -1 is inferred."""
    dims = _ints(shape)
    if not attrs.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return (x.reshape(dims),)


@kernel("Flatten")
def flatten(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """2-D view (prod(shape[:axis]), prod(shape[axis:]))."""
    axis = attrs.get("axis", 1)
    if axis < 0:
        axis += x.ndim
    return (x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])),)


@kernel("Transpose")
def transpose(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Permute axes (default: reverse them)."""
    return (np.transpose(x, attrs.get("perm")),)


@kernel("Squeeze")
def squeeze(attrs: dict, x: np.ndarray, *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Drop the given size-1 axes, or all size-1 axes when axes is absent."""
    axes = arg(rest, 0)
    if axes is None and "axes" in attrs:  # opset < 13 form
        axes = np.asarray(attrs["axes"])
    if axes is None or axes.size == 0:
        return (np.squeeze(x),)
    return (np.squeeze(x, axis=norm_axes(axes, x.ndim)),)


@kernel("Unsqueeze")
def unsqueeze(attrs: dict, x: np.ndarray, *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Insert size-1 axes at the given positions of the output."""
    axes = arg(rest, 0)
    if axes is None:
        axes = np.asarray(attrs["axes"])
    rank = x.ndim + axes.size
    new = set(norm_axes(axes, rank))
    it = iter(x.shape)
    return (x.reshape([1 if i in new else next(it) for i in range(rank)]),)


@kernel("Expand")
def expand(attrs: dict, x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray, ...]:
    """Bidirectional broadcast to ``shape``; materialized (a broadcast view is read-only)."""
    out = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
    if out == x.shape:
        return (x,)
    return (np.array(np.broadcast_to(x, out)),)


@kernel("Concat")
def concat(attrs: dict, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Concatenate along axis (negative allowed)."""
    return (np.concatenate(inputs, axis=attrs["axis"]),)


@kernel("Split")
def split(attrs: dict, x: np.ndarray, *rest: np.ndarray | None,
          num_outputs: int | None = None) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Split along axis by the ``split`` sizes, the ``num_outputs`` attribute, or else into
    equal parts, one per declared output (the executor passes that count as
    ``attrs["_num_outputs"]`` or the ``num_outputs`` keyword)."""
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    dim = x.shape[axis]
    sizes = _ints(arg(rest, 0)) or list(attrs.get("split") or [])  # attribute before opset 13
    if not sizes:
        n = attrs.get("num_outputs") or attrs.get("_num_outputs") or num_outputs
        if not n:
            raise ValueError("Split needs 'split', num_outputs, or the declared output count")
        chunk = -(-dim // n)  # ceil: the last chunk is the smaller one
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, bounds, axis=axis))


@kernel("Slice")
def slice_(attrs: dict, x: np.ndarray, starts: np.ndarray, ends: np.ndarray,
           *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Strided slice with ONNX clamping of negative / out-of-range starts and ends."""
    st, en = _ints(starts), _ints(ends)
    axes = norm_axes(arg(rest, 0), x.ndim) if arg(rest, 0) is not None else range(len(st))
    steps = _ints(arg(rest, 1)) or [1] * len(st)
    index = [slice(None)] * x.ndim
    for a, s, e, step in zip(axes, st, en, steps):
        dim = x.shape[a]
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if step > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        # e == -1 with a negative step means "through index 0", which python spells None.
        index[a] = slice(s, None if e < 0 else e, step)
    return (x[tuple(index)],)


@kernel("Tile")
def tile(attrs: dict, x: np.ndarray, repeats: np.ndarray) -> tuple[np.ndarray, ...]:
    """Repeat the tensor ``repeats[i]`` times along each axis."""
    return (np.tile(x, _ints(repeats)),)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


@kernel("Pad")
def pad(attrs: dict, x: np.ndarray, pads: np.ndarray,
        *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Pad (negative pads crop) in constant/reflect/edge/wrap mode, optionally on some axes."""
    value, axes = arg(rest, 0), arg(rest, 1)
    mode = attrs.get("mode", "constant")
    p = _ints(pads)
    axes_l = norm_axes(axes, x.ndim) if axes is not None else tuple(range(x.ndim))
    n = len(axes_l)
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i, a in enumerate(axes_l):
        begin[a], end[a] = p[i], p[n + i]
    if any(v < 0 for v in begin + end):
        x = x[tuple(slice(max(0, -b), d - max(0, -e)) for b, e, d in zip(begin, end, x.shape))]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if not any(b or e for b, e in widths):
        return (x,)
    if mode == "constant":
        fill = value.reshape(-1)[0] if value is not None and value.size else 0
        return (np.pad(x, widths, mode="constant", constant_values=fill),)
    return (np.pad(x, widths, mode=_PAD_MODES[mode]),)


@kernel("DepthToSpace")
def depth_to_space(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Move channel blocks into bs x bs spatial blocks (DCR or CRD order)."""
    b, c, h, w = x.shape
    bs = attrs["blocksize"]
    if attrs.get("mode", "DCR") == "DCR":
        t = x.reshape(b, bs, bs, c // bs**2, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(b, c // bs**2, bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return (t.reshape(b, c // bs**2, h * bs, w * bs),)


@kernel("SpaceToDepth")
def space_to_depth(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Inverse of DepthToSpace: bs x bs spatial blocks become channels (DCR or CRD order)."""
    b, c, h, w = x.shape
    bs = attrs["blocksize"]
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    perm = (0, 3, 5, 1, 2, 4) if attrs.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    return (t.transpose(perm).reshape(b, c * bs * bs, h // bs, w // bs),)


# --------------------------------------------------------------------------------------------
# Indexing
# --------------------------------------------------------------------------------------------


@kernel("Gather")
def gather(attrs: dict, x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """np.take along axis (negative indices count from the end)."""
    return (np.take(x, indices, axis=norm_axis(attrs.get("axis", 0), x.ndim)),)


@kernel("GatherElements")
def gather_elements(attrs: dict, x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """np.take_along_axis (negative indices count from the end)."""
    return (np.take_along_axis(x, indices, axis=norm_axis(attrs.get("axis", 0), x.ndim)),)


@kernel("GatherND")
def gather_nd(attrs: dict, x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """Gather slices addressed by the last axis of ``indices``, after batch_dims shared axes."""
    b = attrs.get("batch_dims", 0)
    k = indices.shape[-1]
    n_batch = math.prod(x.shape[:b])
    data = x.reshape((n_batch,) + x.shape[b:])
    idx = indices.reshape(n_batch, -1, k)
    batch = np.arange(n_batch).reshape(-1, 1)
    out = data[(batch, *np.moveaxis(idx, -1, 0))]
    return (out.reshape(indices.shape[:-1] + x.shape[b + k :]),)


_SCATTER_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, index: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        out[index] = updates
    else:
        _SCATTER_UFUNC[reduction].at(out, index, updates)  # unbuffered: duplicates accumulate
    return out


@kernel("ScatterElements")
def scatter_elements(attrs: dict, x: np.ndarray, indices: np.ndarray,
                     updates: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Copy of x with updates written (or reduced) at indices along axis."""
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    index = list(np.indices(indices.shape, sparse=True))
    index[axis] = np.where(indices < 0, indices + x.shape[axis], indices)
    return (_scatter(x.copy(), tuple(index), updates, attrs.get("reduction", "none")),)


@kernel("ScatterND")
def scatter_nd(attrs: dict, x: np.ndarray, indices: np.ndarray,
               updates: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Copy of x with slices addressed by the last axis of indices replaced (or reduced)."""
    index = tuple(np.moveaxis(indices, -1, 0))
    return (_scatter(x.copy(), index, updates, attrs.get("reduction", "none")),)


@kernel("NonZero")
def nonzero(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Indices of nonzero elements, shape (rank, count), int64."""
    if x.ndim == 0:  # numpy refuses 0-d nonzero; onnxruntime treats a scalar as shape [1]
        return (np.zeros((1, int(bool(x))), dtype=np.int64),)
    return (np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1),)


@kernel("OneHot")
def one_hot(attrs: dict, indices: np.ndarray, depth: np.ndarray,
            values: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """values[1] where the new axis position equals the index, values[0] elsewhere."""
    d = int(np.asarray(depth).reshape(-1)[0])
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + d, idx)  # out-of-range indices match nothing: all "off"
    axis = attrs.get("axis", -1)
    if axis < 0:
        axis += idx.ndim + 1
    positions = np.arange(d).reshape((d,) + (1,) * (idx.ndim - axis))
    hot = np.expand_dims(idx, axis) == positions
    off, on = values.reshape(-1)[0], values.reshape(-1)[1]
    return (np.where(hot, on, off),)


# --------------------------------------------------------------------------------------------
# Shape queries, casts and generators
# --------------------------------------------------------------------------------------------


@kernel("Shape")
def shape(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x.shape[start:end] as int64 (start/end clamped to [0, rank])."""
    r = x.ndim

    def clamp(v: int) -> int:
        return min(max(v + r if v < 0 else v, 0), r)

    start, end = clamp(attrs.get("start", 0)), clamp(attrs.get("end", r))
    return (np.array(x.shape[start:end], dtype=np.int64),)


@kernel("Size")
def size(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Element count as a 0-d int64."""
    return (np.array(x.size, dtype=np.int64),)


def _cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "OSU":
        raise NotImplementedError("Cast to string is not implemented by the host kernels")
    return x.astype(dtype, copy=False)


@kernel("Cast")
def cast(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Convert to TensorProto type ``to`` (float8 saturate / round_mode are not modelled)."""
    return (_cast(x, np_dtype(attrs["to"])),)


@kernel("CastLike")
def cast_like(attrs: dict, x: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, ...]:
    """Convert to the dtype of the second input."""
    return (_cast(x, target.dtype),)


@kernel("ConstantOfShape")
def constant_of_shape(attrs: dict, shape: np.ndarray) -> tuple[np.ndarray, ...]:
    """Tensor of the given shape filled with ``value`` (default float32 0)."""
    value = attrs.get("value")
    v = tensor_attr(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    return (np.full(tuple(_ints(shape)), v[0], dtype=v.dtype),)


@kernel("Range")
def range_(attrs: dict, start: np.ndarray, limit: np.ndarray,
           delta: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """start + i * delta for i < max(ceil((limit - start) / delta), 0)."""
    dtype = start.dtype
    s, lim, d = start.item(), limit.item(), delta.item()
    if np.issubdtype(dtype, np.integer):
        n = max(-((s - lim) // d), 0)  # exact integer ceil division
        return (np.arange(n, dtype=dtype) * dtype.type(d) + dtype.type(s),)
    n = max(math.ceil((lim - s) / d), 0)
    # float16/bfloat16 are computed in float32 (stash_type=1 default), others in their own type.
    work = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    out = np.arange(n, dtype=work) * work.type(d) + work.type(s)
    return (out.astype(dtype, copy=False),)


@kernel("EyeLike")
def eye_like(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """2-D identity-like matrix shaped like x, ones on diagonal k."""
    dtype = np_dtype(attrs["dtype"]) if "dtype" in attrs else x.dtype
    return (np.eye(x.shape[0], x.shape[1], k=attrs.get("k", 0), dtype=dtype),)


@kernel("Trilu")
def trilu(attrs: dict, x: np.ndarray, *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Keep the upper (default) or lower triangle of the last two axes, offset by k."""
    k = _scalar_int(rest[0]) if arg(rest, 0) is not None else 0
    return ((np.triu if attrs.get("upper", 1) else np.tril)(x, k),)


def _einsum_work(eq: str, inputs: tuple[np.ndarray, ...]) -> int:
    """The multiply-adds of the naive loop over every index (an upper bound on the
    contraction's): enough to tell a small einsum from a large one."""
    sizes: dict[str, int] = {}
    for term, x in zip(eq.split("->")[0].split(","), inputs):
        if "..." in term:  # what the ellipsis covers, once
            sizes["..."] = max(sizes.get("...", 1), x.size)
            continue
        for letter, dim in zip(term, x.shape):
            sizes[letter] = max(sizes.get(letter, 1), dim)
    return int(np.prod(list(sizes.values()), dtype=np.float64))


@kernel("Einsum")
@via_float32
def einsum(attrs: dict, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """np.einsum with contraction-order optimization."""
    eq = attrs["equation"].replace(" ", "")
    hold_blas(attrs, _einsum_work(eq, inputs))
    return (np.asarray(np.einsum(eq, *inputs, optimize=True)).astype(inputs[0].dtype, copy=False),)
