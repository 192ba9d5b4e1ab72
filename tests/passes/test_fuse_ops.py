"""FuseOps on the seed's graphs, built by hand. Groups are compared as lists of span names."""

from __future__ import annotations

import numpy as np

from byoc import op
from byoc.ir import Function
from byoc.op import FusePattern
from byoc.passes.fuse_ops import fuse_ops


def _x(shape=(1, 3, 8, 8)):
    return op.var("x", shape)


def _w(m=3, c=3, k=1):
    return op.const(np.ones((m, c, k, k), np.float32))


def _groups(body, *params):
    return [g.spans() for g in fuse_ops(Function(tuple(params), body))]


def test_resnet_diamond_fuses_whole():
    """
          conv2d
         /  |  \\
      relu sig  tanh         one group: master conv, root add
         \\  |  /
           add
    """
    x = _x()
    c = op.Conv(x, _w(), span="conv")
    s = op.Sum(op.Relu(c, span="a"), op.Sigmoid(c, span="b"), op.Tanh(c, span="c"), span="add")
    groups = fuse_ops(Function((x,), s))
    assert [g.spans() for g in groups] == [["conv", "a", "b", "c", "add"]]
    assert groups[0].master.span.name == "conv" and groups[0].root.span.name == "add"
    assert groups[0].pattern == FusePattern.OUT_EWISE_FUSABLE


def test_conv_op_sigmoid_into_add():
    """
        conv2d   op   sigmoid          op (opaque Softmax) stays alone; conv, sigmoid and
            \\    |    /                add are one group whose master is conv
               add
    """
    x = _x()
    c = op.Conv(x, _w(), span="conv")
    s = op.Sum(c, op.Softmax(x, span="op"), op.Sigmoid(x, span="sig"), span="add")
    groups = fuse_ops(Function((x,), s))
    assert [g.spans() for g in groups] == [["op"], ["conv", "sig", "add"]]
    assert groups[1].master.span.name == "conv"


def test_two_convs_do_not_fuse():
    """conv -> relu -> conv -> relu: each conv takes its own epilogue."""
    x = _x()
    r1 = op.Relu(op.Conv(x, _w(), span="c1"), span="r1")
    r2 = op.Relu(op.Conv(r1, _w(), span="c2"), span="r2")
    assert _groups(r2, x) == [["c1", "r1"], ["c2", "r2"]]


def test_conv_users_that_never_meet_stay_apart():
    """
          conv2d
          /    \\
       relu   softmax -> (outputs)     the branches meet only at the outputs: no fusion
    """
    x = _x()
    c = op.Conv(x, _w(), span="conv")
    out = op.Add(op.Relu(c, span="r"), op.Softmax(c, span="sm"), span="add")
    groups = _groups(out, x)
    assert ["conv"] in groups and ["sm"] in groups


def test_injective_prologue_fuses_into_reduction():
    """transpose -> exp -> reducesum: the reduction takes its injective prologue."""
    x = op.var("x", (4, 5))
    t = op.Transpose(x, perm=[1, 0], span="t")
    e = op.Exp(t, span="e")
    r = op.ReduceSum(e, op.const(np.array([1], np.int64)), span="r")
    assert _groups(r, x) == [["t", "e", "r"]]


def test_elementwise_chain_is_one_group_and_walk_is_iterative():
    x = op.var("x", (16,))
    y = x
    for k in range(20000):
        y = op.Relu(y, span=f"n{k}") if k % 2 else op.Neg(y, span=f"n{k}")
    groups = fuse_ops(Function((x,), y))
    assert sum(len(g.nodes) for g in groups) == 20000
    assert all(len(g.nodes) <= 256 for g in groups) and len(groups) < 100


def test_broadcast_add_of_bias_fuses_into_matmul():
    x = op.var("x", (4, 8))
    m = op.MatMul(x, op.const(np.ones((8, 6), np.float32)), span="mm")
    y = op.Relu(op.Add(m, op.const(np.ones(6, np.float32)), span="bias"), span="relu")
    assert _groups(y, x) == [["mm", "bias", "relu"]]
