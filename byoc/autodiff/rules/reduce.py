"""Gradients of reductions over axes: ReduceSum, ReduceMean, ReduceMax/Min, ReduceSumSquare,
ReduceL1, ReduceL2, ReduceLogSumExp.

Each is ``dx = f'(x) * broadcast(g)``, where g first gets the reduced axes back as size-1 axes
(when keepdims=0) so it broadcasts against x.
"""

from __future__ import annotations

from ...ir import Expr
from ...op.onnx_bridge import elem_type
from ..rule import Backward, GradientRule, const_ints, dtype_of
from ..shapes import count_ratio, expand_like


def _is_noop(b: Backward) -> bool:
    """Empty axes with noop_with_empty_axes=1: the op is the identity (or elementwise f)."""
    return _axes(b) == [] and bool(int(b.attr("noop_with_empty_axes", 0)))


def _axes(b: Backward) -> list[int] | None:
    """The reduced axes as given (negative ones too), [] for none given, None at run time."""
    arg = b.x(1)
    return [] if arg is None else const_ints(arg)


def _kept(b: Backward, v: Expr) -> Expr:
    """v (shaped like y) with the reduced axes as size-1 axes, to broadcast against x.
    Unsqueeze reads negative axes against its output's rank, which is x's: no rank needed."""
    axes = _axes(b)
    if int(b.attr("keepdims", 1)) or _is_noop(b) or axes == []:
        return v  # kept already, or a reduction to a scalar, which broadcasts as it is
    if axes is None:
        raise b.fail("a reduction over run-time axes with keepdims=0 has no gradient rule")
    return b.op("Unsqueeze", v, b.ints(axes))


def share_among_maxima(b: Backward, x: Expr, y: Expr, g: Expr, axes: Expr | None) -> Expr:
    """max: dx = g * [x == y] / #{x == y}: the gradient goes to the maxima, split evenly on a
    tie (a subgradient, and the exact one when the max is unique). y and g broadcast against
    x; ``axes`` are the reduced ones (None: all)."""
    mask = b.op("Cast", b.op("Equal", x, y), to=elem_type(dtype_of(x)))
    count = b.op("ReduceSum", mask, axes, keepdims=1)
    return b.op("Mul", b.op("Div", g, count), mask)


def _x(b: Backward) -> Expr:
    x = b.x(0)
    assert x is not None
    return x


def reduce_sum(b: Backward) -> list[Expr | None]:
    """y = sum x: dx = broadcast(g)."""
    return [expand_like(b, _kept(b, b.g), _x(b))]


def reduce_mean(b: Backward) -> list[Expr | None]:
    """y = sum x / n: dx = broadcast(g / n), n = size(x) / size(y)."""
    x = _x(b)
    return [expand_like(b, _kept(b, b.op("Div", b.g, count_ratio(b, x, b.y()))), x)]


def reduce_extremum(b: Backward) -> list[Expr | None]:
    """y = max x (or min): dx = g shared among the elements equal to y."""
    x = _x(b)
    if _is_noop(b):
        return [b.g]
    axes = _axes(b)
    return [share_among_maxima(b, x, _kept(b, b.y()), _kept(b, b.g),
                               b.x(1) if axes else None)]


def reduce_sum_square(b: Backward) -> list[Expr | None]:
    """y = sum x^2: dx = 2 x broadcast(g)."""
    x = _x(b)
    return [b.op("Mul", b.op("Mul", x, b.const(2.0, x)), _kept(b, b.g))]


def reduce_l1(b: Backward) -> list[Expr | None]:
    """y = sum |x|: dx = sign(x) broadcast(g)."""
    x = _x(b)
    return [b.op("Mul", b.op("Sign", x), _kept(b, b.g))]


def reduce_l2(b: Backward) -> list[Expr | None]:
    """y = sqrt(sum x^2): dx = x broadcast(g / y)."""
    x = _x(b)
    return [b.op("Mul", x, _kept(b, b.op("Div", b.g, b.y())))]


def reduce_log_sum_exp(b: Backward) -> list[Expr | None]:
    """y = log sum exp x: dx = exp(x - y) broadcast(g) (a softmax over the axes)."""
    x = _x(b)
    weights = b.op("Exp", b.op("Sub", x, _kept(b, b.y())))
    return [b.op("Mul", weights, _kept(b, b.g))]


RULES: dict[str, GradientRule] = {
    "ReduceSum": reduce_sum, "ReduceMean": reduce_mean, "ReduceMax": reduce_extremum,
    "ReduceMin": reduce_extremum, "ReduceSumSquare": reduce_sum_square, "ReduceL1": reduce_l1,
    "ReduceL2": reduce_l2, "ReduceLogSumExp": reduce_log_sum_exp,
}
