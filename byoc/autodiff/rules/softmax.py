"""Gradients of Softmax, LogSoftmax and the losses built on them (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss).

    softmax:     dx = y (g - sum(g y))             (sums over the softmax axis)
    log_softmax: dx = g - exp(y) sum(g)
    nll:         d logp[n, c] = -[c == t_n] w_t * (g, or g / sum of w_t for reduction=mean)
    sce:         nll through log_softmax over axis 1
"""

from __future__ import annotations

import math

from ...ir import Expr
from ...op.onnx_bridge import elem_type
from ..algebra import Sym, sym
from ..rule import Backward, GradientRule, dtype_of, static_shape
from ..shapes import dims_of


def _sum_over(v: Sym, axis: int) -> Sym:
    return v.apply("ReduceSum", v.b.ints([axis]), keepdims=1)


def softmax(b: Backward) -> list[Expr | None]:
    """dx = y (g - sum_axis(g y))."""
    g, y = sym(b, b.g), sym(b, b.y())
    return [(y * (g - _sum_over(g * y, int(b.attr("axis", -1))))).e]


def _log_softmax_grad(b: Backward, dlogp: Sym, logp: Sym, axis: int) -> Sym:
    return dlogp - logp.apply("Exp") * _sum_over(dlogp, axis)


def log_softmax(b: Backward) -> list[Expr | None]:
    """dx = g - exp(y) sum_axis(g)."""
    return [_log_softmax_grad(b, sym(b, b.g), sym(b, b.y()), int(b.attr("axis", -1))).e]


def _nll_grad(b: Backward, logp: Expr, g: Expr) -> Sym:
    """dL/dlogp for loss = reduce_n(-w[t_n] logp[n, t_n]) with labels b.x(1), weights b.x(2).

    Ignored labels (ignore_index) take no gradient and, for reduction=mean, no weight in the
    denominator, as ONNX defines the loss.
    """
    labels, weights = b.x(1), b.x(2)
    assert labels is not None
    dt = elem_type(dtype_of(logp))
    ignore = b.attr("ignore_index")
    safe: Expr = labels
    mask: Sym | None = None  # 1 where a label counts, as logp's dtype
    if ignore is not None:
        valid = sym(b, labels).apply("Equal", b.const(ignore, labels)).apply("Not")
        safe = b.op("Where", valid.e, labels, b.const(0, labels))
        mask = valid.apply("Cast", to=dt)
    weight: Sym | None = mask
    if weights is not None:
        picked = sym(b, b.op("Gather", weights, safe, axis=0))
        weight = picked if mask is None else picked * mask
    reduction = b.attr("reduction", "mean")
    scale = sym(b, g)
    if reduction == "mean":
        if weight is not None:
            total = weight.apply("ReduceSum", keepdims=0)
        else:
            n = static_shape(labels)
            total = (sym(b, b.const(float(math.prod(n)), logp)) if n is not None else
                     sym(b, b.op("Cast", b.op("Size", labels), to=dt)))
        scale = scale / total
    coef = -scale if weight is None else -(scale * weight)
    depth_dims = dims_of(logp)
    assert depth_dims is not None
    depth = (b.ints([depth_dims[1]]) if isinstance(depth_dims[1], int) else
             b.op("Slice", b.op("Shape", logp), b.ints([1]), b.ints([2])))
    onehot = sym(b, b.op("OneHot", safe, depth, b.const([0, 1], logp), axis=1))
    if reduction == "none" or weight is not None:  # a per-label coefficient: align with axis 1
        coef = coef.apply("Unsqueeze", b.ints([1]))
    return onehot * coef


def nll_loss(b: Backward) -> list[Expr | None]:
    """loss = reduce(-w_t logp[n, t]): d logp = -onehot(t) w_t (scaled for mean)."""
    logp = b.x(0)
    assert logp is not None
    return [_nll_grad(b, logp, b.g).e]


def softmax_cross_entropy(b: Backward) -> list[Expr | None]:
    """loss = nll(log_softmax(scores, axis=1)): d scores = log_softmax backward of d logp, where
    d logp is the nll gradient plus whatever reaches the log_prob output."""
    scores = b.x(0)
    assert scores is not None
    if len(b.grads) > 1:
        logp: Expr = b.y(1)
    else:
        logp = b.op("LogSoftmax", scores, axis=1)
    dlogp: Sym | None = _nll_grad(b, logp, b.grads[0]) if b.grads[0] is not None else None
    if len(b.grads) > 1 and b.grads[1] is not None:
        extra = sym(b, b.grads[1])
        dlogp = extra if dlogp is None else dlogp + extra
    assert dlogp is not None
    return [_log_softmax_grad(b, dlogp, sym(b, logp), 1).e]


RULES: dict[str, GradientRule] = {
    "Softmax": softmax, "LogSoftmax": log_softmax, "NegativeLogLikelihoodLoss": nll_loss,
    "SoftmaxCrossEntropyLoss": softmax_cross_entropy,
}
