"""The pattern language and merge_composite: fused ops become composite calls, only where valid."""

from __future__ import annotations

import numpy as np

import byoc
from byoc import op
from byoc.ir import Call, Function, TupleGetItem, Var, assert_structural_equal
from byoc.passes import merge_composite
from byoc.pattern import is_const, is_op, is_tuple_get_item, is_var, wildcard

from .util import assert_same_run, module, region_spans

CONV_RELU = is_op("Relu")(is_op("Conv")(wildcard(), is_const()))


def _conv_input():
    x = op.var("x", (1, 3, 4, 4))
    w = op.const(np.full((2, 3, 1, 1), 0.5, np.float32), "w")
    return x, w


def test_a_match_becomes_one_call_of_a_composite_function(backends):
    """
        x   w(const)                 x    w
         \\ /                          \\  /
         Conv          ->    fn(%x, %w) {Composite="tc.conv_relu"} { Relu(Conv(%x, %w)) }
          |                            |
         Relu                         Exp
          |
         Exp
    """
    tc = backends("tc", {"Exp"}, patterns=[("tc.conv_relu", CONV_RELU)])
    x, w = _conv_input()
    relu = op.Relu(op.Conv(x, w), span="relu")
    got = merge_composite(module(op.Exp(relu), [x]), [tc])

    px, pw = Var("x", x.type), Var("w", w.type)
    fn = Function((px, pw), op.Relu(op.Conv(px, pw)), {"Composite": "tc.conv_relu"})
    want = module(op.Exp(Call(fn, (x, w), {}, relu.type, relu.span)), [x])
    assert_structural_equal(got, want)


def test_alternatives_and_optional_parts():
    """``conv.optional(relu)`` takes Conv+Relu where there is one, and a bare Conv elsewhere;
    ``add(conv, wildcard) | conv`` is an optional bias."""
    x, w = _conv_input()
    conv = is_op("Conv")(wildcard(), is_const())
    with_relu = conv.optional(lambda p: is_op("Relu")(p))
    biased = is_op("Add")(conv, wildcard()) | conv
    c = op.Conv(x, w)
    r = op.Relu(c)
    a = op.Add(c, op.var("b", (1, 2, 4, 4)))
    assert [n.op for n in with_relu.match(r).nodes] == ["Conv", "Relu"]
    assert [n.op for n in with_relu.match(c).nodes] == ["Conv"]
    assert [n.op for n in biased.match(a).nodes] == ["Conv", "Add"]
    assert [n.op for n in biased.match(c).nodes] == ["Conv"]
    assert with_relu.match(a) is None and biased.match(r) is None
    assert [i.name for i in biased.match(a).inputs] == ["x", "w", "b"]


def test_one_pattern_object_matches_one_value():
    x, y = op.var("x", (4,)), op.var("y", (4,))
    same = wildcard()
    twice = is_op("Add")(same, same)
    assert twice.match(op.Add(x, x)) is not None
    assert twice.match(op.Add(x, y)) is None


def test_leaf_attribute_dtype_and_output_patterns():
    x = op.var("x", (4, 2))
    split = op.Split(x, axis=1, num_outputs=2)
    second = TupleGetItem(split, 1)
    relu = op.Relu(second)
    pat = is_op("Relu")(is_tuple_get_item(is_op("Split")(is_var("x")).has_attr(axis=1), 1))
    assert pat.match(relu) is not None
    assert pat.match(op.Relu(TupleGetItem(split, 0))) is None
    assert is_op("Relu")(wildcard()).has_dtype("float32").match(relu) is not None
    assert is_op("Relu")(wildcard()).has_dtype("int64").match(relu) is None
    assert is_op("Split")(is_var("z")).match(split) is None


def test_a_match_whose_inner_value_is_read_elsewhere_is_not_fused(backends):
    """
        Conv -> Relu        Conv is also read by Exp: fusing Conv+Relu would compute Conv twice
          \\-> Exp
    """
    tc = backends("tc", set(), patterns=[("tc.conv_relu", CONV_RELU)])
    x, w = _conv_input()
    conv = op.Conv(x, w)
    mod = module([op.Relu(conv), op.Exp(conv)], [x])
    assert merge_composite(mod, [tc]) is mod


def test_an_earlier_backend_keeps_the_ops_it_takes(backends):
    ta = backends("ta", {"Conv"})
    tc = backends("tc", set(), patterns=[("tc.conv_relu", CONV_RELU)])
    x, w = _conv_input()
    mod = module(op.Relu(op.Conv(x, w)), [x])
    assert merge_composite(mod, [ta, tc]) is mod
    assert merge_composite(mod, [tc, ta]) is not mod


def test_a_pattern_check_can_refuse_a_match(backends):
    tc = backends("tc", set(), patterns=[
        ("tc.conv_relu", CONV_RELU, lambda root: root.type.shape[1] == 8 or "wants 8 channels")])
    x, w = _conv_input()
    mod = module(op.Relu(op.Conv(x, w)), [x])
    assert merge_composite(mod, [tc]) is mod


def test_patterns_are_tried_in_order(backends):
    conv_only = is_op("Conv")(wildcard(), is_const())
    tc = backends("tc", set(), patterns=[("tc.conv_relu", CONV_RELU), ("tc.conv", conv_only)])
    x, w = _conv_input()
    mod = module(op.Relu(op.Conv(x, w)), [x])
    fused = merge_composite(mod, [tc]).main.body
    assert fused.op.attrs["Composite"] == "tc.conv_relu"


def test_partition_gives_a_composite_to_its_backend_and_the_numbers_stay(backends):
    """tc takes no op by name, only its composite: the region holds the composite call."""
    tc = backends("tc", set(), patterns=[("tc.conv_relu", CONV_RELU)])
    x, w = _conv_input()
    mod = module(op.Exp(op.Relu(op.Conv(x, w, span="conv"), span="relu"), span="exp"), [x])
    part = byoc.partition(mod, backends=[tc])
    assert list(region_spans(part).values()) == [{"conv", "relu"}]
    (name,) = [n for n in part.functions if n != "main"]
    assert part[name].body.op.attrs["Composite"] == "tc.conv_relu"
    assert byoc.explain(part) == {"exp": "tc: op Exp is not supported"}
    assert_same_run(mod, part)
