"""Gradients of normalizations: BatchNormalization (training and inference),
InstanceNormalization and LayerNormalization.

With xhat = (x - mean) / sqrt(var + eps) over the normalized axes (m elements each) and
y = scale * xhat + bias, when mean and var are the batch's own statistics:

    dbias = sum g,   dscale = sum g xhat,
    dx = (scale / sqrt(var + eps)) * (g - mean(g) - xhat * mean(g xhat))

The statistics are recomputed from x in the backward pass (ONNX's training-mode outputs are
the running averages, not the batch statistics).
"""

from __future__ import annotations

from ...ir import Expr
from ..algebra import Sym, sym
from ..rule import Backward, GradientRule, rank_of
from ..shapes import normalize_axes, unbroadcast


def _reduce(op: str, v: Sym, axes: list[int]) -> Sym:
    return v.apply(op, v.b.ints(axes), keepdims=1)


def _normalized(b: Backward, x: Sym, axes: list[int], eps: float) -> tuple[Sym, Sym]:
    """(xhat, 1/sqrt(var + eps)) from x's own statistics over ``axes``."""
    centered = x - _reduce("ReduceMean", x, axes)
    inv_std = 1 / (_reduce("ReduceMean", centered * centered, axes) + eps).apply("Sqrt")
    return centered * inv_std, inv_std


def _dx(dxhat: Sym, xhat: Sym, inv_std: Sym, axes: list[int]) -> Sym:
    """d/dx of xhat(x) applied to dxhat: inv_std (dxhat - mean(dxhat) - xhat mean(dxhat xhat))."""
    return inv_std * (dxhat - _reduce("ReduceMean", dxhat, axes)
                      - xhat * _reduce("ReduceMean", dxhat * xhat, axes))


def _no_stat_grads(b: Backward, which: str) -> None:
    if any(g is not None for g in b.grads[1:]):
        raise b.fail(f"the loss depends on {which}; only the normalized output has a "
                     "gradient rule")


def batch_norm(b: Backward) -> list[Expr | None]:
    """Per channel (axis 1) over batch and space; see the module docstring for training mode.
    Inference: y = scale (x - mean) / sqrt(var + eps) + bias with given mean and var, so
    dx = g scale / sqrt(var + eps), dmean = -sum(dx), dvar = -1/2 sum(g scale (x - mean)) /
    (var + eps)^(3/2)."""
    _no_stat_grads(b, "BatchNormalization's running statistics")
    x, scale = sym(b, b.x(0)), sym(b, b.x(1))
    r = rank_of(x.e)
    axes = [0, *range(2, r)]
    eps = float(b.attr("epsilon", 1e-5))
    g = sym(b, b.g)

    def per_channel(v: Sym) -> Sym:  # (C,) -> (1, C, 1, ...) to broadcast against x
        return v.apply("Unsqueeze", b.ints(axes))

    def channel_sum(v: Sym) -> Expr:  # (N, C, ...) -> (C,)
        return v.apply("ReduceSum", b.ints(axes), keepdims=0).e

    out: list[Expr | None] = [None] * 5
    if int(b.attr("training_mode", 0)):
        xhat, inv_std = _normalized(b, x, axes, eps)
        if b.need(0):
            out[0] = _dx(g * per_channel(scale), xhat, inv_std, axes).e
    else:
        mean, var = sym(b, b.x(3)), sym(b, b.x(4))
        inv_std_c = 1 / (var + eps).apply("Sqrt")
        centered = x - per_channel(mean)
        inv_std = per_channel(inv_std_c)
        xhat = centered * inv_std
        if b.need(0):
            out[0] = (g * per_channel(scale * inv_std_c)).e
        if b.need(3):
            out[3] = (-(sym(b, channel_sum(g)) * scale * inv_std_c)).e
        if b.need(4):
            coef = scale * inv_std_c * inv_std_c * inv_std_c * -0.5
            out[4] = (sym(b, channel_sum(g * centered)) * coef).e
    if b.need(1):
        out[1] = channel_sum(g * xhat)
    if b.need(2):
        out[2] = channel_sum(g)
    return out


def instance_norm(b: Backward) -> list[Expr | None]:
    """Per (batch, channel) over space: xhat from x's statistics there, y = scale[c] xhat +
    bias[c]; dx as in the module docstring with dxhat = g scale, dscale = sum_{n, space} g xhat,
    dbias = sum_{n, space} g."""
    x, scale = sym(b, b.x(0)), sym(b, b.x(1))
    r = rank_of(x.e)
    space = list(range(2, r))
    xhat, inv_std = _normalized(b, x, space, float(b.attr("epsilon", 1e-5)))
    g = sym(b, b.g)
    per_channel = [0, *space]
    out: list[Expr | None] = [None, None, None]
    if b.need(0):
        out[0] = _dx(g * scale.apply("Unsqueeze", b.ints(per_channel)), xhat, inv_std, space).e
    if b.need(1):
        out[1] = (g * xhat).apply("ReduceSum", b.ints(per_channel), keepdims=0).e
    if b.need(2):
        out[2] = g.apply("ReduceSum", b.ints(per_channel), keepdims=0).e
    return out


def layer_norm(b: Backward) -> list[Expr | None]:
    """Over axes [axis, rank): xhat from x's statistics, y = xhat scale + bias (scale and bias
    broadcast from the right): dx as in the module docstring with dxhat = g scale."""
    _no_stat_grads(b, "LayerNormalization's Mean or InvStdDev output")
    x = sym(b, b.x(0))
    r = rank_of(x.e)
    start = normalize_axes([int(b.attr("axis", -1))], r)[0]
    axes = list(range(start, r))
    xhat, inv_std = _normalized(b, x, axes, float(b.attr("epsilon", 1e-5)))
    g, scale, bias = sym(b, b.g), b.x(1), b.x(2)
    assert scale is not None
    out: list[Expr | None] = [None, None, None]
    if b.need(0):
        out[0] = _dx(g * sym(b, scale), xhat, inv_std, axes).e
    if b.need(1):
        out[1] = unbroadcast(b, (g * xhat).e, scale)
    if bias is not None and b.need(2):
        out[2] = unbroadcast(b, g.e, bias)
    return out


RULES: dict[str, GradientRule] = {"BatchNormalization": batch_norm,
                                  "InstanceNormalization": instance_norm,
                                  "LayerNormalization": layer_norm}
