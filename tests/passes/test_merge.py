"""merge_compiler_regions: regions of one backend join wherever no cycle results, and only there."""

from __future__ import annotations

import pytest

from byoc import op
from byoc.analysis import find_regions
from byoc.errors import ModelError
from byoc.ir import assert_structural_equal
from byoc.passes import annotate_target, merge_compiler_regions
from byoc.passes import compiler_begin as cb
from byoc.passes import compiler_end as ce

from .util import module


def _merged(mod, *bs):
    return merge_compiler_regions(annotate_target(mod, list(bs)), [b.name for b in bs])


def test_diamond_graph_fanouts(backends):
    """TVM's test of the same name.

        O = taken by ta, X = host
           O(a)             O         O
          /    \\           /               \\
        O(b)   X(c)  ->   O    +       +    X        {a, b} join; d cannot (it reads c,
          \\    /                  \\ /                which reads a)
           O(d)                    O
    """
    ta = backends("ta", {"Relu", "Abs", "Add"})
    x = op.var("x", (4,))
    a = op.Relu(x)
    b, c = op.Abs(a), op.Exp(a)
    mod = module(op.Add(b, c), [x])

    ma = op.Relu(cb(x, "ta"))
    mb = op.Abs(ma)
    mc = op.Exp(ce(ma, "ta"))
    md = op.Add(cb(ce(mb, "ta"), "ta"), cb(mc, "ta"))
    assert_structural_equal(_merged(mod, ta), module(ce(md, "ta"), [x]))


def test_a_host_node_between_two_regions_keeps_them_apart(backends):
    """
        O -> X -> O        stays three parts: joining the two O would make them wait for X,
                           which waits for them
    """
    ta = backends("ta", {"Relu", "Abs"})
    x = op.var("x", (4,))
    mod = module(op.Abs(op.Exp(op.Relu(x))), [x])

    relu = op.Relu(cb(x, "ta"))
    abs_ = op.Abs(cb(op.Exp(ce(relu, "ta")), "ta"))
    assert_structural_equal(_merged(mod, ta), module(ce(abs_, "ta"), [x]))


def test_a_chain_of_one_backend_becomes_one_region(backends):
    """
        x -> O -> O -> O -> X      one region, one compiler_begin, one compiler_end
    """
    ta = backends("ta", {"Relu", "Abs", "Neg"})
    x = op.var("x", (4,))
    mod = module(op.Exp(op.Neg(op.Abs(op.Relu(x)))), [x])

    neg = op.Neg(op.Abs(op.Relu(cb(x, "ta"))))
    assert_structural_equal(_merged(mod, ta), module(op.Exp(ce(neg, "ta")), [x]))


def test_independent_parts_of_one_backend_join_side_by_side(backends):
    """
        x       y           Relu and Abs share no edge, and nothing runs between them: one
        |       |           region in two parts, tied by the region label
      O(Relu)  O(Abs)
         \\     /
          X(Add)
    """
    ta = backends("ta", {"Relu", "Abs"})
    x, y = op.var("x", (4,)), op.var("y", (4,))
    mod = module(op.Sub(op.Relu(x), op.Abs(y)), [x, y])

    relu = op.Relu(cb(x, "ta", region=0))
    abs_ = op.Abs(cb(y, "ta", region=0))
    want = module(op.Sub(ce(relu, "ta", region=0), ce(abs_, "ta", region=0)), [x, y])
    assert_structural_equal(_merged(mod, ta), want)


def test_two_backends_each_merge_without_crossing(backends):
    """
            x
            |
          A (ta)            ta: {A, C} and {D} (A -> B -> D leaves ta's region and comes back)
         /    \\             tb: {B}
      B (tb)  C (ta)
         \\    /
          D (ta)
    """
    ta = backends("ta", {"Relu", "Abs", "Add"})
    tb = backends("tb", {"Neg"})
    x = op.var("x", (4,))
    a = op.Relu(x)
    mod = module(op.Add(op.Neg(a), op.Abs(a)), [x])

    ma = op.Relu(cb(x, "ta"))
    mc = op.Abs(ma)
    mb = op.Neg(cb(ce(ma, "ta"), "tb"))
    md = op.Add(cb(ce(mb, "tb"), "ta"), cb(ce(mc, "ta"), "ta"))
    assert_structural_equal(_merged(mod, ta, tb), module(ce(md, "ta"), [x]))


@pytest.mark.parametrize("first", ["ta", "tb"])
def test_crossed_backends_merge_in_priority_order(backends, first):
    """
        a (ta)     c (tb)          a -> d and c -> b. Both pairs could join, but not both: the
          |  \\   /  |              two regions would each wait for the other. The backend listed
          |   \\ /   |              first joins its pair; the other keeps two regions.
          |    X    |
          |   / \\   |
        b (ta)   d (tb)
    """
    ta = backends("ta", {"Relu", "Add"})
    tb = backends("tb", {"Abs", "Sub"})
    x = op.var("x", (4,))
    a, c = op.Relu(x), op.Abs(x)
    b, d = op.Add(a, c), op.Sub(c, a)
    mod = module([b, d], [x])
    order = [ta, tb] if first == "ta" else [tb, ta]
    targets = find_regions(_merged(mod, *order).main).targets
    counts = {t: targets.count(t) for t in ("ta", "tb")}
    assert counts == ({"ta": 1, "tb": 2} if first == "ta" else {"ta": 2, "tb": 1})


def test_merging_twice_changes_nothing(backends):
    ta = backends("ta", {"Relu", "Abs", "Add"})
    x = op.var("x", (4,))
    a = op.Relu(x)
    mod = module(op.Add(op.Abs(a), op.Exp(a)), [x])
    once = _merged(mod, ta)
    assert_structural_equal(merge_compiler_regions(once), once)


def test_a_region_marked_across_a_host_node_is_an_error_naming_that_node():
    """
        cb(x) -> Relu ----------.        Relu and Add are one region (the edge joins them), but
                  |              \\       Relu -> Exp -> Add leaves it and comes back: Exp would
                 ce -> Exp -> cb -> Add   have to join
    """
    x = op.var("x", (4,))
    relu = op.Relu(cb(x, "cc"), span="relu")
    exp = op.Exp(ce(relu, "cc"), span="exp")
    mod = module(ce(op.Add(relu, cb(exp, "cc"), span="add"), "cc"), [x])
    with pytest.raises(ModelError, match=r"not convex.*'exp'.*would have to join"):
        merge_compiler_regions(mod)


def test_regions_marked_so_that_they_wait_for_each_other_are_an_error():
    """
        b1 (ta)    c1 (tb)        marked as regions {b1, b2} of ta and {c1, c2} of tb, each
          |   \\    /  |           convex, but each waits for the other: b2 reads c1, c2 reads
          |    \\  /   |           b1. (The extra region of ta, Neg(y), makes merge sweep.)
          |     \\/    |
        b2 (ta)  c2 (tb)
    """
    x, y = op.var("x", (4,)), op.var("y", (4,))
    b1 = op.Relu(cb(x, "ta"), span="b1")
    c1 = op.Abs(cb(x, "tb"), span="c1")
    b2 = op.Add(b1, cb(ce(c1, "tb"), "ta"), span="b2")
    c2 = op.Sub(c1, cb(ce(b1, "ta"), "tb"), span="c2")
    extra = op.Neg(cb(y, "ta"), span="extra")
    mod = module([ce(b2, "ta"), ce(c2, "tb"), ce(extra, "ta")], [x, y])
    with pytest.raises(ModelError, match=r"regions \('ta' at 'b1', 'tb' at 'c1'\) depend on each "
                                         "other in a cycle"):
        merge_compiler_regions(mod)
