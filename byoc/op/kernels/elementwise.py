"""Elementwise ONNX kernels: arithmetic, math, activations, logic and bitwise ops.

All binary ops use numpy (multidirectional) broadcasting. Attribute floats are python floats,
which numpy treats as weak scalars, so float32 inputs stay float32. Activations are written
branch-free (max/min arithmetic): np.where on a random mask is several times slower than exp.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._registry import arg, kernel

# --------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------


@kernel("Add")
def add(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """A + B."""
    return (np.add(a, b),)


@kernel("Sub")
def sub(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """A - B."""
    return (np.subtract(a, b),)


@kernel("Mul")
def mul(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """A * B."""
    return (np.multiply(a, b),)


def _trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C / onnxruntime semantics, not numpy's floor).
    Where C traps, every backend gives one answer (docs/decisions.md): x / 0 is 0 (numpy's
    floor_divide gives it) and INT_MIN / -1 is INT_MIN (floor_divide wraps)."""
    q = np.floor_divide(a, b)
    if np.issubdtype(q.dtype, np.unsignedinteger):
        return q
    # floor and trunc differ exactly when the division is inexact and the signs differ.
    fix = (a - q * b != 0) & ((a < 0) != (b < 0)) & (b != 0)
    return q + fix.astype(q.dtype)


@kernel("Div")
def div(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """A / B; integer division truncates toward zero like onnxruntime."""
    if np.issubdtype(a.dtype, np.integer):
        return (_trunc_divide(a, b),)
    return (np.divide(a, b),)


@kernel("Pow")
def pow_(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """A ** B with the dtype of the base."""
    if a.dtype == b.dtype and np.issubdtype(a.dtype, np.floating):
        if b.ndim == 0 and b == 2:
            return (np.square(a),)
        return (np.power(a, b),)
    if np.issubdtype(a.dtype, np.floating):
        return (np.power(a, b.astype(a.dtype)),)
    # Integer base: onnxruntime goes through std::pow in double, so negative exponents give 0
    # instead of numpy's ValueError.
    return (np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype),)


@kernel("Mod")
def mod(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """fmod=0: result takes the sign of B (numpy mod); fmod=1: sign of A (C fmod). For
    integers x % 0 is 0 and INT_MIN % -1 is 0 (numpy's answers; C would trap)."""
    return ((np.fmod if attrs.get("fmod", 0) else np.mod)(a, b),)


def _variadic(fn: np.ufunc, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
    if len(inputs) == 1:
        return inputs[0]
    return functools.reduce(fn, inputs)


@kernel("Max")
def max_(attrs: dict, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Elementwise max of all inputs."""
    return (_variadic(np.maximum, inputs),)


@kernel("Min")
def min_(attrs: dict, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Elementwise min of all inputs."""
    return (_variadic(np.minimum, inputs),)


@kernel("Sum")
def sum_(attrs: dict, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Elementwise sum of all inputs."""
    return (_variadic(np.add, inputs),)


@kernel("Mean")
def mean(attrs: dict, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Elementwise mean of all inputs."""
    total = _variadic(np.add, inputs)
    return ((total / len(inputs)).astype(inputs[0].dtype, copy=False),)


# --------------------------------------------------------------------------------------------
# Unary math
# --------------------------------------------------------------------------------------------


def _unary(op: str, fn: np.ufunc) -> None:
    def run(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
        return (fn(x),)

    run.__name__ = run.__qualname__ = op.lower()
    run.__doc__ = f"Elementwise {op} via numpy.{fn.__name__}."
    kernel(op)(run)


for _op, _fn in {
    "Abs": np.abs, "Neg": np.negative, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil,
    "Round": np.rint,  # rint rounds half to even, as ONNX requires
    "Sign": np.sign, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin,
    "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh,
    "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh, "Tanh": np.tanh,
    "Not": np.logical_not, "BitwiseNot": np.invert, "IsNaN": np.isnan,
}.items():  # fmt: skip
    _unary(_op, _fn)

# Eigen's float erf rational approximation (odd 9 / even 12 degree, valid for |x| <= c where
# erf is within 1e-7 of +-1). Evaluated in float64 its max abs error is ~6e-8 everywhere.
_ERF_P = (1.128379143519084, 0.18520832239976145, 0.050955695062380861,
          0.0034082910107109506, 0.00022905065861350646)  # fmt: skip
_ERF_Q = (1.0, 0.49746925110067538, 0.11098505178285362, 0.014070470171167667,
          0.0010179625278914885, 0.000023547966471313185, -1.1791602954361697e-7)  # fmt: skip
_ERF_CLAMP = 3.832506856900711
_ERF_BLOCK = 1 << 16  # keeps the ~25 Horner passes in cache: ~3x faster than whole-array


def _erf_block(x: np.ndarray) -> np.ndarray:
    z = np.clip(x, -_ERF_CLAMP, _ERF_CLAMP, dtype=np.float64)  # beyond c erf rounds to +-1
    z2 = z * z
    y = _horner(z2, _ERF_P) * z / _horner(z2, _ERF_Q)
    np.copyto(y, np.sign(z), where=z2 >= _ERF_CLAMP**2)  # exact +-1 in the saturated tails
    return y


def _horner(z: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    """sum(coeffs[i] * z**i), in place on one temporary."""
    acc = z * coeffs[-1]
    for c in coeffs[-2:0:-1]:
        acc += c
        acc *= z
    acc += coeffs[0]
    return acc


def erf_array(x: np.ndarray) -> np.ndarray:
    """Vectorized erf, abs error <= 1e-7, result in the dtype of ``x`` (any real dtype)."""
    x = np.asarray(x)
    flat = x.reshape(-1)
    out = np.empty(flat.shape, dtype=x.dtype if x.dtype.kind == "f" else np.float64)
    for i in range(0, flat.size, _ERF_BLOCK):
        out[i : i + _ERF_BLOCK] = _erf_block(flat[i : i + _ERF_BLOCK])
    return out.reshape(x.shape).astype(x.dtype, copy=False)


@kernel("Erf")
def erf(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Elementwise error function."""
    return (erf_array(x),)


@kernel("IsInf")
def isinf(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Infinity test, optionally restricted to one sign."""
    neg, pos = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
    if neg and pos:
        return (np.isinf(x),)
    if pos:
        return (np.isposinf(x),)
    if neg:
        return (np.isneginf(x),)
    return (np.zeros(x.shape, dtype=bool),)


# --------------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------------


def _zero(x: np.ndarray) -> np.generic:
    return x.dtype.type(0)


def _pos(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, _zero(x))


def _neg(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, _zero(x))


@kernel("Relu")
def relu(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """max(x, 0)."""
    return (_pos(x),)


@kernel("LeakyRelu")
def leaky_relu(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x if x >= 0 else alpha * x."""
    alpha = attrs.get("alpha", 0.01)
    if alpha == 0:
        return (_pos(x),)
    # For alpha <= 1, max(x, alpha x) picks x on the positive side and alpha x on the negative.
    return ((np.maximum if alpha <= 1 else np.minimum)(x, x * alpha),)


@kernel("PRelu")
def prelu(attrs: dict, x: np.ndarray, slope: np.ndarray) -> tuple[np.ndarray, ...]:
    """x if x >= 0 else slope * x (slope broadcast to x)."""
    return ((_pos(x) + _neg(x) * slope).astype(x.dtype, copy=False),)


@kernel("ThresholdedRelu")
def thresholded_relu(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x if x > alpha else 0."""
    return (np.where(x > attrs.get("alpha", 1.0), x, _zero(x)),)  # x * mask breaks on -inf


@kernel("Elu")
def elu(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x if x > 0 else alpha * (exp(x) - 1)."""
    # expm1 only sees the non-positive part, so large x cannot overflow.
    return (_pos(x) + np.expm1(_neg(x)) * attrs.get("alpha", 1.0),)


@kernel("Selu")
def selu(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """gamma * (x if x > 0 else alpha * (exp(x) - 1))."""
    alpha = attrs.get("alpha", 1.67326319217681884765625)
    gamma = attrs.get("gamma", 1.05070102214813232421875)
    return ((_pos(x) + np.expm1(_neg(x)) * alpha) * gamma,)


@kernel("Celu")
def celu(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    alpha = attrs.get("alpha", 1.0)
    return (_pos(x) + np.expm1(_neg(x) / alpha) * alpha,)


@kernel("Sigmoid")
def sigmoid(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """1 / (1 + exp(-x)).

    Stable as written in IEEE arithmetic: exp(-x) overflowing to inf gives exactly 0, and for
    large exp(-x) the quotient keeps full relative accuracy, so no |x| split is needed.
    """
    e = np.negative(x, out=np.empty(x.shape, x.dtype))  # out= keeps 0-d as an array
    np.exp(e, out=e)
    e += 1
    return (np.reciprocal(e, out=e),)


@kernel("HardSigmoid")
def hard_sigmoid(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """clip(alpha * x + beta, 0, 1)."""
    y = x * attrs.get("alpha", 0.2) + attrs.get("beta", 0.5)
    return (np.clip(y, 0, 1),)


@kernel("HardSwish")
def hard_swish(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x * clip(x / 6 + 0.5, 0, 1)."""
    return (x * np.clip(x * (1 / 6) + 0.5, 0, 1),)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x, _zero(x))  # log(1 + exp(x)) without overflow


@kernel("Softplus")
def softplus(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """log(1 + exp(x))."""
    return (_softplus(x),)


@kernel("Softsign")
def softsign(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x / (1 + |x|)."""
    return (x / (np.abs(x) + 1),)


@kernel("Mish")
def mish(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x * tanh(softplus(x))."""
    return (x * np.tanh(_softplus(x)),)


@kernel("Gelu")
def gelu(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation when approximate="tanh"."""
    if attrs.get("approximate", "none") == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)
        return ((np.tanh(inner) + 1) * x * 0.5,)
    return ((erf_array(x * (1 / math.sqrt(2))) + 1) * x * 0.5,)


@kernel("Shrink")
def shrink(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """x + bias if x < -lambd, x - bias if x > lambd, else 0."""
    lambd, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    xf = x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)
    y = np.where(xf < -lambd, xf + bias, np.where(xf > lambd, xf - bias, 0))
    return (y.astype(x.dtype),)


@kernel("Clip")
def clip(attrs: dict, x: np.ndarray, *bounds: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """min(max(x, min), max); missing bounds are unbounded."""
    lo, hi = arg(bounds, 0), arg(bounds, 1)
    y = x
    if lo is not None and lo.size:
        y = np.maximum(y, lo.reshape(()))
    if hi is not None and hi.size:
        y = np.minimum(y, hi.reshape(()))
    return (y,)


@kernel("Identity")
def identity(attrs: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """The input itself (not copied)."""
    return (x,)


# --------------------------------------------------------------------------------------------
# Logic, comparison, selection
# --------------------------------------------------------------------------------------------


def _binary(op: str, fn: np.ufunc) -> None:
    def run(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
        return (fn(a, b),)

    run.__name__ = run.__qualname__ = op.lower()
    run.__doc__ = f"Elementwise {op} via numpy.{fn.__name__}."
    kernel(op)(run)


for _op, _fn in {
    "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor, "Equal": np.equal,
    "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal, "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor,
}.items():  # fmt: skip
    _binary(_op, _fn)


@kernel("Where")
def where(attrs: dict, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """x where cond else y."""
    return (np.where(cond, x, y),)


@kernel("BitShift")
def bit_shift(attrs: dict, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Shift left or right; right shifts of signed types are arithmetic.

    Shift amounts that are negative or >= the bit width give only the sign fill
    (-1 for a right shift of a negative value, else 0), per opset 28.
    """
    bits = x.dtype.itemsize * 8
    bad = (y < 0) | (y >= bits) if np.issubdtype(y.dtype, np.signedinteger) else y >= bits
    safe_y = np.where(bad, 0, y).astype(x.dtype, copy=False)
    if attrs.get("direction", "") == "LEFT":
        out, fill = np.left_shift(x, safe_y), _zero(x)
    else:
        out = np.right_shift(x, safe_y)
        fill = np.where(x < 0, x.dtype.type(-1), _zero(x)) if x.dtype.kind == "i" else _zero(x)
    return (np.where(bad, fill, out).astype(x.dtype, copy=False),)
