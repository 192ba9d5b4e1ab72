"""reject_regions: a backend's hook sends small regions back to the host, cleanly."""

from __future__ import annotations

import numpy as np

import byoc
from byoc import op
from byoc.backend import fewer_than
from byoc.ir import assert_structural_equal
from byoc.pattern import is_const, is_op, wildcard

from .util import assert_same_run, module, region_spans


def test_a_rejected_region_is_inlined_back_with_its_reason(backends):
    """
        x -> Relu -> Exp -> Abs -> Neg       ta takes Relu, Abs, Neg; regions {Relu}, {Abs, Neg}.
                                             fewer_than(2) sends {Relu} back to the host.
    """
    ta = backends("ta", {"Relu", "Abs", "Neg"}, reject_region=fewer_than(2))
    x = op.var("x", (4,))
    mod = module(op.Neg(op.Abs(op.Exp(op.Relu(x, span="relu"), span="exp"), span="abs"),
                        span="neg"), [x])
    part = byoc.partition(mod, backends=[ta])
    assert list(region_spans(part).values()) == [{"abs", "neg"}]
    reasons = byoc.explain(part)
    assert reasons["exp"] == "ta: op Exp is not supported"
    assert reasons["relu"].startswith("region ta_relu_") and reasons["relu"].endswith(
        "was sent back to the host: only 1 compute op(s), fewer than 2")
    assert_same_run(mod, part)


def test_a_rejected_composite_comes_back_as_the_ops_it_was_made_of(backends):
    tc = backends("tc", set(), patterns=[("tc.conv_relu",
                                          is_op("Relu")(is_op("Conv")(wildcard(), is_const())))],
                  reject_region=lambda func: "no, thanks")
    x = op.var("x", (1, 3, 4, 4))
    w = op.const(np.full((2, 3, 1, 1), 0.5, np.float32), "w")
    mod = module(op.Relu(op.Conv(x, w, span="conv"), span="relu"), [x])
    part = byoc.partition(mod, backends=[tc])
    assert list(part.functions) == ["main"]
    assert_structural_equal(part.main, mod.main)
    assert set(byoc.explain(part)) == {"conv", "relu"}
    assert byoc.explain(part)["conv"].endswith("was sent back to the host: no, thanks")


def test_a_rejected_region_with_several_results_unpacks_cleanly(backends):
    ta = backends("ta", {"Relu", "Abs"}, reject_region=lambda func: True)
    x = op.var("x", (4,))
    r = op.Relu(x)
    mod = module([op.Abs(r), op.Exp(r)], [x])
    part = byoc.partition(mod, backends=[ta])
    assert_structural_equal(part.main, mod.main)
    assert_same_run(mod, part)
