"""Extract a region as an ONNX test case, replay it, bisect a broken backend, export as ONNX."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest

import byoc
from byoc.backend import register_backend, unregister_backend
from byoc.cli import default_model_path
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.extract import bisect, extract, load_case, repro
from byoc.ir import Call, Function, rewrite


def broken_compile(func: Function):
    """The reference backend, except that its Relu leaks 1e-2 of negative inputs."""
    def swap(old, new):
        if isinstance(new, Call) and new.op == "Relu":
            return Call("LeakyRelu", new.args, {"alpha": 0.01}, new.type, new.span)
        return new

    (body,), _ = rewrite([func.body], swap)
    return byoc.get_backend("reference").compile(Function(func.params, body, func.attrs))


@pytest.fixture
def broken():
    yield register_backend("broken", supports=lambda call: True, compile=broken_compile)
    unregister_backend("broken")


@pytest.fixture
def model_and_inputs():
    mod = byoc.load_onnx(default_model_path())
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    return mod, {"image": x}


def _onnxruntime_replays(case_dir):
    model, inputs, outputs = load_case(case_dir)
    onnx.checker.check_model(model, full_check=True)
    got = run_onnxruntime(model, inputs)
    return all(c.ok for c in compare_outputs(got, outputs))


@pytest.mark.parametrize("how", [{"region": 0}, {"nodes": ("stage1.a/conv", "stage1/relu")},
                                 {"name_regex": r"^stage2\.(a|b)/"}])
def test_extract_writes_an_onnx_test_case_that_replays(tmp_path, model_and_inputs, how):
    mod, inputs = model_and_inputs
    case = extract(mod, "reference", str(tmp_path / "case"), inputs, **how)
    assert os.path.isfile(tmp_path / "case" / "model.onnx")
    assert "test_data_set_0/input_0.pb" in case.files and "README.md" in case.files
    assert all(c.ok for c in repro(str(tmp_path / "case"), "reference"))
    assert _onnxruntime_replays(str(tmp_path / "case"))
    readme = (tmp_path / "case" / "README.md").read_text()
    assert "byoc repro .                 # on reference" in readme
    assert all(c.ok for c in repro(str(tmp_path / "case")))  # the backend it records


def test_the_recorded_inputs_are_the_real_intermediate_tensors(tmp_path, model_and_inputs):
    mod, inputs = model_and_inputs
    extract(mod, "reference", str(tmp_path / "c"), inputs, nodes=("stage2.a/conv", "stage2.a/relu"))
    _, case_inputs, case_outputs = load_case(str(tmp_path / "c"))
    run = byoc.build(mod).run(inputs, capture="all")
    for name, value in {**case_inputs, **case_outputs}.items():
        np.testing.assert_array_equal(value, run.tensors[name])


def test_bisect_names_the_first_relu_that_goes_wrong(tmp_path, broken, model_and_inputs):
    mod, inputs = model_and_inputs
    result = bisect(mod, "broken", inputs, out_dir=str(tmp_path / "bad"))
    assert result.node == "stem/relu" and result.node_op == "Relu"
    assert not all(c.ok for c in repro(str(tmp_path / "bad"), "broken"))
    assert all(c.ok for c in repro(str(tmp_path / "bad"), "reference"))


def test_bisect_finds_nothing_on_a_correct_backend(model_and_inputs):
    mod, inputs = model_and_inputs
    result = bisect(mod, "reference", inputs)
    assert result.region is None and result.checked == 1


@pytest.mark.slow
def test_bisect_on_a_real_ocr_model(tmp_path, broken):
    from tests.models.zoo import MODELS, ModelUnavailable

    entry = next(m for m in MODELS if m.name == "ppocr_mobile_v2_cls")
    try:
        proto = entry.load()
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    mod = byoc.load_onnx(proto)
    inputs = entry.make_inputs(np.random.default_rng(0))
    result = bisect(mod, "broken", inputs)
    first_relu = next(n.name for n in proto.graph.node if n.op_type == "Relu")
    assert result.node == first_relu


def test_cli_extract_repro_and_partition_export(tmp_path):
    model = default_model_path()

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "byoc", *map(str, args)], capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)

    r = cli("extract", model, "--backend", "reference", "--region", "0", "-o", tmp_path / "case")
    assert r.returncode == 0, r.stderr
    r = cli("repro", tmp_path / "case", "--backend", "reference")
    assert r.returncode == 0 and "reproduces" in r.stdout, r.stdout + r.stderr
    r = cli("repro", tmp_path / "case")  # on the backend the case records
    assert r.returncode == 0 and "reproduces" in r.stdout, r.stdout + r.stderr
    case = onnx.load(tmp_path / "case" / "model.onnx")
    del case.metadata_props[:]
    onnx.save(case, tmp_path / "case" / "model.onnx")
    r = cli("repro", tmp_path / "case")
    assert r.returncode == 2 and "records no backend; pass --backend" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("extract", model, "--backend", "reference", "--region", "7", "-o", tmp_path / "x")
    assert r.returncode == 2 and "numbered 0 to 0" in r.stderr and not (tmp_path / "x").exists()
    r = cli("partition", model, "--backend", "reference", "-o", tmp_path / "part.onnx")
    assert r.returncode == 0, r.stderr
    exported = onnx.load(tmp_path / "part.onnx")
    onnx.checker.check_model(exported, full_check=True)
    assert [f.domain for f in exported.functions] == ["byoc.reference"]
    x = {"image": np.ones((1, 3, 32, 32), np.float32)}
    assert all(c.ok for c in compare_outputs(run_onnxruntime(exported, x), run_onnxruntime(model, x)))


def test_to_onnx_of_a_half_offloaded_module_runs_with_the_original_numbers():
    half = register_backend("half", supports={"Conv", "Relu"}, compile=byoc.get_backend("reference").compile)
    try:
        part = byoc.partition(byoc.load_onnx(default_model_path()), backends=[half])
        exported = byoc.to_onnx(part)
        onnx.checker.check_model(exported, full_check=True)
        assert len(exported.functions) > 3
        x = {"image": np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)}
        got, want = run_onnxruntime(exported, x), run_onnxruntime(default_model_path(), x)
        assert all(c.ok for c in compare_outputs(got, want))
        single = byoc.to_onnx(part[next(n for n in part.functions if n != "main")])
        onnx.checker.check_model(single, full_check=True)
    finally:
        unregister_backend("half")
