"""annotate_target and the region reader: markers on every boundary, errors that say what to fix."""

from __future__ import annotations

import numpy as np
import pytest

from byoc import op
from byoc.analysis import HOST_REASONS, annotate, find_regions
from byoc.backend import resolve
from byoc.errors import ModelError
from byoc.ir import TupleGetItem, assert_structural_equal
from byoc.passes import annotate_target
from byoc.passes import compiler_begin as cb
from byoc.passes import compiler_end as ce

from .util import module


def _conv_relu_softmax():
    x = op.var("x", (1, 3, 4, 4))
    w = op.const(np.ones((2, 3, 1, 1), np.float32), "w")
    return x, w


def test_every_argument_and_every_leaving_value_is_marked(backends):
    """
    ta takes Conv and Relu; Softmax stays on the host.

        x   w            cb(x)  cb(w)
         \\ /                \\  /
         Conv     (ta)       Conv
          |                   |
         Relu     (ta)  ->   ce, cb        each op its own region, met as begin(end(v))
          |                   |
        Softmax   (host)     Relu
                              |
                              ce
                              |
                            Softmax
    """
    ta = backends("ta", {"Conv", "Relu"})
    x, w = _conv_relu_softmax()
    mod = module(op.Softmax(op.Relu(op.Conv(x, w))), [x])
    got = annotate_target(mod, [ta])

    conv = op.Conv(cb(x, "ta"), cb(w, "ta"))
    relu = op.Relu(cb(ce(conv, "ta"), "ta"))
    want = module(op.Softmax(ce(relu, "ta")), [x])
    assert_structural_equal(got, want)


def test_a_value_read_by_two_regions_ends_once_and_begins_once_per_region(backends):
    """
        x                      cb(x)
        |                        |
      Relu  (ta)               Relu
      /   \\          ->         ce        one compiler_end, read by both
    Abs   Exp (host)          /   \\
    (ta)                    cb    Exp
                             |
                            Abs
    """
    ta = backends("ta", {"Relu", "Abs"})
    x = op.var("x", (4,))
    relu = op.Relu(x)
    mod = module([op.Abs(relu), op.Exp(relu)], [x])
    got = annotate_target(mod, [ta])

    r = op.Relu(cb(x, "ta"))
    end = ce(r, "ta")
    want = module([ce(op.Abs(cb(end, "ta")), "ta"), op.Exp(end)], [x])
    assert_structural_equal(got, want)


def test_each_call_goes_to_the_first_backend_that_takes_it(backends):
    """
        x -> Relu (ta and tb take it: ta is first) -> Abs (only tb) -> Exp (nobody)
    """
    ta = backends("ta", {"Relu"})
    tb = backends("tb", {"Relu", "Abs"})
    x = op.var("x", (4,))
    mod = module(op.Exp(op.Abs(op.Relu(x, span="relu"), span="abs"), span="exp"), [x])
    got = annotate_target(mod, [ta, tb])

    relu = op.Relu(cb(x, "ta"))
    abs_ = op.Abs(cb(ce(relu, "ta"), "tb"))
    assert_structural_equal(got, module(op.Exp(ce(abs_, "tb")), [x]))
    assert got.attrs[HOST_REASONS] == {"exp": "ta: op Exp is not supported; "
                                              "tb: op Exp is not supported"}


def test_outputs_of_a_multi_output_op_go_with_it():
    """
        BatchNormalization (training, 3 outputs) in ta; Abs of its running mean on the host.
        The TupleGetItems stay inside the region; compiler_end goes on each output that leaves.
    """
    ta = resolve("reference")
    x = op.var("x", (1, 2, 3, 3))
    g, b, m, v = (op.var(n, (2,)) for n in "gbmv")
    bn = op.BatchNormalization(x, g, b, m, v, training_mode=1, n_outputs=3)
    mod = module([TupleGetItem(bn, 0), op.Abs(TupleGetItem(bn, 1))], [x, g, b, m, v])
    got = annotate_target(mod, ta)

    abn = op.BatchNormalization(*(cb(a, "reference") for a in (x, g, b, m, v)), training_mode=1,
                                n_outputs=3)
    abs_ = op.Abs(cb(ce(TupleGetItem(abn, 1), "reference"), "reference"))
    want = module([ce(TupleGetItem(abn, 0), "reference"), ce(abs_, "reference")],
                  [x, g, b, m, v])
    assert_structural_equal(got, want)


def test_a_call_with_no_inputs_stays_on_the_host_with_its_reason():
    x = op.var("x", (2, 2))
    noise = op.RandomNormal(shape=[2, 2], span="noise")
    mod = module(op.Add(x, noise, span="add"), [x])
    got = annotate_target(mod, resolve("reference"))
    assert "noise" in got.attrs[HOST_REASONS] and "no inputs" in got.attrs[HOST_REASONS]["noise"]
    assert "add" not in got.attrs[HOST_REASONS]


def test_annotating_an_annotated_module_is_an_error():
    x = op.var("x", (2,))
    mod = module(ce(op.Relu(cb(x, "reference")), "reference"), [x])
    with pytest.raises(ModelError, match="already annotated"):
        annotate_target(mod, resolve("reference"))


# -- reading regions back: the errors of the seed thread, made clear -------------------------------


def test_a_free_variable_without_compiler_begin_names_the_node_and_the_argument():
    """The seed thread's second mistake: a weight read inside the region without compiler_begin.
    TVM said "Arg regions are inconsistent"; we name the node, the argument and the fix."""
    x = op.var("x", (1, 3, 4, 4))
    w = op.var("block5_conv3/ReadVariableOp:0", (2, 3, 1, 1))
    conv = op.Conv(cb(x, "cc"), w, span="block5_conv3/convolution")
    mod = module(ce(conv, "cc"), [x, w])
    with pytest.raises(ModelError) as err:
        find_regions(mod.main)
    msg = str(err.value)
    assert "'block5_conv3/convolution' (Conv)" in msg and "argument 1" in msg
    assert "graph input 'block5_conv3/ReadVariableOp:0'" in msg and "compiler_begin" in msg
    assert "inconsistent" not in msg and "\n" not in msg


def test_a_region_value_read_by_the_host_without_compiler_end_is_named():
    x = op.var("x", (4,))
    relu = op.Relu(cb(x, "cc"), span="relu")
    mod = module(ce(op.Add(relu, x, span="add"), "cc"), [x])
    with pytest.raises(ModelError, match=r"'add' \(Add\).*argument 1 \(graph input 'x'\)"):
        find_regions(mod.main)


def test_an_output_still_inside_a_region_is_named():
    x = op.var("x", (4,))
    mod = module([op.Relu(cb(x, "cc"), span="relu")], [x], names=["y"])
    with pytest.raises(ModelError, match=r"output 'y' .*'relu'.* still inside a region of 'cc'"):
        find_regions(mod.main)


@pytest.mark.parametrize("case, message", [
    ("end_outside", r"compiler_end\(\.\.\., 'cc'\) of graph input 'x' closes no region"),
    ("end_wrong", r"compiler_end\(\.\.\., 'dd'\) closes a region of 'cc'"),
    ("begin_inside", r"compiler_begin\(\.\.\., 'cc'\) reads the output of node 'relu'.* still "
                     r"inside a region of 'cc'"),
    ("two_backends", r"'add' \(Add\): reads .* from a region of 'dd' and other arguments from "
                     r"a region of 'cc'"),
])
def test_misplaced_markers_are_errors_that_say_what_is_wrong(case, message):
    x = op.var("x", (4,))
    relu = op.Relu(cb(x, "cc"), span="relu")
    body = {
        "end_outside": lambda: op.Abs(ce(x, "cc")),
        "end_wrong": lambda: ce(relu, "dd"),
        "begin_inside": lambda: ce(op.Abs(cb(relu, "cc")), "cc"),
        "two_backends": lambda: ce(op.Add(relu, op.Abs(cb(x, "dd")), span="add"), "cc"),
    }[case]()
    with pytest.raises(ModelError, match=message):
        find_regions(module(body, [x]).main)


def test_markers_refuse_multi_output_values():
    x = op.var("x", (4, 2))
    split = op.Split(x, num_outputs=2)
    with pytest.raises(ValueError, match="mark each output"):
        cb(split, "cc")


# -- writing regions back -----------------------------------------------------------------------


def test_regions_read_back_are_the_regions_written():
    x = op.var("x", (4,))
    mod = module(op.Exp(op.Abs(op.Relu(x))), [x])
    annotated = annotate_target(mod, resolve("reference"))
    regions = find_regions(annotated.main)
    assert_structural_equal(regions.func, mod.main)
    assert regions.targets == ["reference"] * 3
    assert_structural_equal(annotate(regions), annotated.main)


def test_parts_of_one_region_that_no_edge_joins_share_a_region_label():
    """
        x      y          Relu(x) and Abs(y) in one region of ta, side by side: nothing
        |      |          connects them, so their markers carry region=0, and reading them
      Relu    Abs         back joins the two parts again.
         \\   /
          Add (host)
    """
    x, y = op.var("x", (4,)), op.var("y", (4,))
    relu, abs_ = op.Relu(x), op.Abs(y)
    mod = module(op.Add(relu, abs_), [x, y])
    plain = find_regions(mod.main)
    regions = plain.with_regions([0 if e is relu or e is abs_ else -1 for e in plain.order], ["ta"])
    got = annotate(regions)

    want_relu = op.Relu(cb(x, "ta", region=0))
    want_abs = op.Abs(cb(y, "ta", region=0))
    want = module(op.Add(ce(want_relu, "ta", region=0), ce(want_abs, "ta", region=0)), [x, y])
    assert_structural_equal(got, want.main)
    back = find_regions(got)
    assert back.targets == ["ta"] and sorted(set(back.region)) == [-1, 0]
