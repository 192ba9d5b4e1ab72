"""Integer kernels of quantized models: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv,
and the QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear around them.

numpy multiplies integer matrices without BLAS (a plain loop, tens of times slower than sgemm).
These kernels take the zero points off in float32 and multiply through BLAS, where the result
is still exact (see ``_exact_matmul``), then requantize as onnxruntime does: the int32
accumulator (plus the bias) converted to float32, times the float32 scale
``x_scale * w_scale / y_scale``, clipped, rounded half to even, plus the output zero point.
What depends only on constants of the graph (centered weights, output scales) is computed at the
first call. Results equal onnxruntime's to the bit (tests/op/test_quantized_kernels.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._registry import arg, hold_blas, kernel
from ._window import pad_spatial, window
from .conv import _im2col_matmul

#: float32 holds every integer of magnitude up to 2**24 exactly.
EXACT_FLOAT32 = 1 << 24
_RANGE = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
          for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32)}


def once(attrs: dict, key: str, args: tuple[int, ...], make: Callable[[], Any]) -> Any:
    """``make()``, kept for the next calls when the inputs at ``args`` are constants of the graph
    (``attrs["_constant"]``, set by the kernel factory); a race computes the same value twice."""
    value = attrs.get(key)
    if value is not None:
        return value
    value = make()
    constant = attrs.get("_constant", ())
    if all(i < len(constant) and constant[i] for i in args):
        attrs[key] = value
    return value


def _bound(dtype: np.dtype, zero_point: np.ndarray | None) -> int:
    """The largest |q - zero_point| a value q of ``dtype`` can have, from the dtype's range and
    the zero points alone (no pass over the data)."""
    low, high = _RANGE[dtype]
    if zero_point is None or not zero_point.size:
        return max(high, -low)
    zp = zero_point.astype(np.int64)
    return int(np.max(np.maximum(high - zp, zp - low)))


def _centered(q: np.ndarray, zero_point: np.ndarray | None, shape: tuple[int, ...] | None = None
              ) -> tuple[np.ndarray, int]:
    """``q - zero_point`` in float32 (exact: small integers) and its ``_bound``. ``shape``
    reshapes a per-row or per-channel zero point to broadcast against ``q``."""
    bound = _bound(q.dtype, zero_point)
    if zero_point is None or not zero_point.size:
        return q.astype(np.float32), bound
    zp = zero_point.astype(np.float32)
    if shape is not None and zp.ndim == 1 and zp.size > 1:
        zp = zp.reshape(shape)
    return np.subtract(q, zp, dtype=np.float32), bound


def _exact_matmul(a: np.ndarray, b: np.ndarray, bound: int, as_float: bool = False
                  ) -> np.ndarray:
    """``a @ b`` as int32 for float32 arrays of integers, each product at most ``bound`` in
    magnitude; with ``as_float``, a product of one chunk comes back as the float32 it is.

    Why float32 BLAS is exact here: every partial sum of k products is at most k * bound in
    magnitude, whatever order (and FMA) BLAS sums in, and float32 holds each integer up to 2**24
    exactly. So k <= 2**24 / bound products sum exactly: 514 for uint8 activations (|x - zp| <=
    255) times int8 weights with zero point 0 (|w| <= 128), 258 for the worst case 255 x 255.
    Longer sums are cut into chunks of at most that many products along k, each exact, added in
    int32 (wrapping at 2**32 as onnxruntime's int32 accumulator does, so any order agrees)."""
    k = a.shape[-1]
    chunk = max(1, EXACT_FLOAT32 // max(1, bound))
    if k <= chunk:
        y = np.matmul(a, b)
        return y if as_float else y.astype(np.int32)
    pieces = -(-k // chunk)
    step = -(-k // pieces)  # equal chunks: 2 x 288 for k = 576, not 514 + 62
    total = np.matmul(a[..., :step], b[..., :step, :]).astype(np.int32)
    for k0 in range(step, k, step):
        total += np.matmul(a[..., k0:k0 + step], b[..., k0:k0 + step, :]).astype(np.int32)
    return total


def _integer_matmul(attrs: dict, a, b, a_zp, b_zp, args: tuple[int, int],
                    as_float: bool = False) -> np.ndarray:
    """(a - a_zp) @ (b - b_zp) in int32 (see ``_exact_matmul`` for ``as_float``); a_zp per row
    of a or per tensor, b_zp per column of b or per tensor (ONNX's MatMulInteger and
    QLinearMatMul). ``args``: the positions of b and b_zp among the op's inputs."""
    fa, bound_a = _centered(a, a_zp, (-1, 1))
    fb, bound_b = once(attrs, "_b", args, lambda: _centered(b, b_zp))
    m = a.shape[-2] if a.ndim > 1 else 1
    hold_blas(attrs, m * a.shape[-1] * (b.shape[-1] if b.ndim > 1 else 1))
    # numpy's 1-D promotion: a vector is one row (a) or one column (b), dropped afterwards.
    y = _exact_matmul(fa[None, :] if a.ndim == 1 else fa, fb[:, None] if b.ndim == 1 else fb,
                      bound_a * bound_b, as_float)
    if a.ndim == 1:
        y = y[..., 0, :]
    return y[..., 0] if b.ndim == 1 else y


def _integer_conv(attrs: dict, x, w, x_zp, w_zp, args: tuple[int, int],
                  as_float: bool = False) -> np.ndarray:
    """The convolution of (x - x_zp) and (w - w_zp) in int32 (ONNX's ConvInteger and
    QLinearConv; see ``_exact_matmul`` for ``as_float``): im2col and one batched BLAS product,
    as the float Conv, kept exact. ``args``: the positions of w and w_zp among the op's inputs
    (x_zp is input 2 of both)."""
    if x_zp is not None and x_zp.size > 1:
        raise NotImplementedError("a zero point per channel of x")
    fw, bound_w = once(attrs, "_w", args,
                       lambda: _centered(w, w_zp, (-1,) + (1,) * (w.ndim - 1)))
    shapes, win = attrs.get("_window", (None, None))  # one tuple: threads may race here
    if shapes != (x.shape, w.shape):
        win = window(attrs, x.shape[2:], w.shape[2:])
        attrs["_window"] = ((x.shape, w.shape), win)
    # x padded with its zero point in its own type; the im2col copy takes the zero point off.
    zp = 0 if x_zp is None or not x_zp.size else x_zp.reshape(()).item()
    xp = pad_spatial(x, win.pads_begin, win.pads_end, zp)
    zp32 = np.float32(zp)
    bound = once(attrs, "_bound", (2,), lambda: _bound(x.dtype, x_zp)) * bound_w
    return _im2col_matmul(attrs, xp, fw, win, attrs.get("group", 1),
                          lambda wg, cols: _exact_matmul(wg, cols, bound, as_float),
                          lambda view: np.subtract(view, zp32, dtype=np.float32, order="C"))


def _saturate(f: np.ndarray, low: float, high: float) -> None:
    """Clip in place as MLAS does, max then min, NaN becoming ``low`` (np.clip is three times
    slower on small tensors, and keeps NaN)."""
    np.fmax(f, low, out=f)
    np.fmin(f, high, out=f)


def _requantize(acc: np.ndarray, scale: np.ndarray, y_zp: np.ndarray) -> np.ndarray:
    """onnxruntime's requantization of an int32 accumulator: float32(acc) * scale, clipped to
    the output type's range around the zero point, rounded half to even, plus the zero point.
    ``acc`` may already be that float32 (then it is overwritten)."""
    low, high = _RANGE[y_zp.dtype]
    zp = y_zp.astype(np.float32)
    if acc.dtype == np.float32:
        f = acc
        f *= scale
    else:
        f = np.multiply(acc, scale, dtype=np.float32)  # int32 -> float32 first, as onnxruntime
    _saturate(f, low - zp, high - zp)
    np.rint(f, out=f)
    f += zp
    return f.astype(y_zp.dtype)


def _output_scale(x_scale, w_scale, y_scale, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """x_scale * w_scale / y_scale in float32, as onnxruntime computes it (per tensor, or per
    output channel / column reshaped to ``shape``)."""
    scale = (np.asarray(x_scale, np.float32) * np.asarray(w_scale, np.float32)
             / np.asarray(y_scale, np.float32)).astype(np.float32)
    if shape is not None and scale.ndim == 1 and scale.size > 1:
        scale = scale.reshape(shape)
    return scale


@kernel("MatMulInteger")
def matmul_integer(attrs: dict, a: np.ndarray, b: np.ndarray, *rest) -> tuple[np.ndarray]:
    return (_integer_matmul(attrs, a, b, arg(rest, 0), arg(rest, 1), (1, 3)),)


@kernel("ConvInteger")
def conv_integer(attrs: dict, x: np.ndarray, w: np.ndarray, *rest) -> tuple[np.ndarray]:
    return (_integer_conv(attrs, x, w, arg(rest, 0), arg(rest, 1), (1, 3)),)


@kernel("QLinearMatMul")
def qlinear_matmul(attrs: dict, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
                   ) -> tuple[np.ndarray]:
    acc = _integer_matmul(attrs, a, b, a_zp, b_zp, (3, 5), as_float=True)

    def scale():
        per_row = np.asarray(a_scale, np.float32)
        if per_row.ndim == 1 and per_row.size > 1:  # per row of a
            per_row = per_row.reshape(-1, 1)
        return _output_scale(per_row, b_scale, y_scale)

    return (_requantize(acc, once(attrs, "_scale", (1, 4, 6), scale), y_zp),)


@kernel("QLinearConv")
def qlinear_conv(attrs: dict, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, *rest
                 ) -> tuple[np.ndarray]:
    acc = _integer_conv(attrs, x, w, x_zp, w_zp, (3, 5), as_float=True)
    spatial = (1,) * (x.ndim - 2)
    bias = arg(rest, 0)
    if bias is not None:
        # onnxruntime converts the int32 sum acc + bias to float32, one rounding. When acc is
        # the float32 of one exact chunk and the bias is exact in float32 too (|bias| <= 2**24),
        # their float32 sum is that same rounding of the same exact sum.
        small, b32 = once(attrs, "_bias", (8,), lambda: (
            int(np.max(np.abs(bias.astype(np.int64)), initial=0)) <= EXACT_FLOAT32,
            bias.astype(np.float32).reshape(-1, *spatial)))
        if acc.dtype == np.float32 and small:
            acc += b32
        else:
            acc = acc.astype(np.int32, copy=False)
            acc += bias.astype(np.int32).reshape(-1, *spatial)  # wrapping like onnxruntime's
    scale = once(attrs, "_scale", (1, 4, 6),
                 lambda: _output_scale(x_scale, w_scale, y_scale, (-1, *spatial)))
    return (_requantize(acc, scale, y_zp),)


# -- quantize and dequantize, as onnxruntime rounds them -----------------------------------------

_ONNX_INT = {2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16}  # output_dtype values we run


def _per_axis(v: np.ndarray, x: np.ndarray, attrs: dict) -> np.ndarray:
    """A scale or zero point shaped to broadcast against ``x``: a scalar as is, a 1-D one along
    ``axis``; blocked quantization (block_size) is left to onnx.reference."""
    if attrs.get("block_size", 0) or v.ndim > 1:
        raise NotImplementedError("blocked quantization")
    if v.ndim == 0 or v.size == 1 and x.ndim == 0:
        return v.reshape(())
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return v.reshape((-1,) + (1,) * (x.ndim - axis - 1))


def _quantize(x: np.ndarray, scale, zp, dtype) -> np.ndarray:
    """onnxruntime's MlasQuantizeLinear: x / scale, clipped to the type's range around the
    zero point, rounded half to even, plus the zero point (all in float32)."""
    low, high = _RANGE[np.dtype(dtype)]
    f = np.divide(x, scale, dtype=np.float32)
    _saturate(f, np.float32(low) - zp, np.float32(high) - zp)
    np.rint(f, out=f)
    f += zp
    return f.astype(dtype)


@kernel("QuantizeLinear")
def quantize_linear(attrs: dict, x: np.ndarray, scale: np.ndarray, *rest) -> tuple[np.ndarray]:
    zero_point = arg(rest, 0)
    if x.dtype != np.float32 or scale.dtype != np.float32 or attrs.get("precision"):
        raise NotImplementedError("QuantizeLinear of other than float32")
    if zero_point is not None:
        dtype = zero_point.dtype
    else:
        dtype = _ONNX_INT.get(attrs.get("output_dtype", 0) or 2)
    if dtype is None or np.dtype(dtype) not in map(np.dtype, _ONNX_INT.values()):
        raise NotImplementedError(f"QuantizeLinear to {dtype}")
    zp, scale = once(attrs, f"_params{x.ndim}", (1, 2), lambda: (
        np.float32(0) if zero_point is None else
        _per_axis(zero_point, x, attrs).astype(np.float32), _per_axis(scale, x, attrs)))
    return (_quantize(x, scale, zp, dtype),)


@kernel("DequantizeLinear")
def dequantize_linear(attrs: dict, x: np.ndarray, scale: np.ndarray, *rest) -> tuple[np.ndarray]:
    """onnxruntime's: float32(int32(x) - zero_point) * scale."""
    zero_point = arg(rest, 0)
    if scale.dtype != np.float32 or attrs.get("output_dtype", 0) not in (0, 1) or \
            x.dtype not in _RANGE:
        raise NotImplementedError("DequantizeLinear of other types")
    zp, scale = once(attrs, f"_params{x.ndim}", (1, 2), lambda: (
        None if zero_point is None else _per_axis(zero_point, x, attrs).astype(np.int32),
        _per_axis(scale, x, attrs)))
    if x.dtype == np.int32:
        centered = x if zp is None else x - zp  # int32, wrapping as onnxruntime's
        y = centered.astype(np.float32)
    else:  # 8 and 16 bits: x - zp is a small integer, exact in float32 directly
        y = x.astype(np.float32) if zp is None else np.subtract(x, zp, dtype=np.float32)
    y *= scale
    return (y,)


@kernel("DynamicQuantizeLinear")
def dynamic_quantize_linear(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """uint8 with the scale and zero point that map [min(x, 0), max(x, 0)] onto [0, 255], as
    onnxruntime computes them (float32; a scale of 1 when x is all zeros)."""
    if x.dtype != np.float32:
        raise NotImplementedError("DynamicQuantizeLinear of other than float32")
    low = min(np.float32(x.min()), np.float32(0)) if x.size else np.float32(0)
    high = max(np.float32(x.max()), np.float32(0)) if x.size else np.float32(0)
    scale = np.float32(1) if high == low else np.float32((high - low) / np.float32(255))
    zp = np.rint(np.clip(np.float32(0) - low / scale, np.float32(0), np.float32(255)))
    y = _quantize(x, scale, np.float32(zp), np.uint8)
    return y, np.asarray(scale, np.float32), np.asarray(zp, np.uint8)
