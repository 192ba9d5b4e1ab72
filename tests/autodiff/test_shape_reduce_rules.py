"""Finite-difference checks of the data-movement rules (Reshape, Flatten, Squeeze, Unsqueeze,
Expand, Transpose, Concat, Split, Slice, Pad, Gather, GatherElements) and the reductions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from byoc import op
from byoc.ir import TupleGetItem

from .fd import check, distinct
from .strategies import broadcast_shapes, fd_settings, seeds, shapes


def ints(*v):
    return op.const(np.array(v, dtype=np.int64))


@fd_settings
@given(seed=seeds, shape=shapes(1, 4))
def test_views(seed, shape):
    x = np.random.default_rng(seed).normal(size=shape)
    check(lambda v: op.Reshape(v, ints(-1)), {"x": x})
    check(lambda v: op.Flatten(v, axis=len(shape) // 2), {"x": x})
    check(lambda v: op.Squeeze(op.Unsqueeze(v, ints(0, -1)), ints(0)), {"x": x})


@fd_settings
@given(seed=seeds, pair=broadcast_shapes())
def test_expand(seed, pair):
    small, big = pair
    target = np.broadcast_shapes(small, big)
    x = np.random.default_rng(seed).normal(size=small)
    check(lambda v: op.Expand(v, ints(*target)), {"x": x})


@fd_settings
@given(seed=seeds, shape=shapes(1, 4), data=st.data())
def test_transpose(seed, shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    x = np.random.default_rng(seed).normal(size=shape)
    check(lambda v: op.Transpose(v, perm=list(perm)), {"x": x})
    check(lambda v: op.Transpose(v), {"x": x})


@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data(), n=st.integers(1, 3))
def test_concat(seed, shape, data, n):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    arrays = {}
    for k in range(n):
        s = list(shape)
        s[axis] = data.draw(st.integers(1, 3))
        arrays[f"x{k}"] = rng.normal(size=s)
    check(lambda *v: op.Concat(*v, axis=axis), arrays)


@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data())
def test_split(seed, shape, data):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    total = shape[axis] + 2
    shape = tuple(total if i == axis else d for i, d in enumerate(shape))
    cut = data.draw(st.integers(1, total - 1))
    used = data.draw(st.sampled_from([(0, 1), (0,), (1,)]))

    def build(v):
        parts = op.Split(v, ints(cut, total - cut), axis=axis, n_outputs=2)
        return [TupleGetItem(parts, i) for i in used]

    check(build, {"x": rng.normal(size=shape)})


def test_split_by_num_outputs():
    x = np.random.default_rng(0).normal(size=(2, 6))
    check(lambda v: [TupleGetItem(op.Split(v, axis=1, num_outputs=3), i) for i in (0, 2)],
          {"x": x})


@fd_settings
@given(seed=seeds, shape=shapes(1, 3, 5), data=st.data())
def test_slice(seed, shape, data):
    r = len(shape)
    axes = data.draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r,
                              unique_by=lambda a: a % r))
    starts, ends, steps = [], [], []
    for a in axes:
        n = shape[a]
        step = data.draw(st.sampled_from([1, 1, 2, -1, -2]))
        starts.append(data.draw(st.integers(-n - 1, n + 1)))
        ends.append(data.draw(st.integers(-n - 1, n + 1)))
        steps.append(step)
    x = np.random.default_rng(seed).normal(size=shape)
    check(lambda v: op.Slice(v, ints(*starts), ints(*ends), ints(*axes), ints(*steps)),
          {"x": x})


def test_slice_with_run_time_bounds():
    x = np.random.default_rng(0).normal(size=(4, 5))
    check(lambda v, s, e: op.Slice(v, s, e, ints(1)),
          {"x": x, "s": np.array([1]), "e": np.array([-1])}, wrt=["x"])


def test_slice_crop_is_a_pad():
    from byoc.autodiff import gradient
    from .fd import scalar_loss

    mod = scalar_loss(lambda v: op.Slice(v, ints(1, 0), ints(3, 2)), {"x": np.zeros((4, 3))})
    ops = {e.op for e in __import__("byoc").ir.post_order(gradient(mod, "loss", ["x"]).main.body)
           if hasattr(e, "op")}
    assert "Pad" in ops and "ScatterElements" not in ops


@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data())
def test_pad(seed, shape, data):
    pads = [data.draw(st.integers(0, 2)) for _ in range(2 * len(shape))]
    x = np.random.default_rng(seed).normal(size=shape)
    check(lambda v: op.Pad(v, ints(*pads), op.const(np.array(0.5))), {"x": x})


@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data())
def test_gather(seed, shape, data):
    rng = np.random.default_rng(seed)
    r = len(shape)
    axis = data.draw(st.integers(-r, r - 1))
    n = shape[axis]
    index_shape = data.draw(shapes(0, 2))
    # repeats and negative indices both appear
    indices = rng.integers(-n, n, size=index_shape)
    check(lambda v, i: op.Gather(v, i, axis=axis),
          {"x": rng.normal(size=shape), "i": indices}, wrt=["x"])


def test_gather_constant_indices_with_repeats():
    x = np.random.default_rng(1).normal(size=(5, 3))
    check(lambda v: op.Gather(v, ints(4, 0, 4, 2)), {"x": x})


@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data())
def test_gather_elements(seed, shape, data):
    rng = np.random.default_rng(seed)
    r = len(shape)
    axis = data.draw(st.integers(0, r - 1))
    index_shape = list(shape)
    index_shape[axis] = data.draw(st.integers(1, 4))
    indices = rng.integers(-shape[axis], shape[axis], size=index_shape)
    check(lambda v, i: op.GatherElements(v, i, axis=axis),
          {"x": rng.normal(size=shape), "i": indices}, wrt=["x"])


REDUCERS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1",
            "ReduceL2", "ReduceLogSumExp"]


@pytest.mark.parametrize("name", REDUCERS)
@fd_settings
@given(seed=seeds, shape=shapes(1, 3), data=st.data(), keepdims=st.booleans())
def test_reduce(name, seed, shape, data, keepdims):
    rng = np.random.default_rng(seed)
    r = len(shape)
    axes = data.draw(st.one_of(st.none(), st.lists(st.integers(-r, r - 1), min_size=1,
                                                      max_size=r, unique_by=lambda a: a % r)))
    x = distinct(rng, shape, 0.1) if name in ("ReduceMax", "ReduceMin") else rng.normal(size=shape)
    if name == "ReduceL1":
        x = np.where(np.abs(x) < 0.05, 0.1, x)

    def build(v):
        args = [v] if axes is None else [v, ints(*axes)]
        return op.make_call(name, *args, keepdims=int(keepdims))

    check(build, {"x": x})


def test_reduce_with_no_axes_and_noop_is_the_identity():
    x = np.random.default_rng(0).normal(size=(2, 3))
    check(lambda v: op.ReduceSum(v, ints(), noop_with_empty_axes=1), {"x": x})
    check(lambda v: op.ReduceSumSquare(v, noop_with_empty_axes=1), {"x": x})
