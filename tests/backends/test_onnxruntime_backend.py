"""The onnxruntime backend, device planning, copy counting, and the placement summary."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import byoc
from byoc.backend import register_backend, unregister_backend
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.ir import Call, post_order
from tests.conftest import chain_model


@pytest.fixture
def ort_b():
    """A second backend on onnxruntime's device, taking Relu only."""
    base = byoc.get_backend("onnxruntime")
    yield register_backend("ort_b", supports={"Relu"}, compile=base.compile, device=base.device)
    unregister_backend("ort_b")


def test_onnxruntime_backend_declines_with_onnxruntimes_reason():
    from byoc.backends.onnxruntime import onnxruntime_runs

    x = byoc.op.var("x", (2, 3), "float32")
    assert onnxruntime_runs(byoc.op.Relu(x)) is True
    s = byoc.op.var("s", (2,), "object")
    verdict = onnxruntime_runs(byoc.op.Relu(s))
    assert isinstance(verdict, str) and verdict.startswith("onnxruntime: ")


def test_regions_on_one_device_pass_tensors_without_the_host(ort_b):
    model = chain_model()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    part = byoc.partition(byoc.load_onnx(model), backends=["ort_b", "onnxruntime"])
    exe = byoc.build(part)
    copies = [e for e in post_order(exe.mod.main.body) if isinstance(e, Call) and e.op == "device_copy"]
    # conv (onnxruntime) -> relu (ort_b) -> softmax+sigmoid (onnxruntime): one copy in, one out.
    assert [(c.attrs["src_device"], c.attrs["dst_device"]) for c in copies] == [
        ("cpu", "onnxruntime"), ("onnxruntime", "cpu")]
    out = exe.run({"x": x})
    assert all(c.ok for c in compare_outputs(out, run_onnxruntime(model, {"x": x})))
    assert exe.copy_stats.copies == {("cpu", "onnxruntime"): 1, ("onnxruntime", "cpu"): 1}
    assert exe.copy_stats.bytes == {("cpu", "onnxruntime"): x.nbytes, ("onnxruntime", "cpu"): 4 * 4 * 8 * 8}


def test_a_host_op_between_regions_gets_copies_both_ways():
    model = chain_model()
    sub = register_backend("ort_nosoftmax", supports={"Conv", "Relu", "Sigmoid"},
                           compile=byoc.get_backend("onnxruntime").compile, device="onnxruntime")
    try:
        exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=[sub]))
        x = np.ones((1, 3, 8, 8), np.float32)
        out = exe.run({"x": x})
        assert all(c.ok for c in compare_outputs(out, run_onnxruntime(model, {"x": x})))
        assert exe.copy_stats.copies == {("cpu", "onnxruntime"): 2, ("onnxruntime", "cpu"): 2}
    finally:
        unregister_backend("ort_nosoftmax")


def test_every_light_model_fully_offloaded_to_onnxruntime_matches():
    from tests.models.zoo import light_models

    for entry in light_models():
        if entry.slow:
            continue
        proto = entry.load()
        feeds = entry.make_inputs(np.random.default_rng(0))
        part = byoc.partition(byoc.load_onnx(proto), backends=["onnxruntime"], no_fallback=True)
        got = byoc.build(part).run(feeds)
        bad = [c for c in compare_outputs(got, run_onnxruntime(proto, feeds)) if not c.ok]
        assert not bad, (entry.name, bad)


def test_cli_run_reports_where_nodes_and_time_went():
    r = subprocess.run([sys.executable, "-m", "byoc", "run", "--backend", "onnxruntime", "--json",
                        "--compare", "onnxruntime"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and result["placement"]["onnxruntime"]["nodes"] == 33
    assert result["placement"]["host"]["nodes"] == 0
    assert 0 < result["placement"]["onnxruntime"]["time_share"] <= 1


def test_no_fallback_lists_the_nodes_no_backend_took_and_why():
    only_conv = register_backend("only_conv", supports={"Conv"},
                                 compile=byoc.get_backend("onnxruntime").compile)
    try:
        with pytest.raises(byoc.ModelError, match="no_fallback") as info:
            byoc.partition(byoc.load_onnx(chain_model()), backends=[only_conv], no_fallback=True)
        assert "relu" in str(info.value) and "Relu" in str(info.value)
    finally:
        unregister_backend("only_conv")
