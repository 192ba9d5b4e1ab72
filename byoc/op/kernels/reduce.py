"""Reductions along axes: Reduce* (axes as input, opset 18+), ArgMax/ArgMin, TopK, CumSum.

Reducing over an empty axes tuple (noop_with_empty_axes=1) is numpy's ``axis=()``, so the
composite reductions still apply their elementwise part (ReduceSumSquare returns x**2, ...).
"""

from __future__ import annotations

import numpy as np

from ._registry import arg, kernel, norm_axes, norm_axis, via_float32


def _axes(attrs: dict, x: np.ndarray, inputs: tuple) -> tuple[int, ...]:
    axes = arg(inputs, 0)
    if axes is None and "axes" in attrs:  # pre-opset-18 attribute form
        axes = np.asarray(attrs["axes"])
    if axes is None or axes.size == 0:
        return () if attrs.get("noop_with_empty_axes", 0) else tuple(range(x.ndim))
    return norm_axes(axes, x.ndim)


def _keep(attrs: dict) -> bool:
    return bool(attrs.get("keepdims", 1))


def _as_dtype(y, like: np.ndarray) -> np.ndarray:
    """Cast back to the input dtype (integer inputs of sqrt/log/mean come back as float)."""
    return np.asarray(y).astype(like.dtype, copy=False)


def _extreme(fn: np.ufunc, lowest: bool, name: str):
    """ReduceMax (fn=maximum, empty -> lowest value) or ReduceMin (minimum, empty -> highest)."""

    def run(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple[np.ndarray, ...]:
        kw = {}
        if x.size == 0:  # empty reduction: -inf / +inf, or the integer type's extreme
            if x.dtype == bool:
                kw["initial"] = not lowest
            elif np.issubdtype(x.dtype, np.floating):
                kw["initial"] = -np.inf if lowest else np.inf
            else:
                info = np.iinfo(x.dtype)
                kw["initial"] = info.min if lowest else info.max
        return (fn.reduce(x, axis=_axes(attrs, x, inputs), keepdims=_keep(attrs), **kw),)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"{fn.__name__} over axes (empty reductions give the dtype's extreme)."
    return run


kernel("ReduceMax")(_extreme(np.maximum, lowest=True, name="reduce_max"))
kernel("ReduceMin")(_extreme(np.minimum, lowest=False, name="reduce_min"))


@kernel("ReduceSum")
@via_float32
def reduce_sum(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """Sum over axes (integer sums stay in the input type)."""
    return (np.sum(x, axis=_axes(attrs, x, inputs), keepdims=_keep(attrs), dtype=x.dtype),)


@kernel("ReduceProd")
def reduce_prod(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """Product over axes."""
    return (np.prod(x, axis=_axes(attrs, x, inputs), keepdims=_keep(attrs), dtype=x.dtype),)


@kernel("ReduceMean")
@via_float32
def reduce_mean(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """Mean over axes (integer means truncate toward zero)."""
    axes, keep = _axes(attrs, x, inputs), _keep(attrs)
    if x.size == 0:  # the mean of nothing: undefined in ONNX, 0 in onnxruntime (and here)
        return (np.sum(x, axis=axes, keepdims=keep),)
    if np.issubdtype(x.dtype, np.floating):
        return (np.mean(x, axis=axes, keepdims=keep),)
    return (_as_dtype(np.mean(x, axis=axes, keepdims=keep, dtype=np.float64), x),)


@kernel("ReduceL1")
@via_float32
def reduce_l1(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """Sum of absolute values."""
    return (np.sum(np.abs(x), axis=_axes(attrs, x, inputs), keepdims=_keep(attrs), dtype=x.dtype),)


@kernel("ReduceL2")
@via_float32
def reduce_l2(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """Square root of the sum of squares."""
    s = np.sum(np.square(x), axis=_axes(attrs, x, inputs), keepdims=_keep(attrs), dtype=x.dtype)
    return (_as_dtype(np.sqrt(s), x),)


@kernel("ReduceSumSquare")
@via_float32
def reduce_sum_square(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """Sum of squares."""
    return (
        np.sum(np.square(x), axis=_axes(attrs, x, inputs), keepdims=_keep(attrs), dtype=x.dtype),
    )


@kernel("ReduceLogSum")
@via_float32
def reduce_log_sum(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """log of the sum (empty reductions give -inf)."""
    s = np.sum(x, axis=_axes(attrs, x, inputs), keepdims=_keep(attrs), dtype=x.dtype)
    return (_as_dtype(np.log(s), x),)


@kernel("ReduceLogSumExp")
@via_float32
def reduce_log_sum_exp(attrs: dict, x: np.ndarray, *inputs: np.ndarray | None) -> tuple:
    """log(sum(exp(x))), shifted by the max so it cannot overflow."""
    axes, keep = _axes(attrs, x, inputs), _keep(attrs)
    xf = x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)
    m = np.max(xf, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(xf.dtype, copy=False)
    y = np.log(np.sum(np.exp(xf - m), axis=axes, keepdims=True)) + m
    if not keep:
        y = np.squeeze(y, axis=axes)
    return (_as_dtype(y, x),)


def _arg_extreme(fn, name: str):
    def run(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
        axis = norm_axis(attrs.get("axis", 0), x.ndim)
        if attrs.get("select_last_index", 0):
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        idx = np.asarray(idx, dtype=np.int64)
        return (np.expand_dims(idx, axis) if attrs.get("keepdims", 1) else idx,)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"int64 {fn.__name__} along axis (select_last_index picks the last tie)."
    return run


kernel("ArgMax")(_arg_extreme(np.argmax, "arg_max"))
kernel("ArgMin")(_arg_extreme(np.argmin, "arg_min"))


def _sort_desc_stable(v: np.ndarray) -> np.ndarray:
    """argsort along the last axis, descending, equal values in increasing index order."""
    # A stable ascending sort of the reversed axis, read backwards, gives exactly that
    # (negating instead would break unsigned ints).
    n = v.shape[-1]
    return (n - 1) - np.flip(np.argsort(np.flip(v, -1), axis=-1, kind="stable"), -1)


def _topk_sorted(v: np.ndarray, k: int, largest: bool) -> np.ndarray:
    rows = v.reshape(-1, v.shape[-1])
    order = np.argsort(rows, axis=-1)  # introsort/SIMD: ~3x faster than the stable sort
    if largest:
        order = np.flip(order, -1)
    s = np.take_along_axis(rows, order, axis=-1)
    tied = (s[:, 1:] == s[:, :-1]).any(axis=-1)
    if tied.any():  # only rows with equal values need the index-ordered tie break
        sub = rows[tied]
        order[tied] = _sort_desc_stable(sub) if largest else np.argsort(sub, -1, kind="stable")
    return order[:, :k].reshape(v.shape[:-1] + (k,))


def _topk_partition(v: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """O(n) selection for small k: argpartition, then sort only the k candidates.

    The candidate set is unique unless values equal to the k-th one straddle the cut; then
    the lowest-index ties are kept explicitly (the sorted path's tie order).
    """
    n = v.shape[-1]
    kth = n - k if largest else k - 1
    part = np.argpartition(v, kth, axis=-1)
    cand = part[..., kth:] if largest else part[..., :k]
    thr = np.take_along_axis(v, part[..., kth : kth + 1], axis=-1)
    tie = v == thr
    ties_kept = (np.take_along_axis(v, cand, axis=-1) == thr).sum(axis=-1)
    if not np.array_equal(ties_kept, tie.sum(axis=-1)):
        better = v > thr if largest else v < thr
        need = k - better.sum(axis=-1, keepdims=True)
        keep = better | (tie & (np.cumsum(tie, axis=-1) <= need))
        cand = np.nonzero(keep.reshape(-1, n))[1].reshape(v.shape[:-1] + (k,))
    cand = np.sort(cand, axis=-1)  # index order first, so the stable value sort breaks ties
    order = _topk_sorted(np.take_along_axis(v, cand, axis=-1), k, largest)
    return np.take_along_axis(cand, order, axis=-1)


@kernel("TopK")
def topk(attrs: dict, x: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, ...]:
    """k largest (or smallest) along axis, sorted; ties resolved toward the lower index."""
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    kk = int(np.asarray(k).reshape(-1)[0])
    largest = bool(attrs.get("largest", 1))
    v = np.moveaxis(x, axis, -1)
    n = v.shape[-1]
    if not 0 <= kk <= n:  # onnxruntime refuses it too
        raise ValueError(f"k = {kk}, but axis {axis} has {n} elements")
    has_nan = x.dtype.kind == "f" and bool(np.isnan(x).any())
    if v.size == 0:  # an empty axis (then k = 0) or an empty batch
        idx = np.zeros(v.shape[:-1] + (kk,), np.int64)
    elif 0 < kk and kk * 8 <= n and not has_nan:
        idx = _topk_partition(v, kk, largest)
    else:
        idx = _topk_sorted(v, kk, largest)
    vals = np.take_along_axis(v, idx, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx.astype(np.int64, copy=False), -1, axis)


@kernel("CumSum")
@via_float32
def cumsum(attrs: dict, x: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray, ...]:
    """Cumulative sum along axis; exclusive drops the current element, reverse runs backwards."""
    ax = norm_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
    rev = attrs.get("reverse", 0)
    y = np.flip(x, ax) if rev else x
    c = np.cumsum(y, axis=ax, dtype=x.dtype)
    if attrs.get("exclusive", 0):
        shifted = np.zeros_like(c)
        dst = [slice(None)] * x.ndim
        src = [slice(None)] * x.ndim
        dst[ax], src[ax] = slice(1, None), slice(None, -1)
        shifted[tuple(dst)] = c[tuple(src)]
        c = shifted
    return (np.flip(c, ax) if rev else c,)
