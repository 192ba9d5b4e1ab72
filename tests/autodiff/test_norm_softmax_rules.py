"""Finite-difference checks of BatchNormalization (training and inference),
LayerNormalization, Softmax, LogSoftmax, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import byoc
from byoc import op
from byoc.ir import TupleGetItem

from .fd import check
from .strategies import fd_settings, seeds, shapes

DOUBLE = 11  # stash_type: LayerNormalization's statistics in float64, as the test's data


def _batch_norm_inputs(seed: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = shape[1]
    return {"x": rng.normal(size=shape), "scale": rng.normal(size=c), "bias": rng.normal(size=c),
            "mean": rng.normal(size=c), "var": rng.random(size=c) + 0.5}


@fd_settings
@given(seed=seeds, n=st.integers(2, 3), c=st.integers(1, 3), space=shapes(0, 2, 3))
def test_batch_norm_training(seed, n, c, space):
    check(lambda *v: TupleGetItem(op.BatchNormalization(*v, training_mode=1, epsilon=1e-3,
                                                        n_outputs=3), 0),
          _batch_norm_inputs(seed, (n, c, *space)), wrt=["x", "scale", "bias"])


@fd_settings
@given(seed=seeds, n=st.integers(1, 3), c=st.integers(1, 3), space=shapes(0, 2, 3))
def test_batch_norm_inference(seed, n, c, space):
    check(lambda *v: op.BatchNormalization(*v, epsilon=1e-3),
          _batch_norm_inputs(seed, (n, c, *space)))


def test_batch_norm_running_statistics_take_no_gradient():
    x = op.var("x", (4, 2), "float64")
    c = [op.const(np.ones(2)) for _ in range(4)]
    bn = op.BatchNormalization(x, *c, training_mode=1, n_outputs=3)
    loss = op.ReduceSum(op.Add(TupleGetItem(bn, 0), TupleGetItem(bn, 1)), keepdims=0)
    mod = byoc.ir.IRModule({"main": byoc.ir.Function((x,), loss, {"output_names": ["l"]})})
    with pytest.raises(byoc.ModelError, match="running statistics"):
        byoc.gradient(mod, loss="l", wrt=["x"])


@fd_settings
@given(seed=seeds, n=st.integers(1, 2), c=st.integers(1, 3), space=shapes(1, 2, 3))
def test_instance_norm(seed, n, c, space):
    rng = np.random.default_rng(seed)
    if np.prod(space) == 1:
        space = (2, *space[1:])  # one element per instance has no spread to normalize
    inputs = {"x": rng.normal(size=(n, c, *space)), "scale": rng.normal(size=c),
              "bias": rng.normal(size=c)}
    check(lambda *v: op.InstanceNormalization(*v, epsilon=1e-3), inputs)


@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data(), bias=st.booleans())
def test_layer_norm(seed, shape, data, bias):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    inner = shape[axis:]
    # scale and bias broadcast from the right: drop some leading inner dims
    scale_shape = inner[data.draw(st.integers(0, len(inner) - 1)):]
    inputs = {"x": rng.normal(size=shape), "scale": rng.normal(size=scale_shape)}
    if bias:
        inputs["bias"] = rng.normal(size=inner)
    check(lambda *v: op.LayerNormalization(*v, axis=axis, epsilon=1e-3, stash_type=DOUBLE),
          inputs)


@pytest.mark.parametrize("name", ["Softmax", "LogSoftmax"])
@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data())
def test_softmax(name, seed, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(seed).normal(size=shape) * 2
    check(lambda v: op.make_call(name, v, axis=axis), {"x": x})


def _labels(rng, n, c, extra, ignore):
    labels = rng.integers(0, c, size=(n, *extra))
    if ignore is not None:
        labels.reshape(-1)[1::3] = ignore  # some labels ignored, never all
    return labels


@fd_settings
@given(seed=seeds, n=st.integers(1, 4), c=st.integers(2, 4), extra=shapes(0, 1, 3),
       reduction=st.sampled_from(["mean", "sum", "none"]), weighted=st.booleans(),
       ignore=st.sampled_from([None, 1, -100]), log_prob=st.booleans())
def test_softmax_cross_entropy(seed, n, c, extra, reduction, weighted, ignore, log_prob):
    rng = np.random.default_rng(seed)
    inputs = {"scores": rng.normal(size=(n, c, *extra)),
              "labels": _labels(rng, n, c, extra, ignore)}
    if weighted:
        inputs["weights"] = rng.random(size=c) + 0.5
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore

    def build(*v):
        call = op.SoftmaxCrossEntropyLoss(*v, n_outputs=2 if log_prob else 1, **attrs)
        return [TupleGetItem(call, 0), TupleGetItem(call, 1)] if log_prob else call

    check(build, inputs, wrt=["scores"])


@fd_settings
@given(seed=seeds, n=st.integers(1, 4), c=st.integers(2, 4), extra=shapes(0, 1, 3),
       reduction=st.sampled_from(["mean", "sum", "none"]), weighted=st.booleans(),
       ignore=st.sampled_from([None, 0]))
def test_negative_log_likelihood(seed, n, c, extra, reduction, weighted, ignore):
    rng = np.random.default_rng(seed)
    inputs = {"logp": rng.normal(size=(n, c, *extra)),
              "labels": _labels(rng, n, c, extra, ignore)}
    if weighted:
        inputs["weights"] = rng.random(size=c) + 0.5
    attrs = {"reduction": reduction, **({"ignore_index": ignore} if ignore is not None else {})}
    check(lambda *v: op.NegativeLogLikelihoodLoss(*v, **attrs), inputs, wrt=["logp"])

