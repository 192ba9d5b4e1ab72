"""Profiles: time per node and region by ONNX name, copies per boundary, Chrome traces."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import byoc
from byoc.cli import default_model_path
from byoc.profile import format_profile, profile


def test_profile_of_a_host_run_names_every_onnx_node():
    mod = byoc.load_onnx(default_model_path())
    exe = byoc.build(mod)
    report = profile(exe, {"image": np.ones((1, 3, 32, 32), np.float32)}, repeat=3)
    names = {n["node"] for n in report["nodes"]}
    assert "stem/conv" in names and len(names) == 33
    assert all(n["where"] == "host" for n in report["nodes"])
    assert abs(sum(n["share"] for n in report["nodes"]) - 1) < 1e-9
    assert len(report["hot_spots"]) == 10
    text = format_profile(report)
    assert "hot spots" in text and "stem/conv" in text or "stage" in text


def test_profile_lets_each_runs_outputs_go():
    """Outputs held from run to run make each run's fresh memory: a kernel writing one was
    timed with its page faults (a 3 MB conv output read 1.6 ms where it runs in 0.4)."""
    exe = byoc.build(byoc.load_onnx(default_model_path()))
    runs = []
    run = exe.run

    def kept(*args, **kwargs):
        result = run(*args, **kwargs)
        runs.append(result)
        return result

    exe.run = kept
    profile(exe, {"image": np.ones((1, 3, 32, 32), np.float32)}, repeat=3)
    debug = [r for r in runs if hasattr(r, "times")]
    assert len(debug) == 3 and all(not r.outputs for r in debug)


def test_profile_without_a_repeat_runs_at_least_five_times_for_half_a_second(monkeypatch):
    """Five calls' medians swung 10-20% between profiles of a 5 ms model: with no repeat
    given, runs go on until MIN_SECONDS have passed, between MIN_RUNS and MAX_RUNS of them."""
    import byoc.profile as bp

    exe = byoc.build(byoc.load_onnx(default_model_path()))
    x = {"image": np.ones((1, 3, 32, 32), np.float32)}
    monkeypatch.setattr(bp, "MIN_SECONDS", 0.0)
    assert profile(exe, x)["repeat"] == bp.MIN_RUNS
    monkeypatch.setattr(bp, "MIN_SECONDS", 60.0)  # a model this small: the cap ends it
    assert profile(exe, x)["repeat"] == bp.MAX_RUNS
    assert profile(exe, x, repeat=2)["repeat"] == 2


def test_cli_profile_json_and_trace(tmp_path):
    trace = tmp_path / "trace.json"
    r = subprocess.run([sys.executable, "-m", "byoc", "run", "--backend", "onnxruntime", "--profile",
                        "--json", "--trace", str(trace)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    prof = json.loads(r.stdout)["profile"]
    assert prof["where"]["onnxruntime"]["nodes"] == 1
    assert {(c["from"], c["to"]) for c in prof["copies"]} == {("cpu", "onnxruntime"), ("onnxruntime", "cpu")}
    assert [c["bytes"] for c in prof["copies"] if c["from"] == "cpu"] == [1 * 3 * 32 * 32 * 4]
    events = json.loads(trace.read_text())["traceEvents"]
    assert events and all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


def test_native_and_ccompiler_regions_time_each_kernel_by_its_onnx_nodes(tmp_path):
    from byoc.backends.ccompiler.runtime import CompiledRegion

    from byoc.profile import write_chrome_trace

    mod = byoc.load_onnx(default_model_path())
    x = {"image": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    for backend, kernels in (("native", 14), ("ccompiler", 33)):  # 33 ONNX nodes
        exe = byoc.build(byoc.partition(mod, backends=[backend]))
        report = profile(exe, x, repeat=2)
        ks = report["kernels"]
        assert len(ks) == kernels and all(k["backend"] == backend for k in ks)
        held = {n for k in ks for n in k["nodes"]}
        assert {"stem/relu", "stage1/add", "head/fc"} <= held  # fused nodes named with their kernel
        assert {"stem/conv", "stem/bn"} <= held  # a conv and the BatchNormalization folded into it
        if backend == "native":  # one kernel: its name and nodes say so
            stem = [k for k in ks if "stem/conv" in k["nodes"]]
            assert [(k["kernel"], k["nodes"]) for k in stem] == [
                ("Conv+BatchNormalization+Relu", ["stem/conv", "stem/bn", "stem/relu"])]
        region = report["where"][backend]["time_s"]
        assert 0 < sum(k["time_s"] for k in ks) <= region
        assert "kernels inside native/ccompiler regions" in format_profile(report)
        write_chrome_trace(report, str(tmp_path / f"{backend}.json"))
        events = json.loads((tmp_path / f"{backend}.json").read_text())["traceEvents"]
        (outer,) = [e for e in events if e["cat"] == backend]
        inner = [e for e in events if e["cat"] == "kernel"]
        assert len(inner) == kernels  # one run's, nested in time inside their region's event
        assert all(outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]
                   for e in inner)
        # profiling done: the region runs its build without clock reads again
        (region_fn,) = exe.external.values()
        assert isinstance(region_fn, CompiledRegion) and not region_fn.profiling
        exe.run(x)
        assert not region_fn.kernel_log
        assert any("byoc_stamps" in g.source for g in region_fn.specializations)
        plain = [g for g in region_fn.specializations if "byoc_stamps" not in g.source]
        assert plain and all(g.stamps == -1 for g in plain)


# --- time inside If/Loop/Scan bodies ---------------------------------------------------------


def body_model():
    """Its work in bodies: a Loop of 6 trips, each a 64x64 MatMul and a Tanh, then an If whose
    taken branch does another MatMul; only the Loop, the If and their conditions in main."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(
        (np.random.default_rng(1).standard_normal((64, 64)) / 8).astype(np.float32), "w")
    trips = numpy_helper.from_array(np.array(6, np.int64), "trips")
    floor = numpy_helper.from_array(np.array(-1e9, np.float32), "floor")
    t = helper.make_tensor_value_info
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("MatMul", ["s_in", "w"], ["s_mm"], name="body_matmul"),
         helper.make_node("Tanh", ["s_mm"], ["s_out"], name="body_tanh")],
        "loop_body",
        [t("i", TensorProto.INT64, []), t("cond_in", TensorProto.BOOL, []),
         t("s_in", TensorProto.FLOAT, [64, 64])],
        [t("cond_out", TensorProto.BOOL, []), t("s_out", TensorProto.FLOAT, [64, 64])])
    then_branch = helper.make_graph(
        [helper.make_node("MatMul", ["s", "w"], ["then_mm"], name="then_matmul"),
         helper.make_node("Relu", ["then_mm"], ["then_out"], name="then_relu")],
        "then", [], [t("then_out", TensorProto.FLOAT, [64, 64])])
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["s"], ["else_out"], name="else_neg")],
        "else", [], [t("else_out", TensorProto.FLOAT, [64, 64])])
    graph = helper.make_graph(
        [helper.make_node("ReduceMax", ["x"], ["top"], name="top", keepdims=0),
         helper.make_node("Greater", ["top", "floor"], ["go"], name="go"),
         helper.make_node("Loop", ["trips", "go", "x"], ["s"], name="loop", body=loop_body),
         helper.make_node("If", ["go"], ["y"], name="branch", then_branch=then_branch,
                          else_branch=else_branch)],
        "bodies", [t("x", TensorProto.FLOAT, [64, 64])], [t("y", TensorProto.FLOAT, [64, 64])],
        [w, trips, floor])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def trace_self_times(events: list[dict]) -> dict[str, float]:
    """Seconds per category from a trace's own nesting: each event's duration less that of the
    events inside it (kernel events, inside their region's, left out)."""
    events = sorted((e for e in events if e["cat"] != "kernel"), key=lambda e: (e["ts"], -e["dur"]))
    own = [e["dur"] for e in events]
    stack: list[int] = []
    for k, e in enumerate(events):
        while stack and events[stack[-1]]["ts"] + events[stack[-1]]["dur"] <= e["ts"] + 1e-3:
            stack.pop()
        if stack:
            own[stack[-1]] -= e["dur"]
        stack.append(k)
    out: dict[str, float] = {}
    for e, t in zip(events, own):
        out[e["cat"]] = out.get(e["cat"], 0.0) + t * 1e-6
    return out


def test_time_in_bodies_counts_for_the_backend_that_ran_it_and_once(tmp_path):
    from byoc.placement import node_places, placement
    from byoc.profile import write_chrome_trace

    mod = byoc.load_onnx(body_model())
    exe = byoc.build(byoc.partition(mod, backends=["ccompiler"]))
    x = {"x": np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)}
    report = profile(exe, x, repeat=1)  # one run: the trace is the very run the table shows
    nodes = {n["node"]: n for n in report["nodes"]}
    body = [n for n in report["nodes"] if n.get("in") == "loop"]
    (region,) = body  # the Loop's body is one ccompiler region, called once per trip
    assert region["where"] == "ccompiler" and region["calls"] == 6 and region["time_s"] > 0
    taken = [n for n in report["nodes"] if n.get("in") == "branch"]
    assert [n["where"] for n in taken] == ["ccompiler"] and taken[0]["calls"] == 1
    # The Loop and the If count their own time; with their bodies they took more.
    for control in ("loop", "branch"):
        n = nodes[control]
        inner = sum(m["time_s"] for m in report["nodes"] if m.get("in") == control)
        assert n["where"] == "host"
        assert n["time_s"] == pytest.approx(n["with_bodies_s"] - inner, abs=1e-12)
    # Nothing counted twice: the nodes' own times add up to main's nodes' times, bodies included.
    main = sum(n.get("with_bodies_s", n["time_s"]) for n in report["nodes"] if "in" not in n)
    assert report["total_s"] == pytest.approx(main, rel=1e-9)
    assert sum(w["time_s"] for w in report["where"].values()) == pytest.approx(report["total_s"])
    # ccompiler ran three regions: the condition's in main, the Loop's body, the If's branch
    assert report["where"]["ccompiler"]["nodes"] == 3
    assert report["where"]["ccompiler"]["time_s"] > region["time_s"] + taken[0]["time_s"]
    assert all(h["node"] not in ("loop", "branch") or h["time_s"] == nodes[h["node"]]["time_s"]
               for h in report["hot_spots"])
    # The Chrome trace says the same: each category's own time, from its nesting alone.
    write_chrome_trace(report, str(tmp_path / "t.json"))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["cat"] for e in events if e["name"] == region["node"]} == {"ccompiler"}
    from_trace = trace_self_times(events)
    for where, row in report["where"].items():
        assert from_trace[where] == pytest.approx(row["time_s"], rel=1e-6, abs=1e-9)
    # The placement of byoc run splits a run's times the same way.
    times = exe.run(x, capture=[]).times
    rows = placement(exe.mod, times)
    assert rows["ccompiler"]["nodes"] == 8 and rows["host"]["nodes"] == 2  # the If, the Loop
    in_main = [name for name, (_, parent) in node_places(exe.mod).items() if parent is None]
    assert sorted(in_main) == sorted(["loop", "branch", region_of_condition(exe.mod)])
    assert sum(r["time_s"] for r in rows.values()) == pytest.approx(
        sum(times[n] for n in in_main))
    assert rows["ccompiler"]["time_s"] > times["loop"] - rows["host"]["time_s"]


def region_of_condition(mod) -> str:
    (name,) = [n for n in mod.functions if n.startswith("ccompiler_top")]
    return name


def test_cli_run_profile_splits_body_time_by_backend(tmp_path):
    import onnx

    path = tmp_path / "bodies.onnx"
    onnx.save(body_model(), str(path))
    r = subprocess.run([sys.executable, "-m", "byoc", "run", str(path), "--backend", "ccompiler",
                        "--profile", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    prof, rows = result["profile"], result["placement"]
    assert prof["where"]["ccompiler"]["time_s"] > 0 and rows["ccompiler"]["time_s"] > 0
    assert rows["ccompiler"]["nodes"] == 8 and prof["where"]["ccompiler"]["nodes"] == 3
    assert sum(r["time_s"] for r in rows.values()) == pytest.approx(result["steady_state_s"])
