"""Finite-difference checks of the elementwise rules: every unary op, broadcasting binaries,
Where, Cast, Clip, Max/Min/Sum/Mean."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from byoc import op
from byoc.autodiff.rules.elementwise import UNARY

from .fd import away_from, check
from .strategies import broadcast_shapes, fd_settings, seeds, shapes


def _domain(name: str, x: np.ndarray) -> np.ndarray:
    """Inputs inside each op's domain and away from its kinks."""
    if name in ("Log", "Sqrt"):
        return np.abs(x) + 0.5
    if name == "Acosh":
        return np.abs(x) + 1.5
    if name in ("Asin", "Acos", "Atanh"):
        return np.tanh(x) * 0.8
    if name == "Tan":
        return np.tanh(x)
    if name == "Reciprocal":
        return away_from(x, (0.0,), 0.3)
    if name == "HardSwish":
        return away_from(x * 3, (-3.0, 3.0, 0.0))
    if name == "HardSigmoid":
        return away_from(x * 3, (-2.5, 2.5))
    if name == "ThresholdedRelu":
        return away_from(x * 2, (1.0,))
    if name == "Shrink":
        return away_from(x * 2, (-0.5, 0.5))
    return away_from(x)


UNARY_ATTRS = {"LeakyRelu": {"alpha": 0.2}, "Elu": {"alpha": 0.7}, "Celu": {"alpha": 1.3},
               "Selu": {}, "HardSigmoid": {"alpha": 0.2, "beta": 0.5}}


# The host Erf kernel is a rational approximation (abs error ~6e-8, in float64 too), so central
# differences see its derivative, not erf's: up to ~1e-7 off the exact rule.
ERF_TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def _tolerance(name: str, approximate: str = "none") -> dict:
    return ERF_TOLERANCE if name == "Erf" or (name == "Gelu" and approximate == "none") else {}


@pytest.mark.parametrize("name", sorted(UNARY))
@fd_settings
@given(shape=shapes(), seed=seeds)
def test_unary(name, shape, seed):
    x = _domain(name, np.random.default_rng(seed).normal(size=shape))
    check(lambda v: op.make_call(name, v, **UNARY_ATTRS.get(name, {})), {"x": x},
          **_tolerance(name))


@fd_settings
@given(shape=shapes(), seed=seeds, approximate=st.sampled_from(["none", "tanh"]))
def test_gelu_both_forms(shape, seed, approximate):
    x = np.random.default_rng(seed).normal(size=shape) * 2
    check(lambda v: op.Gelu(v, approximate=approximate), {"x": x},
          **_tolerance("Gelu", approximate))


BINARY = {
    "Add": lambda a, b: (a, b), "Sub": lambda a, b: (a, b), "Mul": lambda a, b: (a, b),
    "Div": lambda a, b: (a, away_from(b, (0.0,), 0.5)),
    "Pow": lambda a, b: (np.abs(a) + 0.5, b),
    "PRelu": lambda a, b: (away_from(a), b),
    "Mod": lambda a, b: (a * 2, away_from(b, (0.0,), 0.5)),  # a / b rarely near an integer
}
BINARY_ATTRS = {"Mod": {"fmod": 1}}


@pytest.mark.parametrize("name", sorted(BINARY))
@fd_settings
@given(pair=broadcast_shapes(), seed=seeds)
def test_broadcasting_binary(name, pair, seed):
    rng = np.random.default_rng(seed)
    sa, sb = pair
    if name == "PRelu":  # slope broadcasts to x only (unidirectionally)
        sa = np.broadcast_shapes(sa, sb)
    a, b = BINARY[name](rng.normal(size=sa), rng.normal(size=sb))
    check(lambda x, y: op.make_call(name, x, y, **BINARY_ATTRS.get(name, {})), {"a": a, "b": b})


@pytest.mark.parametrize("name", ["Max", "Min", "Sum", "Mean"])
@fd_settings
@given(shapes3=broadcast_shapes(n=3), seed=seeds)
def test_variadic(name, shapes3, seed):
    rng = np.random.default_rng(seed)
    # distinct values (a grid of 0.1 steps, shuffled) so max/min never tie within EPS
    arrays = {f"x{k}": rng.normal(size=s) + 0.1 * k for k, s in enumerate(shapes3)}
    check(lambda *xs: op.make_call(name, *xs), arrays)


@fd_settings
@given(shapes3=broadcast_shapes(n=3), seed=seeds)
def test_where(shapes3, seed):
    rng = np.random.default_rng(seed)
    sc, sa, sb = shapes3
    cond = rng.random(size=sc) > 0.5
    check(lambda c, a, b: op.Where(c, a, b),
          {"c": cond, "a": rng.normal(size=sa), "b": rng.normal(size=sb)}, wrt=["a", "b"])


def test_where_condition_from_the_values_takes_no_gradient():
    x = np.array([-1.0, 0.5, 2.0, -0.3])
    check(lambda v: op.Where(op.Greater(v, op.const(0.0)), op.Mul(v, v), op.Neg(v)), {"x": x})


@fd_settings
@given(shape=shapes(), seed=seeds)
def test_cast_round_trip(shape, seed):
    x = np.random.default_rng(seed).normal(size=shape)
    check(lambda v: op.Mul(op.Cast(op.Cast(v, to=11), to=11), v), {"x": x})  # 11 = DOUBLE


def test_cast_to_an_integer_cuts_the_gradient():
    x = np.array([0.3, 1.7, -2.2])
    grads = check(lambda v: op.Cast(op.Cast(v, to=7), to=11), {"x": x})  # 7 = INT64
    np.testing.assert_array_equal(grads["grad:x"], np.zeros(3))


@fd_settings
@given(shape=shapes(), seed=seeds)
def test_clip(shape, seed):
    rng = np.random.default_rng(seed)
    x = away_from(rng.normal(size=shape), (-0.5, 0.4))
    check(lambda v, lo, hi: op.Clip(v, lo, hi),
          {"x": x, "lo": np.array(-0.5), "hi": np.array(0.4)})


@pytest.mark.parametrize("name", ["Floor", "Ceil", "Round", "Sign"])
def test_piecewise_constant_ops_have_zero_gradient(name):
    x = np.array([0.3, 1.7, -2.2])
    grads = check(lambda v: op.make_call(name, v), {"x": x})
    np.testing.assert_array_equal(grads["grad:x"], np.zeros(3))


def test_dropout_in_inference_is_the_identity():
    x = np.array([0.3, 1.7, -2.2])
    check(lambda v: op.Mul(op.Dropout(v), v), {"x": x})


def test_dropout_in_training_uses_the_forward_mask():
    # a seeded mask is the same every run, so central differences see one function
    x = np.random.default_rng(0).normal(size=(4, 5))
    train = op.const(np.array(True))
    grads = check(lambda v: op.outputs(op.Dropout(v, op.const(np.array(0.3)), train, seed=7,
                                                  n_outputs=2))[0], {"x": x})
    assert (grads["grad:x"] == 0).any()  # dropped elements take no gradient


@fd_settings
@given(shape=shapes(), seed=seeds)
def test_cast_like(shape, seed):
    x = np.random.default_rng(seed).normal(size=shape)
    check(lambda v: op.Mul(op.CastLike(v, op.const(np.zeros(1))), v), {"x": x})
