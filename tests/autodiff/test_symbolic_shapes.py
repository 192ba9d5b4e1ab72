"""The rules' run-time shape paths: the same finite-difference checks with inputs declared with
symbolic dims ("N", "H") or no shape at all, so build-time shape decisions cannot be made."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc import op
from byoc.ir import Call, TupleGetItem, post_order

from .fd import check, distinct, scalar_loss


def ints(*v):
    return op.const(np.array(v, dtype=np.int64))


RNG = np.random.default_rng(0)
X4 = RNG.normal(size=(2, 3, 5, 4))
CASES = {
    # name: (build, inputs, declared dims)
    "broadcast Add, may-be-1 dims": (lambda a, b: op.Add(a, b),
                                     {"a": RNG.normal(size=(1, 3)), "b": RNG.normal(size=(4, 3))},
                                     {"a": ("P", 3), "b": ("Q", 3)}),
    "Mul of unknown shapes": (lambda a, b: op.Mul(a, b),
                              {"a": RNG.normal(size=(2, 3)), "b": RNG.normal(size=(3,))},
                              {"a": None, "b": None}),
    "Conv, strided, symbolic space": (lambda x, w: op.Conv(x, w, strides=[2, 2], pads=[1, 0, 1, 1]),
                                      {"x": X4, "w": RNG.normal(size=(2, 3, 3, 2))},
                                      {"x": ("N", 3, "H", "W")}),
    "MaxPool": (lambda x: op.MaxPool(x, kernel_shape=[2, 2], strides=[2, 1]),
                {"x": distinct(RNG, (2, 3, 5, 4))}, {"x": ("N", 3, "H", "W")}),
    "AveragePool, exclusive pads": (lambda x: op.AveragePool(x, kernel_shape=[2, 3],
                                                             pads=[1, 1, 0, 1], strides=[2, 1]),
                                    {"x": X4}, {"x": ("N", "C", "H", "W")}),
    "GlobalAveragePool": (lambda x: op.GlobalAveragePool(x), {"x": X4},
                          {"x": ("N", 3, "H", "W")}),
    "ReduceMean": (lambda x: op.ReduceMean(x, ints(1, 3), keepdims=0), {"x": X4},
                   {"x": ("N", 3, "H", "W")}),
    "Slice": (lambda x: op.Slice(x, ints(1, 0), ints(-1, 3), ints(0, 2)), {"x": X4},
              {"x": ("N", 3, "H", "W")}),
    "Concat": (lambda a, b: op.Concat(a, b, axis=1),
               {"a": RNG.normal(size=(2, 3)), "b": RNG.normal(size=(2, 2))},
               {"a": ("N", "A"), "b": ("N", "B")}),
    "Gather, negative indices": (lambda x, i: op.Gather(x, i, axis=1),
                                 {"x": RNG.normal(size=(2, 5)), "i": np.array([[-1, 0, 4, -1]])},
                                 {"x": ("N", "V"), "i": ("M", "K")}),
    "Reshape": (lambda x: op.Reshape(x, ints(0, -1)), {"x": X4}, {"x": ("N", 3, "H", "W")}),
    "Split": (lambda x: [TupleGetItem(op.Split(x, ints(1, 2), axis=1, n_outputs=2), 1)],
              {"x": RNG.normal(size=(2, 3))}, {"x": ("N", 3)}),
    "LayerNormalization": (lambda x, s: op.LayerNormalization(x, s, stash_type=11),
                           {"x": RNG.normal(size=(2, 4)), "s": RNG.normal(size=(4,))},
                           {"x": ("N", 4)}),
    "BatchNormalization, training": (
        lambda x, s, c: TupleGetItem(op.BatchNormalization(x, s, c, op.const(np.zeros(3)),
                                                           op.const(np.ones(3)), training_mode=1,
                                                           n_outputs=3), 0),
        {"x": X4, "s": RNG.normal(size=3), "c": RNG.normal(size=3)}, {"x": ("N", 3, "H", "W")}),
    "SoftmaxCrossEntropyLoss, mean": (
        lambda s, l: op.SoftmaxCrossEntropyLoss(s, l),
        {"s": RNG.normal(size=(4, 3)), "l": np.array([0, 2, 1, 2])},
        {"s": ("N", "C"), "l": ("N",)}),
    "MatMul, batched": (lambda a, b: op.MatMul(a, b),
                        {"a": RNG.normal(size=(2, 1, 3, 4)), "b": RNG.normal(size=(3, 4, 2))},
                        {"a": ("B", "one", "M", 4), "b": ("C", 4, "K")}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic(name):
    build, inputs, dims = CASES[name]
    check(build, inputs, wrt=[k for k, v in inputs.items() if v.dtype.kind == "f"], dims=dims)


def test_the_run_time_path_is_taken():
    build, inputs, dims = CASES["broadcast Add, may-be-1 dims"]
    g = byoc.gradient(scalar_loss(build, inputs, dims=dims), "loss", ["a", "b"])
    assert any(isinstance(e, Call) and e.op == "NonZero" for e in post_order(g.main.body))
