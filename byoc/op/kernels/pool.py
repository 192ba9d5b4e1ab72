"""Pooling kernels: MaxPool (with Indices), AveragePool, GlobalAveragePool, GlobalMaxPool.

Windows are reduced by looping over the kernel taps (a handful of strided whole-tensor passes)
rather than over output elements.
"""

from __future__ import annotations

import math

import numpy as np

from ._registry import kernel, via_float32
from ._window import Window, end_extra, pad_spatial, tap_slices, taps, window


def _lowest(dtype: np.dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


@kernel("MaxPool")
def max_pool(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Max over each window; second output is the flat argmax index into X (first max wins).

    Indices are skipped when the executor passes ``attrs["_num_outputs"] == 1``.
    """
    w = window(attrs, x.shape[2:], attrs["kernel_shape"], bool(attrs.get("ceil_mode", 0)))
    fill = _lowest(x.dtype)
    extra = end_extra(w, x.shape[2:])
    xp = pad_spatial(x, w.pads_begin, [e + f for e, f in zip(w.pads_end, extra)], fill)
    views = [xp[(slice(None), slice(None), *tap_slices(w, off))] for off in taps(w)]
    y = np.full((*x.shape[:2], *w.out), fill, dtype=x.dtype)
    for v in views:
        np.maximum(y, v, out=y)
    if attrs.get("_num_outputs", 2) < 2:
        return (y,)
    # Winning tap per output: scan taps backwards so the first (row-major) maximum wins,
    # as in onnxruntime. Cheaper than tracking it with masked copies during the max pass.
    best = np.zeros(y.shape, dtype=np.int32)
    for t in range(len(views) - 1, -1, -1):
        np.copyto(best, t, where=views[t] == y)
    return y, _flat_indices(best, w, x.shape, attrs.get("storage_order", 0))


def _flat_indices(best: np.ndarray, w: Window, shape: tuple, storage_order: int) -> np.ndarray:
    """Turn per-output winning tap numbers into flat indices of the unpadded input."""
    nd, spatial = len(w.kernel), shape[2:]
    if storage_order:  # column-major spatial part; batch/channel offset stays row-major
        steps = [math.prod(spatial[:i]) for i in range(nd)]
    else:
        steps = [math.prod(spatial[i + 1 :]) for i in range(nd)]
    # index = (n*C + c) * prod(spatial) + window start offset + offset of the winning tap
    tap_offset = np.array(
        [sum(k * d * st for k, d, st in zip(off, w.dilations, steps)) for off in taps(w)],
        dtype=np.int64,
    )
    idx = tap_offset[best]
    for i in range(nd):
        start = np.arange(w.out[i], dtype=np.int64) * w.strides[i] - w.pads_begin[i]
        idx += (start * steps[i]).reshape((-1,) + (1,) * (nd - 1 - i))
    nc = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[:2] + (1,) * nd)
    idx += nc * math.prod(spatial)
    return idx


def _window_counts(w: Window, in_shape: tuple, include_pad: bool) -> np.ndarray:
    """Number of counted taps per output position (separable: product of 1-D counts)."""
    counts = np.ones((), dtype=np.int64)
    extra = end_extra(w, in_shape)
    for i, n in enumerate(in_shape):
        b, f = w.pads_begin[i], w.pads_end[i]
        total = b + n + f + extra[i]
        mask = np.zeros(total, dtype=np.int64)
        if include_pad:
            mask[: b + n + f] = 1  # explicit pads count, the ceil_mode overrun does not
        else:
            mask[b : b + n] = 1
        c1 = sum(
            mask[k * w.dilations[i] :][: (w.out[i] - 1) * w.strides[i] + 1 : w.strides[i]]
            for k in range(w.kernel[i])
        )
        counts = np.multiply.outer(counts, c1)
    return counts


@kernel("AveragePool")
@via_float32
def average_pool(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Mean over each window, padding counted only if count_include_pad=1."""
    w = window(attrs, x.shape[2:], attrs["kernel_shape"], bool(attrs.get("ceil_mode", 0)))
    extra = end_extra(w, x.shape[2:])
    xp = pad_spatial(x, w.pads_begin, [e + f for e, f in zip(w.pads_end, extra)], 0)
    acc = np.zeros((*x.shape[:2], *w.out), dtype=x.dtype)
    for off in taps(w):
        acc += xp[(slice(None), slice(None), *tap_slices(w, off))]
    counts = _window_counts(w, x.shape[2:], bool(attrs.get("count_include_pad", 0)))
    acc /= np.maximum(counts, 1).astype(x.dtype)
    return (acc,)


@kernel("GlobalAveragePool")
@via_float32
def global_average_pool(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Mean over all spatial axes, kept as size-1 dims."""
    if x.dtype != np.float32 or x.ndim < 3:
        return (x.mean(axis=tuple(range(2, x.ndim)), keepdims=True),)
    flat = x.reshape(x.shape[0] * x.shape[1], math.prod(x.shape[2:]))  # not -1: n may be 0
    return ((mlas_sum(flat) / np.float32(flat.shape[1])).reshape(*x.shape[:2], *[1] * (x.ndim - 2)),)


def mlas_sum(rows: np.ndarray) -> np.ndarray:
    """Each row's float32 sum in onnxruntime's order (its global pooling kernel): four lanes
    summing every fourth element, lanes joined as (l0 + l2) + (l1 + l3), then the tail one by
    one. numpy's pairwise sum rounds differently, and a quantizer after the pool turns that
    last bit into a whole step (tests/test_quantized_models.py)."""
    n4 = rows.shape[1] // 4 * 4
    if n4:  # a reduction over a middle axis adds its rows in order
        lanes = np.add.reduce(rows[:, :n4].reshape(rows.shape[0], n4 // 4, 4), axis=1)
        total = (lanes[:, 0] + lanes[:, 2]) + (lanes[:, 1] + lanes[:, 3])
    else:
        total = np.zeros(rows.shape[0], rows.dtype)
    for k in range(n4, rows.shape[1]):
        total = total + rows[:, k]
    return total


@kernel("GlobalMaxPool")
def global_max_pool(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Max over all spatial axes, kept as size-1 dims."""
    return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)
