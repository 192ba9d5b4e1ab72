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
