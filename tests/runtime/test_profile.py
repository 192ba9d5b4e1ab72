"""Profiles: time per node and region by ONNX name, copies per boundary, Chrome traces."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

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
