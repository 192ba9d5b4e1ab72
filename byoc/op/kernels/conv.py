"""Conv (im2col + one batched BLAS matmul) and ConvTranspose (matmul + col2im) kernels."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..type_rules import conv_shape_problem
from ._registry import arg, hold_blas, kernel, via_float32
from ._window import Window, pad_spatial, window


def _im2col(xp: np.ndarray, w: Window) -> np.ndarray:
    """Read-only view (N, C, *kernel, *out) of the padded input; no data is copied."""
    sn, sc, *ss = xp.strides
    shape = (*xp.shape[:2], *w.kernel, *w.out)
    strides = (
        sn,
        sc,
        *(st * d for st, d in zip(ss, w.dilations)),
        *(st * s for st, s in zip(ss, w.strides)),
    )
    if not xp.flags.c_contiguous:
        return as_strided(xp, shape, strides, writeable=False)
    view = np.ndarray(shape, xp.dtype, xp, 0, strides)  # as_strided costs 5 us of Python
    view.flags.writeable = False
    return view


_IM2COL_BYTES = 32 << 20  # above this, im2col is built one band of output rows at a time


def _im2col_matmul(attrs: dict, xp: np.ndarray, wt: np.ndarray, w: Window, group: int,
                   product=np.matmul, columns=None) -> np.ndarray:
    """Grouped conv as (G, Mg, Cg*K) @ (N, G, Cg*K, O): reshaping the strided view is the
    im2col copy, and one batched matmul covers every (sample, group) pair. ``product`` is that
    matmul and ``columns(view)`` the copy (the integer convs pass ones that stay exact and take
    the zero point off as they copy)."""
    n, c = xp.shape[:2]
    m, cg = wt.shape[:2]
    taps_k = math.prod(w.kernel)
    hold_blas(attrs, m // group * cg * taps_k * math.prod(w.out))
    wg = wt.reshape(group, m // group, cg * taps_k)
    view = _im2col(xp, w)
    copy = columns or (lambda v: v)
    rows, rest = w.out[0], math.prod(w.out[1:])
    itemsize = max(xp.itemsize, wt.itemsize)  # of the columns
    band = max(1, _IM2COL_BYTES // max(1, n * c * taps_k * rest * itemsize))
    if band >= rows:
        return product(wg, copy(view).reshape(n, group, cg * taps_k, rows * rest)).reshape(n, m, *w.out)
    y = None
    row_axis = 2 + len(w.kernel)
    for r0 in range(0, rows, band):
        r1 = min(rows, r0 + band)
        part = copy(view[(slice(None),) * row_axis + (slice(r0, r1),)])
        cols = product(wg, part.reshape(n, group, cg * taps_k, (r1 - r0) * rest))
        if y is None:
            y = np.empty((n, group, m // group, rows, rest), dtype=cols.dtype)
        y[:, :, :, r0:r1] = cols.reshape(n, group, m // group, r1 - r0, rest)
    return y.reshape(n, m, *w.out)


def _check_channels(op: str, attrs: dict, x: np.ndarray, wt: np.ndarray,
                    b: np.ndarray | None) -> None:
    problem = conv_shape_problem(op, x.shape, wt.shape, attrs.get("group", 1),
                                 None if b is None else b.shape)
    if problem:
        raise ValueError(problem)


@kernel("Conv")
@via_float32
def conv(attrs: dict, x: np.ndarray, wt: np.ndarray, *rest: np.ndarray | None) -> tuple:
    """N-D grouped convolution (NC + spatial layout) with optional bias."""
    b = arg(rest, 0)
    _check_channels("Conv", attrs, x, wt, b)
    w = window(attrs, x.shape[2:], wt.shape[2:])
    xp = pad_spatial(x, w.pads_begin, w.pads_end, 0)
    # Depthwise too: per-group (1, K) @ (K, O) products still beat a loop over kernel taps.
    y = _im2col_matmul(attrs, xp, wt, w, attrs.get("group", 1))
    if b is not None:
        y += b.reshape(-1, *(1,) * len(w.out))
    return (y,)


def _transpose_pads(
    attrs: dict, in_shape: tuple[int, ...], ext: list[int]
) -> tuple[list[int], list[int]]:
    """Output size and begin pads of ConvTranspose (explicit pads, auto_pad or output_shape)."""
    nd = len(in_shape)
    strides = attrs.get("strides") or [1] * nd
    out_pad = attrs.get("output_padding") or [0] * nd
    full = [s * (i - 1) + op + e for s, i, op, e in zip(strides, in_shape, out_pad, ext)]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    out_shape = attrs.get("output_shape")
    if out_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if out_shape:
            out = list(out_shape)[-nd:]
        else:
            out = [i * s for i, s in zip(in_shape, strides)]
        total = [f - o for f, o in zip(full, out)]
        # Spec (and onnxruntime): the odd pixel goes at the end only for SAME_UPPER; with
        # NOTSET + output_shape it goes at the start, like SAME_LOWER.
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        return out, begin
    pads = [0] * (2 * nd) if auto_pad == "VALID" else attrs.get("pads") or [0] * (2 * nd)
    return [f - pads[i] - pads[nd + i] for i, f in enumerate(full)], list(pads[:nd])


@kernel("ConvTranspose")
@via_float32
def conv_transpose(attrs: dict, x: np.ndarray, wt: np.ndarray, *rest: np.ndarray | None) -> tuple:
    """N-D grouped transposed convolution with optional bias."""
    b = arg(rest, 0)
    _check_channels("ConvTranspose", attrs, x, wt, b)
    n, c, *in_shape = x.shape
    group = attrs.get("group", 1)
    cg, mg, kernel_shape = c // group, wt.shape[1], tuple(wt.shape[2:])
    nd = len(kernel_shape)
    strides = attrs.get("strides") or [1] * nd
    dil = attrs.get("dilations") or [1] * nd
    ext = [(k - 1) * d + 1 for k, d in zip(kernel_shape, dil)]
    out, begin = _transpose_pads(attrs, tuple(in_shape), ext)
    n_taps, n_in = math.prod(kernel_shape), math.prod(in_shape)

    # cols[n, g, (mg, tap), i] = sum_c W[g, c, (mg, tap)] * X[n, g, c, i]
    wg = wt.reshape(group, cg, mg * n_taps).transpose(0, 2, 1)
    hold_blas(attrs, mg * n_taps * cg * n_in)
    cols = np.matmul(wg, x.reshape(n, group, cg, n_in)).reshape(n, group, mg, n_taps, *in_shape)

    # col2im: each tap adds a strided block; input i lands at output i * s + tap * d - begin.
    y = np.zeros((n, group, mg, *out), dtype=cols.dtype)
    for t, off in enumerate(np.ndindex(*kernel_shape)):
        dst, src = [], []
        for k, s, d, p, size, o in zip(off, strides, dil, begin, in_shape, out):
            shift = k * d - p
            lo = max(0, -(shift // s))  # first i with i * s + shift >= 0
            hi = min(size - 1, (o - 1 - shift) // s)
            if lo > hi:
                break
            dst.append(slice(lo * s + shift, hi * s + shift + 1, s))
            src.append(slice(lo, hi + 1))
        else:
            y[(slice(None),) * 3 + tuple(dst)] += cols[(slice(None),) * 3 + (t, *src)]
    y = y.reshape(n, mg * group, *out)
    if b is not None:
        y += b.reshape(-1, *(1,) * nd)
    return (y,)
