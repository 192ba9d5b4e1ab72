"""The byoc command: the main job on the embedded model, and one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper

from tests.conftest import FLOAT, make_model


def byoc_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "byoc", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_run_with_no_model_runs_the_embedded_one_and_matches_onnxruntime():
    r = byoc_cli("run", "--compare", "onnxruntime", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] is True
    out = result["outputs"]["probabilities"]
    assert out["shape"] == [1, 10] and out["dtype"] == "float32" and out["rel_err"] <= 1e-4
    assert set(result) == {"ok", "outputs", "first_call_s", "steady_state_s",
                           "steady_state_calls", "threads", "made_up_inputs"}
    assert result["made_up_inputs"] == ["image"]


def test_bare_byoc_does_the_main_job():
    r = byoc_cli()
    assert r.returncode == 0, r.stderr
    assert "tiny_resnet.onnx" in r.stdout


def test_info_lists_opset_ops_and_io(tmp_path):
    r = byoc_cli("info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["opset"] == 28 and info["ops"]["Conv"] == 9 and info["nodes"] == 33
    assert info["inputs"] == {"image": "Tensor[(batch, 3, 32, 32), float32]"}


def test_run_with_inputs_and_dims(tmp_path):
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = byoc_cli("run", "--input", f"image={tmp_path / 'x.npy'}", "--compare", "onnxruntime", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["outputs"]["probabilities"]["shape"] == [3, 10]
    r = byoc_cli("run", "--dim", "batch=2", "--json")
    assert json.loads(r.stdout)["outputs"]["probabilities"]["shape"] == [2, 10]


def test_bench_reports_both_and_the_ratio():
    r = byoc_cli("bench", "--repeat", "3", "--warmup", "1", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["byoc_median_s"] > 0 and result["onnxruntime_median_s"] > 0
    assert abs(result["ratio"] - result["byoc_median_s"] / result["onnxruntime_median_s"]) < 1e-12


def test_bench_waits_for_the_other_engines_threads_before_each_turn(monkeypatch, capsys):
    """onnxruntime's threads spin on ~45 ms after its run: byoc's next run at 2 threads found a
    core taken (squeezenet timed 2.7x onnxruntime instead of 1.2x). Each engine's turn starts
    with ``settle``."""
    from byoc.cli import main
    from byoc.runtime import threads

    turns: list[str] = []
    monkeypatch.setattr(threads, "settle", lambda *a, **k: turns.append("settle"))
    assert main(["bench", "--repeat", "3", "--warmup", "1", "--threads", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"] == 2
    assert turns == ["settle"] * 6  # 3 rounds, two engines each


def _one_line_exit_2(r, *needles):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    _one_line_exit_2(byoc_cli("run", tmp_path / "missing.onnx"), "no such file")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01garbage" * 10)
    _one_line_exit_2(byoc_cli("info", junk), "not an ONNX model")
    model = make_model([helper.make_node("Zap", ["x"], ["y"], name="zapper", domain="acme")],
                       [("x", FLOAT, [2])], [("y", FLOAT, [2])], extra_opsets={"acme": 1})
    onnx.save(model, tmp_path / "unknown.onnx")
    _one_line_exit_2(byoc_cli("run", tmp_path / "unknown.onnx"), "zapper", "Zap", "unknown op")
    np.save(tmp_path / "wrong.npy", np.ones((1, 3, 16, 16), np.float32))
    _one_line_exit_2(byoc_cli("run", "--input", f"image={tmp_path / 'wrong.npy'}"),
                     "image", "(batch, 3, 32, 32)")
