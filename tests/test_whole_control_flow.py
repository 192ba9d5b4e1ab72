"""Control flow a backend runs whole (byoc/passes/whole_control_flow.py): an If, Loop or Scan
goes, bodies and all, into a region of a backend registered with ``control_flow=True``
(onnxruntime) when that backend takes every call of its bodies; otherwise, and always with
``whole_control_flow=False`` (what a tuned plan replays), the host runs it and each body is
partitioned on its own."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import byoc
from byoc.ir import Call, post_order
from byoc.passes.annotate import CONTROL_FLOW
from byoc.report import offload_share, partition_report
from tests.conftest import make_model
from tests.models.make_control_flow import loop_model, scan_model
from tests.test_partition_control_flow import _feeds, _onnxruntime, if_model


def _regions(part: byoc.IRModule) -> dict:
    return {n: f for n, f in part.functions.items() if f.attrs.get("Compiler")}


def _ops(func) -> list[str]:
    return [c.op for c in post_order(func.body) if isinstance(c, Call) and isinstance(c.op, str)]


def _both_branches() -> list[dict[str, np.ndarray]]:
    """x with a positive sum (then) and a negative one (else)."""
    x = np.abs(np.random.default_rng(0).standard_normal(3)).astype(np.float32)
    return [{"x": x}, {"x": -x}]


def test_an_if_goes_whole_into_one_onnxruntime_region_with_its_neighbours():
    model = if_model()
    part = byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"])
    (func,) = _regions(part).values()
    assert "If" in _ops(func) and "ReduceSum" in _ops(func)
    assert byoc.explain(part) == {}
    report = partition_report(part)
    assert offload_share(report, "main") == 1.0 and offload_share(report, "bodies") == 1.0
    assert sorted(report["regions"][0]["nodes"]) == sorted(
        ["sum", "positive", "if", "then_relu", "then_mul", "then_abs", "else_neg", "else_add"])
    for feeds in _both_branches():
        np.testing.assert_array_equal(byoc.build(part).run(feeds)["y"],
                                      _onnxruntime(model, feeds)["y"])


def test_a_backend_without_control_flow_first_leaves_the_if_to_onnxruntime():
    model = if_model()
    part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler", "onnxruntime"])
    holding = [f for f in _regions(part).values() if "If" in _ops(f)]
    assert [f.attrs["Compiler"] for f in holding] == ["onnxruntime"]
    for feeds in _both_branches():
        np.testing.assert_allclose(byoc.build(part).run(feeds)["y"],
                                   _onnxruntime(model, feeds)["y"], rtol=0, atol=1e-5)


def test_whole_control_flow_off_keeps_the_if_on_the_host_and_partitions_its_bodies():
    model = if_model()
    part = byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"],
                          whole_control_flow=False)
    assert byoc.explain(part) == {"if": CONTROL_FLOW}
    assert all("If" not in _ops(f) for f in _regions(part).values())
    assert offload_share(partition_report(part), "bodies") == 1.0


def test_a_body_node_the_backend_refuses_keeps_its_if_on_the_host():
    """onnxruntime refuses an integer Div by a divisor that may be 0 (byoc answers 0 there)."""
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node("Div", ["a", "b"], ["t"], name="then_div")],
                               "then", [], [vi("t", TensorProto.INT32, [3])])
    else_g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["e"], name="else_add")],
                               "else", [], [vi("e", TensorProto.INT32, [3])])
    model = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                         else_branch=else_g)],
                       [("c", TensorProto.BOOL, []), ("a", TensorProto.INT32, [3]),
                        ("b", TensorProto.INT32, [3])], [("y", TensorProto.INT32, [3])])
    part = byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"])
    why = byoc.explain(part)
    assert why["if"] == CONTROL_FLOW and why["then_div"].startswith("onnxruntime: integer Div")
    (func,) = _regions(part).values()  # the else branch's Add alone
    assert _ops(func) == ["Add"]
    feeds = {"c": np.array(True), "a": np.array([7, -7, 5], np.int32),
             "b": np.array([2, 0, -1], np.int32)}
    np.testing.assert_array_equal(byoc.build(part).run(feeds)["y"], [3, 0, -5])


def test_loops_and_scans_go_whole_and_match_onnxruntime():
    for model in (loop_model(), scan_model()):
        part = byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"])
        assert byoc.explain(part) == {}, model.graph.name
        assert any({"Loop", "Scan"} & set(_ops(f)) for f in _regions(part).values())
        feeds = _feeds(model)
        got, want = byoc.build(part).run(feeds), _onnxruntime(model, feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


def test_an_if_inside_an_if_goes_whole_once():
    inner = if_model().graph.node[2]  # the If of if_model, its branches capturing x
    vi = helper.make_tensor_value_info
    outer_then = helper.make_graph(
        [*if_model().graph.node[:2], inner], "outer_then", [], [vi("y", TensorProto.FLOAT, [3])])
    outer_else = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["o"], name="sig")],
                                   "outer_else", [], [vi("o", TensorProto.FLOAT, [3])])
    model = make_model([helper.make_node("If", ["k"], ["z"], name="outer", then_branch=outer_then,
                                         else_branch=outer_else)],
                       [("k", TensorProto.BOOL, []), ("x", TensorProto.FLOAT, [3])],
                       [("z", TensorProto.FLOAT, [3])],
                       [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
                        helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])])
    onnx.checker.check_model(model)
    part = byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"])
    (func,) = _regions(part).values()
    assert _ops(func) == ["If"] and byoc.explain(part) == {}
    for k in (True, False):
        for feeds in _both_branches():
            feeds = {**feeds, "k": np.array(k)}
            np.testing.assert_array_equal(byoc.build(part).run(feeds)["z"],
                                          _onnxruntime(model, feeds)["z"])
