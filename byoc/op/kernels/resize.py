"""Resize (opset 19): nearest / linear / cubic, every coordinate transformation mode.

Interpolation is separable, so the N-D resize is one vectorized 1-D pass per resized axis:
each output coordinate gets a few (source index, weight) taps gathered with ``np.take``.
Coordinates are computed in float32 like onnxruntime, which matters for nearest rounding.
"""

from __future__ import annotations

import numpy as np

from ._registry import arg, kernel, norm_axes, via_float32

F32 = np.float32


def _source_coords(
    ctm: str, n_in: int, n_out: int, scale: np.float32, roi: tuple[float, float] | None
) -> np.ndarray:
    """Map output positions 0..n_out-1 to (float32) input coordinates."""
    x = np.arange(n_out, dtype=F32)
    if ctm == "half_pixel":
        return (x + F32(0.5)) / scale - F32(0.5)
    if ctm == "pytorch_half_pixel":
        if n_out <= 1:
            return np.zeros(n_out, F32)
        return (x + F32(0.5)) / scale - F32(0.5)
    if ctm == "half_pixel_symmetric":
        adjustment = F32(n_out) / (scale * F32(n_in))
        offset = F32(n_in) / F32(2) * (F32(1) - adjustment)
        return offset + (x + F32(0.5)) / scale - F32(0.5)
    if ctm == "align_corners":
        if n_out == 1:
            return np.zeros(1, F32)
        return x * F32(n_in - 1) / F32(n_out - 1)
    if ctm == "asymmetric":
        return x / scale
    if ctm == "tf_crop_and_resize":
        start, end = (F32(v) for v in roi)
        if n_out == 1:
            return np.full(1, F32(0.5) * (start + end) * F32(n_in - 1), F32)
        return start * F32(n_in - 1) + x * (end - start) * F32(n_in - 1) / F32(n_out - 1)
    raise ValueError(f"unknown coordinate_transformation_mode {ctm!r}")


def _nearest(xo: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.ceil(xo - F32(0.5))
    if mode == "round_prefer_ceil":
        return np.floor(xo + F32(0.5))
    if mode == "floor":
        return np.floor(xo)
    if mode == "ceil":
        return np.ceil(xo)
    raise ValueError(f"unknown nearest_mode {mode!r}")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic convolution weights for taps at offsets -1, 0, 1, 2 from floor(x)."""
    a = F32(a)

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)])


def _taps(attrs: dict, xo: np.ndarray, n_in: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(indices, weights) of shape (taps, n_out); weights None for nearest."""
    mode = attrs.get("mode", "nearest")
    last = n_in - 1
    if mode == "nearest":
        idx = _nearest(xo, attrs.get("nearest_mode", "round_prefer_floor"))
        return np.clip(idx, 0, last).astype(np.intp)[None], None
    if mode == "linear":
        xc = np.clip(xo, F32(0), F32(last))
        x0 = np.floor(xc)
        w1 = xc - x0
        i0 = x0.astype(np.intp)
        return np.stack([i0, np.minimum(i0 + 1, last)]), np.stack([F32(1) - w1, w1])
    if mode == "cubic":
        x0 = np.floor(xo)
        w = _cubic_weights(xo - x0, attrs.get("cubic_coeff_a", -0.75))
        raw = x0.astype(np.intp) + np.arange(-1, 3).reshape(4, 1)
        if attrs.get("exclude_outside", 0):
            w = np.where((raw < 0) | (raw > last), F32(0), w)
            w = w / w.sum(axis=0, keepdims=True)
        return np.clip(raw, 0, last), w
    raise ValueError(f"unknown Resize mode {mode!r}")


def _resample_axis(x: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray | None):
    if w is None:
        return np.take(x, idx[0], axis=axis)
    bshape = (-1,) + (1,) * (x.ndim - axis - 1)
    out = np.take(x, idx[0], axis=axis) * w[0].reshape(bshape)
    for t in range(1, len(idx)):
        out += np.take(x, idx[t], axis=axis) * w[t].reshape(bshape)
    return out


def _plan(
    attrs: dict, shape: tuple, axes: tuple, scales: np.ndarray | None, sizes: np.ndarray | None
) -> tuple[list[int], list[np.float32]]:
    """Per resized axis: (output length, float32 scale used by the coordinate transform)."""
    n_in = [shape[a] for a in axes]
    if scales is not None and scales.size:
        sc = [F32(s) for s in scales.reshape(-1).tolist()]
        return [int(np.floor(F32(n) * s)) for n, s in zip(n_in, sc)], sc
    sz = [int(v) for v in sizes.reshape(-1).tolist()]
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return sz, [F32(o) / F32(n) for o, n in zip(sz, n_in)]
    ratios = [F32(o) / F32(n) for o, n in zip(sz, n_in)]
    s = min(ratios) if policy == "not_larger" else max(ratios)
    return [int(np.floor(s * F32(n) + F32(0.5))) for n in n_in], [s] * len(axes)


@kernel("Resize")
@via_float32
def resize(attrs: dict, x: np.ndarray, *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Resize by ``scales`` or to ``sizes`` (optionally only on ``axes``); antialias=0 only."""
    if attrs.get("antialias", 0):
        raise NotImplementedError("Resize antialias=1 is not implemented by the host kernels")
    roi, scales, sizes = arg(rest, 0), arg(rest, 1), arg(rest, 2)
    axes = norm_axes(attrs["axes"], x.ndim) if attrs.get("axes") else tuple(range(x.ndim))
    out_len, sc = _plan(attrs, x.shape, axes, scales, sizes)
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    crop = ctm == "tf_crop_and_resize"
    roi_l = roi.reshape(-1).tolist() if roi is not None and roi.size else None
    if crop and roi_l is None:
        raise ValueError("tf_crop_and_resize needs roi")

    is_int = not np.issubdtype(x.dtype, np.floating)
    y = x.astype(F32) if is_int and attrs.get("mode", "nearest") != "nearest" else x
    outside = []
    for i, (a, n_out, s) in enumerate(zip(axes, out_len, sc)):
        n_in = x.shape[a]
        box = (roi_l[i], roi_l[len(axes) + i]) if crop else None
        if n_out == n_in and s == 1 and (not crop or box == (0.0, 1.0)):
            continue  # identity along this axis for every transformation mode
        xo = _source_coords(ctm, n_in, n_out, s, box)
        if crop:
            outside.append((a, (xo < 0) | (xo > F32(n_in - 1))))
        y = _resample_axis(y, a, *_taps(attrs, xo, n_in))
    if outside:
        y = y.copy() if y is x else y
        fill = attrs.get("extrapolation_value", 0.0)
        for a, mask in outside:
            index = [slice(None)] * y.ndim
            index[a] = mask
            y[tuple(index)] = fill
    if is_int and y.dtype != x.dtype:
        info = np.iinfo(x.dtype)  # onnxruntime truncates the interpolated value
        y = np.clip(y, info.min, info.max)
    return (y.astype(x.dtype, copy=False),)
