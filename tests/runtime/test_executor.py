"""The host executor: input checks before anything runs, errors that name the node, freeing."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import byoc
from byoc.errors import InputError, KernelError
from byoc.runtime.plan import CALL
from tests.conftest import FLOAT, INT64, make_model


def _model():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "m"], ["y"], name="add")]
    return make_model(nodes, [("x", FLOAT, ["n", 3]), ("w", FLOAT, [3, "k"])], [("y", FLOAT, ["n", "k"])])


@pytest.fixture
def exe():
    return byoc.build(byoc.load_onnx(_model()))


def test_runs_and_names_outputs(exe):
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    out = exe.run({"x": x, "w": w})
    assert list(out) == ["y"] and out["y"].shape == (2, 4)
    np.testing.assert_array_equal(out["y"], np.full((2, 4), 6.0, np.float32))


@pytest.mark.parametrize("inputs, message", [
    ({"x": np.ones((2, 3), np.float32), "w": np.ones((3, 4), np.float32), "z": 1}, "unknown input 'z'"),
    ({"x": np.ones((2, 3), np.float32)}, "missing input 'w'"),
    ({"x": np.ones((2, 3), np.float64), "w": np.ones((3, 4), np.float32)}, "must be float32, got float64"),
    ({"x": np.ones((2, 3, 1), np.float32), "w": np.ones((3, 4), np.float32)}, "must have rank 2"),
    ({"x": np.ones((2, 5), np.float32), "w": np.ones((3, 4), np.float32)}, "got (2, 5) (dim 1)"),
])
def test_bad_inputs_are_refused_before_running(exe, inputs, message):
    with pytest.raises(InputError) as info:
        exe.run(inputs)
    assert message in str(info.value)


def test_a_symbolic_dim_must_agree_across_inputs():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    model = make_model(nodes, [("a", FLOAT, ["n"]), ("b", FLOAT, ["n"])], [("y", FLOAT, ["n"])])
    exe = byoc.build(byoc.load_onnx(model))
    with pytest.raises(InputError, match="dim 'n' is 3 in 'a'"):
        exe.run({"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})


def test_a_failing_kernel_names_its_node_and_op():
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="bad_reshape")]
    model = make_model(nodes, [("x", FLOAT, [6]), ("shape", INT64, [2])], [("y", FLOAT, None)])
    exe = byoc.build(byoc.load_onnx(model))
    with pytest.raises(KernelError, match="node 'bad_reshape' \\(Reshape\\)"):
        exe.run({"x": np.ones(6, np.float32), "shape": np.array([4, 4], np.int64)})


def test_intermediates_are_freed_after_their_last_use(exe):
    plan = exe.main_plan
    calls = [i for i in plan.instrs if i.kind == CALL]
    names = [i.call.span.name for i in calls]
    assert names == ["mm", "relu", "add"]
    m_slot = calls[0].out
    # m is read by relu and add: freed after add, not before.
    assert m_slot not in calls[1].free and m_slot in calls[2].free
    assert plan.output_slots[0] not in sum((i.free for i in plan.instrs), ())


def test_nan_and_inf_propagate():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", FLOAT, [3])], [("y", FLOAT, [3])])
    out = byoc.build(byoc.load_onnx(model)).run({"x": np.array([np.nan, np.inf, -np.inf], np.float32)})
    assert np.isnan(out["y"][0]) and out["y"][1] == np.inf and out["y"][2] == 0


@pytest.mark.parametrize("backends", [None, ["native"]])
def test_division_by_zero_gives_inf_without_a_warning(backends):
    """On the host, numpy's kernels run under np.errstate; a model in one native region skips
    it (numpy computes nothing there) and is as quiet."""
    import warnings

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Div", ["r", "z"], ["y"], name="div")]
    model = make_model(nodes, [("x", FLOAT, [3]), ("z", FLOAT, [3])], [("y", FLOAT, [3])])
    mod = byoc.load_onnx(model)
    exe = byoc.build(byoc.partition(mod, backends=backends) if backends else mod)
    feeds = {"x": np.array([1, 0, -1], np.float32), "z": np.zeros(3, np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):  # the second run takes the compiled plan
            out = exe.run(feeds)["y"]
    assert out[0] == np.inf and np.isnan(out[1]) and np.isnan(out[2])


def test_capture_all_gives_every_value_by_onnx_name_equal_to_onnxruntime():
    import onnx

    from byoc.cli import default_model_path
    from byoc.compare import compare_output, run_onnxruntime

    model = onnx.load(default_model_path())
    exe = byoc.build(byoc.load_onnx(model))
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    first = exe.run({"image": x1}, capture="all")
    values = [o for n in model.graph.node for o in n.output]
    inits = {t.name for t in model.graph.initializer}
    assert set(first) == set(values) | {"image"} | inits  # initializers are values too
    assert set(first.times) == {n.name for n in model.graph.node}
    snapshot = {k: v.copy() for k, v in first.tensors.items()}
    # A second run must not change what the first captured (no buffer reuse behind its back).
    exe.run({"image": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}, capture="all")
    for k, v in first.tensors.items():
        np.testing.assert_array_equal(v, snapshot[k])
    # Every captured intermediate equals onnxruntime's value of it.
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(v) for v in values)
    want = run_onnxruntime(model, {"image": x1})
    bad = [c for c in (compare_output(k, first.tensors[k], w) for k, w in want.items()) if not c.ok]
    assert not bad, bad


def test_capture_by_name_and_unknown_names(exe):
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    r = exe.run({"x": x, "w": w}, capture=["r"])
    assert list(r.tensors) == ["r"] and r.outputs["y"].shape == (2, 4)
    with pytest.raises(InputError, match="no value named 'nope'"):
        exe.run({"x": x, "w": w}, capture=["nope"])


@pytest.mark.parametrize("backends", [[], ["reference"], ["ccompiler"], ["native"], ["onnxruntime"],
                                      ["openvino"]])
def test_an_executable_is_freed_when_its_last_reference_goes(backends):
    """No reference cycle keeps an executable (and its engines' memory) alive until a full
    collection: a tune builds hundreds of them, and with the cycle its RSS grew to 24 GB."""
    import gc
    import weakref

    if backends == ["openvino"]:
        pytest.importorskip("openvino")
    mod = byoc.load_onnx(_model())
    part = byoc.partition(mod, backends=backends) if backends else mod
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        exe = byoc.build(part)
        exe.run({"x": x, "w": w})
        gone = [weakref.ref(exe), *(weakref.ref(r) for r in exe.external.values())]
        del exe
        assert all(r() is None for r in gone)
    finally:
        if enabled:
            gc.enable()
