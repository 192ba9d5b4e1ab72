"""Dense and normalization kernels: MatMul, Gemm, *Normalization, Softmax family, Dropout, LRN.

Conv/ConvTranspose live in ``conv.py`` and pooling in ``pool.py``; they register into the same
table, this module only groups the "matrix + statistics" ops.
"""

from __future__ import annotations

import math

import numpy as np

from ..type_rules import matmul_shape_problem, shape_problem
from ._registry import arg, hold_blas, kernel, norm_axis, np_dtype, via_float32


def _scaled(v: np.ndarray, s: float) -> np.ndarray:
    """v * s keeping v's dtype (also for integer Gemm, where numpy would promote)."""
    if s == 1:
        return v
    return (v * s).astype(v.dtype, copy=False)


def _channel_shape(x: np.ndarray) -> tuple[int, ...]:
    """Shape that broadcasts a per-channel (axis 1) vector against ``x``."""
    return (x.shape[1],) + (1,) * (x.ndim - 2)


@kernel("MatMul")
@via_float32
def matmul(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """numpy.matmul semantics (batched, 1-D promotion)."""
    try:
        hold_blas(attrs, _product(a, b))
        return (np.matmul(a, b),)
    except (ValueError, IndexError):  # numpy's words for it, only if ours have none
        raise ValueError(matmul_shape_problem(a.shape, b.shape) or "cannot multiply "
                         f"{a.shape} by {b.shape}") from None


def _product(a: np.ndarray, b: np.ndarray) -> int:
    """Multiply-adds of one matrix product of a (batched) matmul: numpy calls BLAS per matrix."""
    m = a.shape[-2] if a.ndim > 1 else 1
    return m * a.shape[-1] * (b.shape[-1] if b.ndim > 1 else 1)


@kernel("Gemm")
@via_float32
def gemm(attrs: dict, a: np.ndarray, b: np.ndarray, *rest: np.ndarray | None) -> tuple:
    """alpha * op(A) @ op(B) + beta * C, C broadcast to (M, N)."""
    c = arg(rest, 0)
    problem = shape_problem("Gemm", [a.shape, b.shape, None if c is None else c.shape], attrs)
    if problem:
        raise ValueError(problem)
    if attrs.get("transA", 0):
        a = a.T
    if attrs.get("transB", 0):
        b = b.T
    hold_blas(attrs, _product(a, b))
    y = _scaled(np.matmul(a, b), attrs.get("alpha", 1.0))
    beta = attrs.get("beta", 1.0)
    if c is not None and c.size and beta != 0:
        y = y + _scaled(c, beta)
    return (y,)


def batch_norm_coefficients(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
                            var: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Inference BatchNormalization as ``x * k + shift``, with onnxruntime's roundings (1 / sqrt
    first, then times scale): a quantizer downstream turns a last-bit difference into a whole
    step, so the host, native's folding and onnxruntime must agree to the bit."""
    k = (1 / np.sqrt(var + eps)).astype(var.dtype, copy=False) * scale
    return k, bias - mean * k


@kernel("BatchNormalization")
def batch_normalization(attrs: dict, x: np.ndarray, scale: np.ndarray, bias: np.ndarray,
                        mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Inference: normalize with the running stats. training_mode=1: batch stats, and also
    return the updated running mean and variance."""
    problem = shape_problem("BatchNormalization",
                            [x.shape, scale.shape, bias.shape, mean.shape, var.shape], attrs)
    if problem:
        raise ValueError(problem)
    eps = attrs.get("epsilon", 1e-5)
    shape = _channel_shape(x)
    if not attrs.get("training_mode", 0):
        k, shift = batch_norm_coefficients(scale, bias, mean, var, eps)
        y = x * k.reshape(shape) + shift.reshape(shape)
        return (y.astype(x.dtype, copy=False),)
    momentum = attrs.get("momentum", 0.9)
    axes = (0,) + tuple(range(2, x.ndim))
    cur_mean = x.mean(axis=axes)
    cur_var = x.var(axis=axes)
    k = scale / np.sqrt(cur_var + eps)
    y = (x - cur_mean.reshape(shape)) * k.reshape(shape) + bias.reshape(shape)
    run_mean = mean * momentum + cur_mean * (1 - momentum)
    run_var = var * momentum + cur_var * (1 - momentum)
    return (
        y.astype(x.dtype, copy=False),
        run_mean.astype(mean.dtype, copy=False),
        run_var.astype(var.dtype, copy=False),
    )


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float):
    """(x - mean) * inv_std over ``axes`` plus the (keepdims) mean and inv_std."""
    mean = x.mean(axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv = np.reciprocal(np.sqrt(var + eps))
    return d * inv, mean, inv


def _stash_dtype(attrs: dict) -> np.dtype:
    return np_dtype(attrs.get("stash_type", 1))


@kernel("LayerNormalization")
def layer_normalization(attrs: dict, x: np.ndarray, scale: np.ndarray,
                        *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Normalize over axes [axis, rank); outputs Y, Mean, InvStdDev (stash_type dtype)."""
    b = arg(rest, 0)
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    u = _stash_dtype(attrs)
    norm, mean, inv = _normalize(x.astype(u, copy=False), tuple(range(axis, x.ndim)),
                                 attrs.get("epsilon", 1e-5))  # fmt: skip
    y = norm.astype(x.dtype, copy=False) * scale
    if b is not None:
        y += b
    return y, mean, inv


@kernel("InstanceNormalization")
@via_float32
def instance_normalization(attrs: dict, x: np.ndarray, scale: np.ndarray,
                           bias: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Per (sample, channel) normalization over the spatial axes, then per-channel affine."""
    norm, _, _ = _normalize(x, tuple(range(2, x.ndim)), attrs.get("epsilon", 1e-5))
    shape = _channel_shape(x)
    return (norm * scale.reshape(shape) + bias.reshape(shape),)


@kernel("GroupNormalization")
def group_normalization(attrs: dict, x: np.ndarray, scale: np.ndarray,
                        bias: np.ndarray) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Normalize each group of C/num_groups channels, then per-channel scale/bias (opset 21)."""
    groups = attrs["num_groups"]
    per_group = x.shape[1] // groups * math.prod(x.shape[2:])  # not -1: the batch may be 0
    xg = x.reshape(x.shape[0], groups, per_group).astype(_stash_dtype(attrs), copy=False)
    norm, _, _ = _normalize(xg, (2,), attrs.get("epsilon", 1e-5))
    norm = norm.reshape(x.shape).astype(x.dtype, copy=False)
    shape = _channel_shape(x)
    return (norm * scale.reshape(shape) + bias.reshape(shape),)


@kernel("LpNormalization")
@via_float32
def lp_normalization(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x / ||x||_p along axis (p in {1, 2}); zero vectors stay zero like onnxruntime."""
    axis = attrs.get("axis", -1)
    if attrs.get("p", 2) == 1:
        norm = np.abs(x).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.square(x).sum(axis=axis, keepdims=True))
    safe = np.where(norm == 0, norm.dtype.type(1), norm)
    return (x / safe,)


@kernel("Softmax")
@via_float32
def softmax(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """exp(x) / sum(exp(x)) along axis (default -1), max-shifted for stability."""
    axis = attrs.get("axis", -1)
    if x.size == 0:  # an empty axis (or batch): nothing to normalize, as onnxruntime
        return (np.empty_like(x),)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return (e,)


@kernel("LogSoftmax")
@via_float32
def log_softmax(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x - logsumexp(x) along axis (default -1)."""
    axis = attrs.get("axis", -1)
    if x.size == 0:
        return (np.empty_like(x),)
    d = x - x.max(axis=axis, keepdims=True)
    return (d - np.log(np.exp(d).sum(axis=axis, keepdims=True)),)


@kernel("Hardmax")
def hardmax(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """1 at the first maximum along axis, 0 elsewhere."""
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    y = np.zeros_like(x)
    if x.size == 0:
        return (y,)
    np.put_along_axis(y, np.expand_dims(x.argmax(axis=axis), axis), 1, axis=axis)
    return (y,)


@kernel("Dropout")
def dropout(attrs: dict, x: np.ndarray, *rest: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Identity with an all-True mask unless training_mode is set (then seeded random mask)."""
    ratio, training = arg(rest, 0), arg(rest, 1)
    r = 0.5 if ratio is None else float(ratio)
    if training is None or not bool(training) or r == 0:
        return x, np.ones(x.shape, dtype=bool)
    # Same generator and draw as onnx.reference / the ONNX conformance data for a given seed.
    mask = np.random.RandomState(attrs.get("seed")).uniform(0.0, 1.0, x.shape) >= r
    return (mask * x * (1 / (1 - r))).astype(x.dtype, copy=False), mask


@kernel("LRN")
@via_float32
def lrn(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x / (bias + alpha / size * sum of squares over a channel window) ** beta."""
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    c = x.shape[1]
    lo = (size - 1) // 2
    sq = np.pad(np.square(x), [(0, 0), (lo, size - 1 - lo)] + [(0, 0)] * (x.ndim - 2))
    acc = sq[:, :c].copy()
    for i in range(1, size):
        acc += sq[:, i : i + c]
    return (x / np.power(acc * (alpha / size) + bias, beta),)
