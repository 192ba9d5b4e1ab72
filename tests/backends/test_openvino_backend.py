"""The openvino backend: OpenVINO's own answers on support, regions compiled per input shapes at
fp32 with the build's threads and the latency hint, ov.Tensor as a device with counted copies,
int64 kept exact, the debugging tools, and the one line a user without OpenVINO reads."""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import openvino as ov
import pytest
from byoc.backends.openvino import answers, engine, region, support
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.backend import register_backend, unregister_backend
from byoc.cli.common import default_model_path
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.ir import Call, post_order
from byoc.runtime.threads import building
from tests.conftest import FLOAT, INT64, chain_model, make_model


def _matches(model, feeds, got):
    bad = [c for c in compare_outputs(got, run_onnxruntime(model, feeds)) if not c.ok]
    assert not bad, bad


@pytest.fixture
def fresh_verdicts(monkeypatch):
    """Support verdicts asked anew: none in memory, none on disk."""
    saved = dict(support._verdicts)
    support._verdicts.clear()
    monkeypatch.setattr(answers, "_loaded", {"verdicts": {}, "held": {}})
    monkeypatch.setattr(answers, "save", lambda verdicts, held: None)
    yield
    support._verdicts.clear()
    support._verdicts.update(saved)


@pytest.fixture
def ov_b():
    """A second backend on OpenVINO's device, taking Relu only."""
    base = byoc.get_backend("openvino")
    yield register_backend("ov_b", supports={"Relu"}, compile=base.compile, device=base.device)
    unregister_backend("ov_b")


# -- support: OpenVINO's answers ------------------------------------------------------------


def test_declines_with_openvinos_own_reasons(fresh_verdicts):
    x = byoc.op.var("x", (3, 3), "float32")
    assert support.openvino_runs(byoc.op.Relu(x)) is True
    det = support.openvino_runs(byoc.op.Det(x))
    assert det.startswith("openvino: ") and "Det" in det  # the ONNX frontend has no rule for it
    d = byoc.op.var("d", (3,), "float64")
    assert support.openvino_runs(byoc.op.Relu(d)) == (
        "openvino: the CPU plugin computes float64 as float32")
    s = byoc.op.var("s", (3,), "object")
    assert support.openvino_runs(byoc.op.Identity(s)).startswith(
        "openvino: cannot hold string tensors")
    axes = byoc.op.var("axes", (1,), "int64")  # a rank known only at run time
    verdict = support.openvino_runs(byoc.op.Unsqueeze(x, axes))
    assert verdict.startswith("openvino: the CPU plugin does not run Unsqueeze")


def test_dtypes_are_probed_from_the_plugins_runtime_precision():
    assert support.held("float32") == support.Held(True, None)
    assert support.held("int64") == support.Held(True, (-2**31, 2**31 - 1))
    assert support.held("float64").verdict == "openvino: the CPU plugin computes float64 as float32"
    assert support.held("bool").verdict is True


def _calls():
    x = byoc.op.var("x", (2, 8), "float32")
    img = byoc.op.var("img", (1, 3, 8, 8), "float32")
    w = byoc.op.const(np.ones((4, 3, 3, 3), np.float32))
    axes = byoc.op.var("axes", (1,), "int64")
    return [byoc.op.Relu(x), byoc.op.Unsqueeze(x, axes), byoc.op.Sigmoid(x),
            byoc.op.Det(byoc.op.var("m", (3, 3), "float32")),
            byoc.op.Conv(img, w, pads=[1, 1, 1, 1]), byoc.op.Softmax(x, axis=1),
            byoc.op.Reshape(x, byoc.op.const(np.array([4, 4]))), byoc.op.Tanh(x)]


def test_a_batch_answers_as_asking_one_node_at_a_time(fresh_verdicts):
    calls = _calls()
    alone = []
    for call in calls:
        support._verdicts.clear()
        alone.append(support.openvino_runs(call))
    support._verdicts.clear()
    support.prefetch(calls)  # one model: a node it cannot take must not sink the others
    assert [support.openvino_runs(c) for c in calls] == alone
    assert alone.count(True) == 6


def test_a_model_is_asked_in_one_query_and_never_again(fresh_verdicts, monkeypatch):
    asked = []
    real = engine.read_partially
    monkeypatch.setattr(engine, "read_partially", lambda b: asked.append(b) or real(b))
    mod = byoc.load_onnx(default_model_path())
    byoc.partition(mod, backends=["openvino"], no_fallback=True)
    assert len(asked) == 1
    byoc.partition(mod, backends=["openvino"], no_fallback=True)
    assert len(asked) == 1


def test_answers_are_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path))
    answers._path.cache_clear()
    saved = dict(support._verdicts)
    try:
        support._verdicts.clear()
        monkeypatch.setattr(answers, "_loaded", None)
        mod = byoc.load_onnx(default_model_path())
        first = byoc.partition(mod, backends=["openvino"])
        (kept,) = (tmp_path / "openvino").glob("answers-*.json")
        assert len(json.loads(kept.read_text())["verdicts"]) >= 8
        support._verdicts.clear()  # as a new process starts: nothing in memory
        monkeypatch.setattr(answers, "_loaded", None)
        asked = []
        monkeypatch.setattr(engine, "read_partially", lambda b: asked.append(b))
        again = byoc.partition(mod, backends=["openvino"])
        assert not asked and list(again.functions) == list(first.functions)
    finally:
        support._verdicts.clear()
        support._verdicts.update(saved)
        answers._path.cache_clear()


def test_explain_names_the_float64_node_and_why():
    nodes = [helper.make_node("Cast", ["x"], ["d"], name="to_double", to=TensorProto.DOUBLE),
             helper.make_node("Sqrt", ["d"], ["r"], name="root"),
             helper.make_node("Cast", ["r"], ["y"], name="to_float", to=TensorProto.FLOAT)]
    model = make_model(nodes, [("x", FLOAT, [4])], [("y", FLOAT, [4])])
    part = byoc.partition(byoc.load_onnx(model), backends=["openvino"])
    assert byoc.explain(part)["root"] == "openvino: the CPU plugin computes float64 as float32"
    x = np.array([2, 3, 5, 7], np.float32)
    _matches(model, {"x": x}, byoc.build(part).run({"x": x}))


# -- compiling and running ------------------------------------------------------------------


def _region(model):
    part = byoc.partition(byoc.load_onnx(model), backends=["openvino"], no_fallback=True)
    (name,) = [n for n in part.functions if n != "main"]
    return part[name]


def test_compiled_for_the_cpu_at_fp32_with_the_builds_threads_and_the_latency_hint():
    func = _region(chain_model())
    with building(2):
        compiled = region.compile_region(func)
    x = np.ones((1, 3, 8, 8), np.float32)
    compiled(engine.to_device(x))
    (variant,) = compiled.variants.values()
    model = variant.compiled
    assert model.get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32
    assert model.get_property("INFERENCE_NUM_THREADS") == 2
    assert str(model.get_property("PERFORMANCE_HINT")) == "LATENCY"
    assert model.get_property("EXECUTION_DEVICES") == ["CPU"]
    held = {op.get_rt_info()["runtimePrecision"].astype(str)
            for op in model.get_runtime_model().get_ordered_ops()}
    assert "f32" in held and not held & {"bf16", "f16"}, held


def test_one_compiled_model_per_input_shapes_then_one_for_any(monkeypatch):
    model = chain_model(batch="n")
    func = _region(model)
    monkeypatch.setattr(region, "MAX_STATIC_SHAPES", 2)
    compiled = region.compile_region(func)
    rng = np.random.default_rng(0)
    for batch in (1, 2, 1, 3, 4, 3):
        x = rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)
        (y,) = compiled(engine.to_device(x))
        _matches(model, {"x": x}, {"y": engine.to_host(y)})
    v = compiled.variants
    assert len(v) == 4 and len({id(c) for c in v.values()}) == 3
    assert v[((3, 3, 8, 8),)] is v[((4, 3, 8, 8),)] is compiled.dynamic
    assert v[((1, 3, 8, 8),)].compiled.inputs[0].get_partial_shape().is_static
    assert not compiled.dynamic.compiled.inputs[0].get_partial_shape().is_static


def test_outputs_are_fresh_tensors_a_later_call_leaves_alone():
    compiled = region.compile_region(_region(chain_model()))
    first = engine.to_host(compiled(engine.to_device(np.ones((1, 3, 8, 8), np.float32)))[0])
    kept = first.copy()
    compiled(engine.to_device(np.full((1, 3, 8, 8), -3.0, np.float32)))
    np.testing.assert_array_equal(first, kept)


def test_outputs_that_are_constants_come_back_filled():
    """The plugin keeps its own tensor for an output that is a constant: copied, not garbage."""
    const = numpy_helper.from_array(np.arange(4, dtype=np.float32), "k")
    nodes = [helper.make_node("Identity", ["k"], ["c"], name="const_out"),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    model = make_model(nodes, [("x", FLOAT, [4])], [("y", FLOAT, [4]), ("c", FLOAT, [4])],
                       [const])
    x = np.ones(4, np.float32)
    _matches(model, {"x": x}, byoc.build(byoc.partition(byoc.load_onnx(model),
                                                        backends=["openvino"])).run({"x": x}))


def test_int64_beyond_int32_runs_on_the_host_exactly():
    nodes = [helper.make_node("Add", ["x", "one"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "x"], ["y"], name="mul")]
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    model = make_model(nodes, [("x", INT64, [2])], [("y", INT64, [2])], [one])
    part = byoc.partition(byoc.load_onnx(model), backends=["openvino"], no_fallback=True)
    exe = byoc.build(part)
    small = np.array([3, -40000], np.int64)  # fits int32, and so does every result
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(exe.run({"x": small})["y"], (small + 1) * small)
    big = np.array([2**40, 5], np.int64)
    with pytest.warns(RuntimeWarning, match="beyond the range OpenVINO's CPU plugin"):
        np.testing.assert_array_equal(exe.run({"x": big})["y"], (big + 1) * big)


# -- the device ------------------------------------------------------------------------------


def test_regions_on_openvino_pass_tensors_to_each_other_without_the_host(ov_b):
    model = chain_model()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["ov_b", "openvino"]))
    assert len(exe.mod.functions) == 4  # conv (openvino), relu (ov_b), softmax+sigmoid (openvino)
    copies = [e for e in post_order(exe.mod.main.body) if isinstance(e, Call) and e.op == "device_copy"]
    assert [(c.attrs["src_device"], c.attrs["dst_device"]) for c in copies] == [
        ("cpu", "openvino"), ("openvino", "cpu")]
    _matches(model, {"x": x}, exe.run({"x": x}))
    assert exe.copy_stats.copies == {("cpu", "openvino"): 1, ("openvino", "cpu"): 1}
    assert exe.copy_stats.bytes == {("cpu", "openvino"): x.nbytes, ("openvino", "cpu"): 4 * 4 * 8 * 8}


def test_a_host_op_between_openvino_regions_gets_copies_both_ways():
    model = chain_model()
    base = byoc.get_backend("openvino")
    sub = register_backend("ov_nosoftmax", supports=lambda c: c.op != "Softmax" and base.check(c),
                           compile=base.compile, device=base.device)
    try:
        exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=[sub]))
        x = np.ones((1, 3, 8, 8), np.float32)
        _matches(model, {"x": x}, exe.run({"x": x}))
        assert exe.copy_stats.copies == {("cpu", "openvino"): 2, ("openvino", "cpu"): 2}
    finally:
        unregister_backend("ov_nosoftmax")


# -- whole models, the CLI, the debugging tools ----------------------------------------------


@pytest.mark.parametrize("backends", [["openvino"], ["openvino", "native"]], ids=",".join)
def test_committed_models_fully_offloaded_match_onnxruntime(backends):
    from tests.models.zoo import MODELS

    for entry in [m for m in MODELS if m.name in ("bert_tiny", "gpt2_tiny", "lstm_bidir")]:
        proto = entry.load()
        feeds = entry.make_inputs(np.random.default_rng(0))
        part = byoc.partition(byoc.load_onnx(proto), backends=backends, no_fallback=True)
        assert {f.attrs["Compiler"] for n, f in part.functions.items() if n != "main"} == {"openvino"}
        got = byoc.build(part).run(feeds)
        bad = [c for c in compare_outputs(got, run_onnxruntime(proto, feeds)) if not c.ok]
        assert not bad, (entry.name, bad)


def test_cli_run_reports_openvino_and_matches(capsys):
    from byoc.cli import main

    assert main(["run", "--backend", "openvino", "--json", "--compare", "onnxruntime"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] and result["placement"]["openvino"]["nodes"] == 33
    assert result["placement"]["host"]["nodes"] == 0


def test_without_openvino_one_line_says_how_to_install(monkeypatch, capsys):
    from byoc.cli import main

    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino: ImportError
    unregister_backend("openvino")
    try:
        assert main(["run", "--backend", "openvino"]) == 2
    finally:
        unregister_backend("openvino")  # found again, with OpenVINO, when next asked for
    assert capsys.readouterr().err.strip().splitlines() == [
        "byoc: error: backend 'openvino' needs OpenVINO, which is not installed: "
        "pip install 'byoc[openvino]'"]


def test_extract_repro_and_bisect_run_on_openvino(tmp_path):
    from byoc.extract import bisect, extract, repro

    mod = byoc.load_onnx(default_model_path())
    feeds = {"image": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    case = extract(mod, "openvino", str(tmp_path / "case"), feeds, region=0)
    assert all(c.ok for c in repro(case.out_dir, "openvino"))
    result = bisect(mod, "openvino", feeds)
    assert result.region is None and result.checked == 1
