"""Finite-difference checks of byoc.gradient, shared by the autodiff tests.

``check(build, inputs)`` builds a graph from Vars for ``inputs``, reduces its outputs to the
scalar loss ``sum_k <out_k, r_k>`` with fixed random r_k (so every output element's gradient is
tested, not just their sum), and compares byoc.gradient with central differences of that loss
in float64, element by element.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

import byoc
from byoc import op
from byoc.ir import Expr, Function, IRModule

# Central differences in float64: truncation ~ EPS^2 f''' and rounding ~ 1e-16 |L| / EPS are
# both far below these, so a wrong rule cannot hide in them.
EPS = 1e-6
RTOL = 1e-6
ATOL = 1e-8


def module(outputs: Sequence[Expr], params: Sequence, names: Sequence[str]) -> IRModule:
    body = outputs[0] if len(outputs) == 1 else byoc.ir.Tuple(tuple(outputs))
    return IRModule({"main": Function(tuple(params), body, {"output_names": list(names)})})


def _vars(inputs: Mapping[str, np.ndarray], dims: Mapping[str, tuple] | None) -> list:
    dims = dims or {}
    return [op.var(k, dims.get(k, v.shape), v.dtype.name) for k, v in inputs.items()]


def scalar_loss(build: Callable[..., Expr | Sequence[Expr]], inputs: Mapping[str, np.ndarray],
                seed: int = 0, dims: Mapping[str, tuple] | None = None) -> IRModule:
    """The module ``loss = sum_k <build(...)_k, r_k>`` over Vars named like ``inputs``, with
    the declared shapes ``dims`` where given (symbolic dims, or None for an unknown shape)."""
    params = _vars(inputs, dims)
    outs = build(*params)
    outs = [outs] if isinstance(outs, Expr) else list(outs)
    values = byoc.build(module(outs, params, [f"o{k}" for k in range(len(outs))])).run(inputs)
    rng = np.random.default_rng(seed)
    loss = None
    for k, o in enumerate(outs):
        v = values[f"o{k}"]
        r = op.const(rng.normal(size=v.shape).astype(v.dtype))
        term = op.ReduceSum(op.Mul(o, r), keepdims=0)
        loss = term if loss is None else op.Add(loss, term)
    return module([loss], params, ["loss"])


def numeric_gradient(run: Callable[[dict], float], inputs: Mapping[str, np.ndarray],
                     name: str) -> np.ndarray:
    base = {k: v.copy() for k, v in inputs.items()}
    x = base[name]
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        keep = x[i]
        x[i] = keep + EPS
        up = run(base)
        x[i] = keep - EPS
        down = run(base)
        x[i] = keep
        out[i] = (up - down) / (2 * EPS)
    return out


def check(build: Callable[..., Expr | Sequence[Expr]], inputs: Mapping[str, np.ndarray],
          wrt: Sequence[str] | None = None, rtol: float = RTOL, atol: float = ATOL,
          dims: Mapping[str, tuple] | None = None, **gradient_options) -> dict[str, np.ndarray]:
    """Assert byoc.gradient of the projected loss matches central differences; returns the
    analytic gradients. ``dims`` declares input shapes other than the data's (see
    scalar_loss), to exercise the rules' run-time shape paths."""
    inputs = {k: np.array(v) for k, v in inputs.items()}
    wrt = [k for k, v in inputs.items() if v.dtype.kind == "f"] if wrt is None else list(wrt)
    mod = scalar_loss(build, inputs, dims=dims)
    forward = byoc.build(mod)
    grads = byoc.build(byoc.gradient(mod, loss="loss", wrt=wrt, **gradient_options)).run(inputs)

    def loss(values: dict) -> float:
        return float(forward.run(values)["loss"])

    for name in wrt:
        want = numeric_gradient(loss, inputs, name)
        got = grads[f"grad:{name}"]
        assert got.shape == inputs[name].shape, (name, got.shape, inputs[name].shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"d loss / d {name}")
    return grads


def away_from(x: np.ndarray, points: Sequence[float] = (0.0,), margin: float = 0.05) -> np.ndarray:
    """x with values near a kink (``points``) pushed ``margin`` away, so central differences
    never straddle one."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < margin
        x[near] = p + np.where(x[near] >= p, margin, -margin)
    return x


def distinct(rng: np.random.Generator, shape: tuple[int, ...], gap: float = 0.01) -> np.ndarray:
    """Values at least ``gap`` apart, shuffled: max and min are never tied."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * gap - n * gap / 2).reshape(shape).astype(np.float64)
