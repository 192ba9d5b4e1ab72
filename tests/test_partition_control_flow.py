"""Partitioning inside If, Loop and Scan bodies (issue 8): regions per body, on the host's
control-flow node; names and report scopes; numbers against onnxruntime; extract and capture of
a body's run; linear time over many bodies."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import byoc
from byoc.analysis import walk_functions
from byoc.backend import find_backend, get_backend
from byoc.extract import extract, load_case, repro
from byoc.ir import Call, Constant, GlobalVar, IRModule, post_order
from byoc.report import format_table, offload_share, partition_report
from byoc.runtime.executor import Executable
from tests.conftest import FLOAT, make_model
from tests.models.make_control_flow import loop_model, scan_model


def if_model() -> onnx.ModelProto:
    """y = If(sum(x) > 0) then Abs(Relu(x) * w) else Neg(x) + x; x is captured from main, and
    the initializer w is a constant in the branch."""
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t0"], name="then_relu"),
                                helper.make_node("Mul", ["t0", "w"], ["t1"], name="then_mul"),
                                helper.make_node("Abs", ["t1"], ["t"], name="then_abs")],
                               "then", [], [vi("t", FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e0"], name="else_neg"),
                                helper.make_node("Add", ["e0", "x"], ["e"], name="else_add")],
                               "else", [], [vi("e", FLOAT, [3])])
    return make_model([helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
                       helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
                       helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                        else_branch=else_g)],
                      [("x", FLOAT, [3])], [("y", FLOAT, [3])],
                      [helper.make_tensor("zero", FLOAT, [], [0.0]),
                       helper.make_tensor("w", FLOAT, [3], [1.0, 2.0, 3.0])])


def _calls(func) -> list[Call]:
    return [e for e in post_order(func.body) if isinstance(e, Call)]


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in model.graph.input}


def _onnxruntime(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


# -- structure ----------------------------------------------------------------------------------


def test_each_branch_gets_its_own_regions_and_the_if_stays_on_the_host():
    mod = byoc.load_onnx(if_model())
    part = byoc.partition(mod, backends=["reference"])
    (if_call,) = [c for c in _calls(part.main) if c.op == "If"]
    for attr, first in (("then_branch", "then_relu"), ("else_branch", "else_neg")):
        (region,) = _calls(if_call.attrs[attr])  # the whole branch is one region
        assert isinstance(region.op, GlobalVar)
        short = attr.split("_")[0]
        assert re.fullmatch(rf"reference_if_{short}_{first}_[0-9a-f]{{8}}", region.op.name)
        func = part[region.op.name]
        # The captured outer values enter as parameters; the branch keeps its lifted form.
        # An outer constant is no capture: the branch holds it, so backends see a constant.
        assert [p.name for p in func.params] == ["x"]
        assert if_call.attrs[attr].attrs["captures"] == 1
        consts = [e.name for e in post_order(func.body) if isinstance(e, Constant)]
        assert consts == (["w"] if short == "then" else [])
    for x in ([1.0, -2.0, 3.0], [-1.0, -2.0, 0.5]):
        feeds = {"x": np.array(x, np.float32)}
        np.testing.assert_array_equal(byoc.build(part).run(feeds)["y"],
                                      byoc.build(mod).run(feeds)["y"])


def test_report_gives_each_region_its_scope_and_lists_body_host_nodes(backends):
    backends("ta", supports={"Relu", "Mul", "Neg", "Add", "ReduceSum", "Greater"})
    part = byoc.partition(byoc.load_onnx(if_model()), backends=["ta"])
    report = json.loads(json.dumps(partition_report(part)))
    scopes = {r["name"]: r["scope"] for r in report["regions"]}
    assert sorted(map(tuple, scopes.values())) == [(), ("if", "else_branch"), ("if", "then_branch")]
    assert report["host_nodes"] == ["if", "then_abs"]
    assert report["reasons"]["then_abs"] == "ta: op Abs is not supported"
    assert "control flow" in report["reasons"]["if"]
    assert byoc.explain(part)["then_abs"] == "ta: op Abs is not supported"
    assert report["offload"] == {"main": {"nodes": 3, "offloaded": 2},
                                 "bodies": {"nodes": 5, "offloaded": 4}}
    assert "inside If/Loop/Scan bodies: 4 of 5 nodes offloaded (80%)" in format_table(report)


def test_regions_never_cross_a_body_boundary_and_names_are_unique_and_safe():
    for model in (loop_model(), scan_model(), if_model()):
        mod = byoc.load_onnx(model)
        nodes_of = {scope: {c.span.name for c in _calls(f)}
                    for scope, f in walk_functions(mod.main)}
        report = partition_report(byoc.partition(mod, backends=["reference"]))
        names = [r["name"] for r in report["regions"]]
        assert len(set(names)) == len(names)
        for r in report["regions"]:
            assert re.fullmatch(r"[A-Za-z0-9_]+", r["name"])
            assert set(r["nodes"]) <= nodes_of[tuple(r["scope"])], r["name"]


def test_loop_body_regions_take_captures_as_params_and_bind_inner_constants():
    part = byoc.partition(byoc.load_onnx(loop_model()), backends=["reference"])
    report = partition_report(part)
    (head,) = [r for r in report["regions"] if "loop_gather" in r["nodes"]]
    assert head["scope"] == ["loop", "body"]
    assert {"x", "i"} <= set(head["inputs"])  # x is read from main
    assert "loop_bias" not in head["inputs"]  # a Constant node inside the body: bound
    assert "w" not in head["inputs"]  # an initializer of main: a constant in the body, bound
    nested = [r for r in report["regions"] if r["scope"][:4] == ["loop", "body", "loop_if",
                                                                  "then_branch"]]
    assert [r["name"].startswith("reference_loop_body_loop_if_then_") for r in nested] == [True]


def test_a_body_region_the_backend_rejects_goes_back_into_the_body(backends):
    backends("tiny", supports=lambda call: True,
             reject_region=lambda f: "one node" if len(_calls(f)) == 1 else None)
    part = byoc.partition(byoc.load_onnx(loop_model()), backends=["tiny"])
    report = partition_report(part)
    assert all(len(r["nodes"]) > 1 for r in report["regions"])
    assert "loop_even_add" in report["host_nodes"]  # the one-node then branch was rejected
    assert "sent back to the host: one node" in report["reasons"]["loop_even_add"]
    feeds = _feeds(loop_model())
    want = _onnxruntime(loop_model(), feeds)
    got = byoc.build(part).run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_no_fallback_checks_body_nodes_not_the_control_flow_node(backends):
    byoc.partition(byoc.load_onnx(loop_model()), backends=["reference"], no_fallback=True)
    backends("nomod", supports=lambda call: call.op != "Mod" or "no Mod")
    with pytest.raises(byoc.ModelError, match="loop_mod.*no Mod"):
        byoc.partition(byoc.load_onnx(loop_model()), backends=["nomod"], no_fallback=True)


# -- numbers ------------------------------------------------------------------------------------

BACKENDS = ["reference", "onnxruntime", "ccompiler", "openvino"]


def _silero(name: str):
    from tests.models import zoo

    entry = next(m for m in zoo.MODELS if m.name == name)
    try:
        entry.locate()
    except zoo.ModelUnavailable as exc:
        pytest.skip(str(exc))
    return entry.load(), entry.make_inputs(np.random.default_rng(0)), entry.rel_tol


def _check_numbers(name: str, model: onnx.ModelProto, feeds: dict, backend: str,
                   rel_tol: float) -> float:
    """Partition for ``backend``, run, compare with onnxruntime; return the body offload share.

    A mismatch on ccompiler is told apart from a partitioning bug: the same partition with every
    region run by the reference backend must match, and then the fault is the C backend's."""
    if find_backend(backend) is None:
        pytest.skip(f"backend {backend!r} is not available")
    mod = byoc.load_onnx(model)
    part = byoc.partition(mod, backends=[backend])
    share = offload_share(partition_report(part))
    print(f"\n{name} on {backend}: {share:.0%} of body nodes offloaded")
    want = _onnxruntime(model, feeds)
    got = byoc.build(part).run(feeds)
    bad = [n for n in want if got[n].shape != want[n].shape or not np.allclose(
        got[n], want[n], rtol=0, atol=rel_tol * max(1.0, float(np.abs(want[n]).max())))]
    if bad and backend == "ccompiler":
        ref = get_backend("reference").compile
        same = Executable(part, {n: ref(f) for n, f in part.functions.items() if n != "main"})
        again = same.run(feeds)
        for n in want:
            np.testing.assert_allclose(again[n], want[n], rtol=rel_tol, atol=1e-6, err_msg=n)
        pytest.xfail(f"ccompiler computes {bad[0]!r} wrong (shape {got[bad[0]].shape}, want "
                     f"{want[bad[0]].shape}); the partition is right (reference regions match)")
    assert not bad, bad
    return share


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [loop_model, scan_model], ids=["loop", "scan"])
def test_loop_and_scan_models_match_onnxruntime(make, backend):
    model = make()
    share = _check_numbers(model.graph.name, model, _feeds(model), backend, 1e-5)
    assert share > 0.5


# OpenVINO compiles each of silero's ~50 body regions: seconds, so slow.
@pytest.mark.parametrize("backend", [pytest.param(b, marks=[pytest.mark.slow] if b == "openvino"
                                                  else []) for b in BACKENDS])
@pytest.mark.parametrize("name", ["silero_vad_16k", "silero_vad_8k"])
def test_silero_nested_if_lstm_branches_match_onnxruntime(name, backend):
    model, feeds, rel_tol = _silero(name)
    share = _check_numbers(name, model, feeds, backend, rel_tol)
    assert share > 0.5


# -- capture and extract ------------------------------------------------------------------------


def test_capture_records_the_chosen_run_of_each_body():
    mod = byoc.load_onnx(loop_model())
    exe = byoc.build(mod)
    feeds = _feeds(loop_model())
    plain = exe.run(feeds)
    for k in (0, 3):
        run = exe.run(feeds, capture=["i", "row", "sum_in"], iteration=k)
        assert int(run.tensors["i"]) == k
        np.testing.assert_array_equal(run.tensors["row"], feeds["x"][k])
        np.testing.assert_array_equal(run.outputs["y"], plain["y"])
    with pytest.raises(byoc.InputError, match="run 9 of a body"):
        exe.run(feeds, capture=["row"], iteration=9)


def test_extract_writes_a_body_region_with_the_inputs_of_the_iteration_that_ran(tmp_path):
    mod = byoc.load_onnx(loop_model())
    feeds = _feeds(loop_model())
    names = [r["name"] for r in partition_report(byoc.partition(mod, backends=["reference"]))
             ["regions"]]
    k = next(i for i, n in enumerate(names) if "loop_body_loop_cond" in n)
    for iteration in (0, 2):
        case = extract(mod, "reference", str(tmp_path / f"it{iteration}"), feeds, region=k,
                       iteration=iteration)
        assert case.region.scope == ("loop", "body")
        _, inputs, outputs = load_case(case.out_dir)
        assert int(inputs["i"].reshape(())) == iteration
        np.testing.assert_array_equal(outputs["h"], np.tanh(
            feeds["x"][iteration] @ _weight(mod) + _bias(mod)).astype(np.float32))
        assert all(c.ok for c in repro(case.out_dir, "reference"))
    # The then branch runs on even iterations: its run 1 is iteration 2.
    k = next(i for i, n in enumerate(names) if "loop_if_then" in n)
    case = extract(mod, "reference", str(tmp_path / "then"), feeds, region=k, iteration=1)
    (h,) = load_case(case.out_dir)[1].values()
    np.testing.assert_allclose(h, np.tanh(feeds["x"][2] @ _weight(mod) + _bias(mod)), rtol=1e-5)
    with pytest.raises(byoc.InputError, match="does not run 4 time"):
        extract(mod, "reference", str(tmp_path / "none"), feeds, region=k, iteration=3)


def _weight(mod: IRModule) -> np.ndarray:
    return _body_constant(mod, "w")  # an initializer of main, read only in the body


def _bias(mod: IRModule) -> np.ndarray:
    return _body_constant(mod, "loop_bias")


def _body_constant(mod: IRModule, name: str) -> np.ndarray:
    body = next(c for c in _calls(mod.main) if c.op == "Loop").attrs["body"]
    return next(e.value for e in post_order(body.body) if getattr(e, "name", "") == name)


def test_cli_extract_takes_iteration(tmp_path):
    from byoc.cli import main

    path = tmp_path / "loop.onnx"
    onnx.save(loop_model(), str(path))
    out = tmp_path / "case"
    assert main(["extract", str(path), "--backend", "reference", "--region", "2",
                 "--iteration", "4", "-o", str(out)]) == 0
    _, inputs, _ = load_case(str(out))
    assert int(inputs["i"].reshape(())) == 4


# -- linear time --------------------------------------------------------------------------------


def many_ifs(n: int) -> onnx.ModelProto:
    """A chain of ``n`` If nodes, each branch a few nodes: 8 nodes per If, bodies included."""
    vi = helper.make_tensor_value_info
    nodes, prev = [], "x"
    for k in range(n):
        then_g = helper.make_graph(
            [helper.make_node("Relu", [prev], [f"t{k}a"], name=f"t{k}_relu"),
             helper.make_node("Mul", [f"t{k}a", prev], [f"t{k}b"], name=f"t{k}_mul"),
             helper.make_node("Abs", [f"t{k}b"], [f"t{k}"], name=f"t{k}_abs")],
            f"then{k}", [], [vi(f"t{k}", FLOAT, [4])])
        else_g = helper.make_graph(
            [helper.make_node("Neg", [prev], [f"e{k}a"], name=f"e{k}_neg"),
             helper.make_node("Add", [f"e{k}a", prev], [f"e{k}"], name=f"e{k}_add")],
            f"else{k}", [], [vi(f"e{k}", FLOAT, [4])])
        nodes += [helper.make_node("ReduceSum", [prev], [f"s{k}"], name=f"sum{k}", keepdims=0),
                  helper.make_node("Greater", [f"s{k}", "zero"], [f"c{k}"], name=f"pos{k}"),
                  helper.make_node("If", [f"c{k}"], [f"y{k}"], name=f"if{k}",
                                   then_branch=then_g, else_branch=else_g)]
        prev = f"y{k}"
    return make_model(nodes, [("x", FLOAT, [4])], [(prev, FLOAT, [4])],
                      [helper.make_tensor("zero", FLOAT, [], [0.0])])


def _partition_seconds(mod: IRModule) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        byoc.partition(mod, backends=["reference"])
        best = min(best, time.perf_counter() - start)
    return best


def test_partition_time_is_linear_in_nodes_bodies_included():
    small, big = byoc.load_onnx(many_ifs(100)), byoc.load_onnx(many_ifs(400))
    t_small, t_big = _partition_seconds(small), _partition_seconds(big)
    print(f"\npartition: 100 Ifs (800 nodes) {t_small * 1e3:.1f} ms, "
          f"400 Ifs (3200 nodes) {t_big * 1e3:.1f} ms, ratio {t_big / t_small:.1f} (linear: 4)")
    assert t_big / t_small < 8  # quadratic would be 16
    part = byoc.partition(big, backends=["reference"])
    # main, and per If: its condition's region (each If splits main) and one per branch.
    assert len(part.functions) == 1 + 3 * 400
    x = np.array([1.0, -2.0, 3.0, -0.5], np.float32)
    np.testing.assert_allclose(byoc.build(part).run({"x": x})[f"y{399}"],
                               byoc.build(big).run({"x": x})[f"y{399}"], rtol=1e-6)


@pytest.mark.slow
def test_partition_time_is_linear_at_scale():
    t_small = _partition_seconds(byoc.load_onnx(many_ifs(500)))
    t_big = _partition_seconds(byoc.load_onnx(many_ifs(4000)))
    print(f"\npartition: 500 Ifs {t_small:.2f} s, 4000 Ifs {t_big:.2f} s, "
          f"ratio {t_big / t_small:.1f} (linear: 8)")
    assert t_big / t_small < 16
