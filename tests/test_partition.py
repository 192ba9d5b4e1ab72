"""byoc.partition end to end: the seed thread's graph, node ranges, explain, the report."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from onnx import helper

import byoc
from byoc import op
from byoc.analysis import find_regions
from byoc.errors import ByocError, ModelError
from byoc.ir import Call, IRModule, TupleGetItem, assert_structural_equal, post_order
from byoc.passes import (
    annotate_target,
    infer_types,
    merge_compiler_regions,
    merge_composite,
    partition_graph,
    reject_regions,
)
from byoc.passes import compiler_begin as cb
from byoc.passes import compiler_end as ce
from byoc.report import format_table, partition_report
from tests.conftest import FLOAT, make_model
from tests.passes.util import (
    assert_fully_offloaded,
    assert_same_run,
    module,
    random_inputs,
    region_spans,
)


def create_graph(target: str = "test_target") -> IRModule:
    """The seed thread's create_graph, with byoc's builder: Conv, BatchNormalization with three
    outputs (training mode), Relu, and Abs of the running mean and variance, annotated by hand.
    ``weight + w0`` is computed on the host and enters the region through compiler_begin."""
    data = op.var("data", (1, 3, 8, 8))
    weight = op.var("weight", (16, 3, 3, 3))
    bn_gamma, bn_beta, bn_mean, bn_var = (op.var(n, (16,)) for n in
                                          ("bn_gamma", "bn_beta", "bn_mean", "bn_var"))
    w0 = op.var("w0", (16, 3, 3, 3))
    z0 = op.Add(weight, w0, span="z0")
    conv = op.Conv(cb(data, target), cb(z0, target), pads=[1, 1, 1, 1], span="conv")
    bn = op.BatchNormalization(conv, *(cb(v, target) for v in (bn_gamma, bn_beta, bn_mean,
                                                               bn_var)),
                               training_mode=1, n_outputs=3, span="bn")
    relu = op.Relu(TupleGetItem(bn, 0), span="relu")
    mean_abs = op.Abs(ce(TupleGetItem(bn, 1), target), span="mean_abs")
    var_abs = op.Abs(ce(TupleGetItem(bn, 2), target), span="var_abs")
    return module([ce(relu, target), mean_abs, var_abs],
                  [data, weight, bn_gamma, bn_beta, bn_mean, bn_var, w0], ["relu", "mean", "var"])


def _seed_inputs(mod):
    inputs = random_inputs(mod)
    inputs["bn_var"] = np.abs(inputs["bn_var"]) + 0.5
    return inputs


def test_the_seed_thread_s_graph_partitions_builds_and_runs(backends):
    backends("test_target", {"Conv", "BatchNormalization", "Relu"})
    annotated = create_graph()
    part = byoc.partition(annotated)
    (name,) = [n for n in part.functions if n != "main"]
    func = part[name]
    assert func.attrs["Compiler"] == "test_target" and func.attrs["global_symbol"] == name
    assert func.attrs["output_names"] == ["relu", "bn:1", "bn:2"]  # three results, one tuple
    assert [p.name for p in func.params] == ["data", "z0", "bn_gamma", "bn_beta", "bn_mean",
                                             "bn_var"]
    plain = IRModule({"main": find_regions(annotated.main).func})
    assert_same_run(plain, part, _seed_inputs(plain))
    assert byoc.explain(part) == {"z0": "not in any annotated region",
                                  "mean_abs": "not in any annotated region",
                                  "var_abs": "not in any annotated region"}


def test_a_lifted_function_also_runs_alone_as_main(backends):
    """The seed thread's first goal: run a subgraph by itself (to debug it). A lifted function is
    an ordinary function, and builds as a module's main."""
    backends("test_target", {"Conv", "BatchNormalization", "Relu"})
    part = byoc.partition(create_graph())
    (name,) = [n for n in part.functions if n != "main"]
    alone = IRModule({"main": part[name]})
    outputs = byoc.build(alone).run(random_inputs(alone))
    assert list(outputs) == ["relu", "bn:1", "bn:2"]
    assert outputs["relu"].shape == (1, 16, 8, 8)


def test_the_pipeline_equals_its_passes_run_one_by_one(backends):
    ta = backends("ta", {"Conv", "Relu", "Add"})
    tb = backends("tb", {"Abs", "Exp"})
    x = op.var("x", (1, 3, 4, 4))
    w = op.const(np.ones((3, 3, 1, 1), np.float32), "w")
    conv = op.Conv(x, w, span="conv")
    mod = module([op.Add(op.Relu(conv, span="relu"), op.Exp(op.Abs(conv, span="abs"), span="exp"),
                         span="add"), op.Sigmoid(conv, span="sig")], [x])
    staged = infer_types(mod)
    staged = merge_composite(staged, [ta, tb])
    staged = annotate_target(staged, [ta, tb])
    staged = merge_compiler_regions(staged, ["ta", "tb"])
    staged = reject_regions(partition_graph(staged))
    part = byoc.partition(mod, backends=["ta", "tb"])
    assert_structural_equal(part, staged)
    assert byoc.explain(part) == byoc.explain(staged) == {
        "sig": "ta: op Sigmoid is not supported; tb: op Sigmoid is not supported"}
    assert_same_run(mod, part)


def test_explain_needs_a_partitioned_module():
    x = op.var("x", (2,))
    with pytest.raises(ByocError, match="not partitioned"):
        byoc.explain(module(op.Relu(x), [x]))


def test_partition_needs_a_backend_and_refuses_duplicates():
    x = op.var("x", (2,))
    with pytest.raises(ByocError, match="at least one backend"):
        byoc.partition(module(op.Relu(x), [x]))
    with pytest.raises(ByocError, match="listed twice"):
        byoc.partition(module(op.Relu(x), [x]), backends=["reference", "reference"])


def test_no_fallback_names_a_node_left_on_the_host(backends):
    backends("ta", {"Relu"})
    x = op.var("x", (2,))
    mod = module(op.Exp(op.Relu(x), span="exp"), [x])
    with pytest.raises(ModelError, match=r"node 'exp' \(Exp\): would run on the host, and "
                                         r"no_fallback is set: ta: op Exp is not supported"):
        byoc.partition(mod, backends=["ta"], no_fallback=True)
    assert_fully_offloaded(byoc.partition(mod, backends=["reference"], no_fallback=True),
                           "reference")


# -- node ranges ----------------------------------------------------------------------------------


def _cast_weights():
    """The seed thread's node-range graph: weights cast inside the range, read by later nodes.

        x -> r1 = Relu -> conv = Conv(r1, Cast(w)) -> add = Add(conv, Cast(b)) -> r2 = Relu -> sm
    Its nodes in topological order (what range indices count): r1, cast_w, conv, cast_b, add,
    r2, sm.
    """
    x = op.var("x", (1, 2, 3, 3))
    w = op.var("w", (2, 2, 1, 1), "float16")
    b = op.var("b", (1, 2, 1, 1), "float16")
    r1 = op.Relu(x, span="r1")
    conv = op.Conv(r1, op.Cast(w, to=1, span="cast_w"), span="conv")
    add = op.Add(conv, op.Cast(b, to=1, span="cast_b"), span="add")
    return module(op.Softmax(op.Relu(add, span="r2"), span="sm"), [x, w, b]), (x, w, b)


def test_a_range_marks_every_input_from_outside_not_only_the_first_node_s():
    """Range conv..r2: conv reads r1 and cast_w from outside, add nothing (cast_b is inside):
    every outside input gets its compiler_begin (what the seed's hand-written annotator missed)."""
    mod, (x, w, b) = _cast_weights()
    got = byoc.annotate_range(mod, "reference", "conv", "r2")
    t = "reference"
    r1 = op.Relu(x)
    conv = op.Conv(cb(r1, t), cb(op.Cast(w, to=1), t))
    add = op.Add(conv, op.Cast(cb(b, t), to=1))
    want = module(op.Softmax(ce(op.Relu(add), t)), [x, w, b])
    assert_structural_equal(got, want)


@pytest.mark.parametrize("start, end", [("r1", "r2"), (0, 5), ("0", "-2"), ("", "r2")])
def test_a_range_by_names_or_indices_partitions_and_runs(start, end):
    mod, _ = _cast_weights()
    part = byoc.partition(byoc.annotate_range(mod, "reference", start, end), annotated=True)
    assert list(region_spans(part).values()) == [{"r1", "cast_w", "conv", "cast_b", "add", "r2"}]
    assert byoc.explain(part) == {"sm": "outside the range 'r1'..'r2'"}
    inputs = random_inputs(mod)
    assert_same_run(mod, part, inputs)


def test_a_regex_range_that_is_not_convex_names_the_nodes_that_would_have_to_join():
    mod, _ = _cast_weights()
    with pytest.raises(ModelError, match=r"not convex.*would have to join it: node\(s\) 'conv', "
                                         r"'add'$"):
        byoc.annotate_range(mod, "reference", re.compile(r"^r\d$"))
    part = byoc.partition(byoc.annotate_range(mod, "reference", re.compile(r"^(r\d|conv|add)$")))
    assert list(region_spans(part).values()) == [{"r1", "conv", "add", "r2"}]


def test_range_errors_say_what_is_wrong(backends):
    backends("ta", {"Relu"})
    mod, _ = _cast_weights()
    with pytest.raises(ModelError, match="no node named 'nope'"):
        byoc.annotate_range(mod, "reference", "nope", "r2")
    with pytest.raises(ModelError, match=r"starts at node 'r2' \(index 5\), after its end 'r1'"):
        byoc.annotate_range(mod, "reference", "r2", "r1")
    with pytest.raises(ModelError, match="index 40 is out of range: main has 7 nodes"):
        byoc.annotate_range(mod, "reference", 0, 40)
    with pytest.raises(ModelError, match=r"'ta' does not take 4 node\(s\) of the range: "
                                         r"'cast_w' \(Cast\): op Cast is not supported"):
        byoc.annotate_range(mod, "ta", "r1", "r2")


# -- what the CLI shows ---------------------------------------------------------------------------


def test_the_report_lists_regions_host_nodes_and_reasons(backends):
    backends("ta", {"Relu", "Abs"})
    x = op.var("x", (2, 3))
    r = op.Relu(x, span="relu")
    mod = module([op.Abs(r, span="abs"), op.Exp(r, span="exp")], [x], ["y", "z"])
    report = partition_report(byoc.partition(mod, backends=["ta"]))
    json.dumps(report)
    (region,) = report["regions"]
    assert region["backend"] == "ta" and region["nodes"] == ["relu", "abs"]
    assert region["inputs"] == ["x"] and region["outputs"] == ["relu", "abs"]
    assert region["op_types"] == {"Relu": 1, "Abs": 1}
    assert region["bytes_in"] == 24 and region["bytes_out"] == 48
    assert report["host_nodes"] == ["exp"]
    assert report["reasons"] == {"exp": "ta: op Exp is not supported"}
    table = format_table(report, explain=True)
    assert region["name"] in table and "Abs, Relu" in table and "24B / 48B" in table
    assert ("1 region(s), numbered from 0 as extract --region and bisect number them; "
            "2 of 3 nodes offloaded, 1 on the host") in table
    assert table.endswith("host nodes:\n  exp: ta: op Exp is not supported")


def test_a_control_flow_op_stays_on_the_host_and_its_branches_are_partitioned():
    """If stays on the host (issue 8); each branch calls a region of its own."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then",
                               [], [helper.make_tensor_value_info("t", FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else",
                               [], [helper.make_tensor_value_info("e", FLOAT, [3])])
    model = make_model([helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
                        helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
                        helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                         else_branch=else_g)],
                       [("x", FLOAT, [3])], [("y", FLOAT, [3])],
                       [helper.make_tensor("zero", FLOAT, [], [0.0])])
    mod = byoc.load_onnx(model)
    part = byoc.partition(mod, backends=["reference"])
    assert [e.op_name for e in post_order(part.main.body) if isinstance(e, Call)] == [
        "@" + n for n in part.functions if n.startswith("reference_sum")] + ["If"]
    (if_call,) = [e for e in post_order(part.main.body) if isinstance(e, Call) and e.op == "If"]
    for branch in ("then_branch", "else_branch"):
        assert_fully_offloaded(IRModule({**part.functions, "main": if_call.attrs[branch]}),
                               "reference")
    for x in ([1.0, -2.0, 3.0], [-1.0, -2.0, 0.5]):
        assert_same_run(mod, part, {"x": np.array(x, np.float32)})
