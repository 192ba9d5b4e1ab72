"""capture answers every ONNX value name; a backend's errors and broken results are named as
its own."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.backend import register_backend, unregister_backend
from byoc.errors import InputError, RegionError
from tests.bad_inputs.test_bad_models import run_cli


def _model() -> onnx.ModelProto:
    """Constant nodes, initializers, Identity of an input, of a constant and of a computed
    value, and a graph output that is an Identity."""
    k = helper.make_tensor("k_value", TensorProto.FLOAT, [1], [2.0])
    nodes = [
        helper.make_node("Constant", [], ["k"], value=k, name="const_k"),
        helper.make_node("Identity", ["x"], ["x_alias"], name="id_x"),
        helper.make_node("Identity", ["w"], ["w_alias"], name="id_w"),
        helper.make_node("Add", ["x_alias", "w_alias"], ["sum"], name="add"),
        helper.make_node("Mul", ["sum", "k"], ["scaled"], name="mul"),
        helper.make_node("Relu", ["scaled"], ["relu"], name="relu"),
        helper.make_node("Identity", ["relu"], ["y"], name="id_y"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
        [numpy_helper.from_array(np.array([1, -2, 3], np.float32), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


X = {"x": np.array([[1, 2, 3], [-4, 5, -6]], np.float32)}


def test_capture_all_answers_every_onnx_value_name():
    model = _model()
    run = byoc.build(byoc.load_onnx(model)).run(X, capture="all")
    names = {o for n in model.graph.node for o in n.output} | {"x", "w"}
    assert set(run) == names
    np.testing.assert_array_equal(run["k"], [2.0])
    np.testing.assert_array_equal(run["w_alias"], run["w"])  # Identity outputs: run, recorded
    np.testing.assert_array_equal(run["x_alias"], X["x"])
    np.testing.assert_array_equal(run["y"], np.maximum((X["x"] + run["w"]) * 2, 0))
    assert "y" in run and len(run) == len(names) and sorted(run.keys()) == sorted(names)
    assert run.outputs["y"].shape == (2, 3) and "relu" in run.times
    with pytest.raises(TypeError):
        run["y"] = np.zeros(3)  # type: ignore[index]
    with pytest.raises(ValueError):  # a constant is lent read-only, never copied
        run["w"][0] = 5


def test_capture_by_name_refuses_unknown_and_region_inner_names():
    mod = byoc.load_onnx(_model())
    exe = byoc.build(mod)
    assert set(exe.run(X, capture=["k", "sum"])) == {"k", "sum"}
    with pytest.raises(InputError, match="no value named 'nope'"):
        exe.run(X, capture=["sum", "nope"])
    part = byoc.partition(mod, backends=["onnxruntime"])
    run = byoc.build(part).run(X, capture="all")
    assert {"x", "y"} <= set(run)  # a region's inputs and outputs, device values included
    with pytest.raises(InputError, match="'scaled' is inside region"):
        byoc.build(part).run(X, capture=["scaled"])


def test_every_region_input_and_output_is_captured():
    from byoc.cli import default_model_path
    from byoc.extract import regions

    path = default_model_path()
    mod = byoc.load_onnx(path)
    x = {"image": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    register_backend("convs", supports={"Conv", "Relu"},
                     compile=byoc.get_backend("reference").compile)
    try:
        for backends in (["convs"], ["onnxruntime"]):
            part = byoc.partition(mod, backends=backends)
            run = byoc.build(part).run(x, capture="all")
            host = byoc.build(mod).run(x, capture="all")
            for region in regions(part):
                for name in region.input_names + region.output_names:
                    np.testing.assert_allclose(run[name], host[name], rtol=1e-4, atol=1e-5)
    finally:
        unregister_backend("convs")


# -- a backend's errors ---------------------------------------------------------------------------


def _register(name, compile):
    return register_backend(name, supports={"Add", "Mul", "Relu", "Identity"}, compile=compile)


@pytest.fixture
def backend():
    names = []

    def make(compile):
        name = f"bad{len(names)}"
        names.append(name)
        _register(name, compile)
        return name

    yield make
    for n in names:
        unregister_backend(n)


def _part(name):
    return byoc.partition(byoc.load_onnx(_model()), backends=[name])


def test_a_compile_error_names_backend_region_and_nodes(backend):
    def compile(func):
        raise ValueError("my codegen cannot do Mul")

    name = backend(compile)
    with pytest.raises(RegionError) as info:
        byoc.build(_part(name))
    text = str(info.value)
    assert text.startswith(f"backend '{name}', region '{name}_") and "(nodes 'id_x'..'id_y')" \
        in text and text.endswith("ValueError: my codegen cannot do Mul")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        exe = byoc.build(_part(name), fallback="host")
    assert len(exe.fallbacks) == 1 and "my codegen cannot do Mul" in next(iter(exe.fallbacks.values()))
    np.testing.assert_array_equal(exe.run(X)["y"], byoc.build(byoc.load_onnx(_model())).run(X)["y"])


@pytest.mark.parametrize("result, says", [
    (lambda *a: np.zeros((2, 3), np.float32), "returned a ndarray, not a tuple of 1 array(s)"),
    (lambda *a: (np.zeros((2, 3), np.float32),) * 2, "returned 2 value(s); the region has 1"),
    (lambda *a: (np.zeros((2, 3), np.float64),), "output 0 is float64, the region declares float32"),
    (lambda *a: (np.zeros((3, 3), np.float32),), "output 0 has shape (3, 3), the region declares (n=2, 3)"),
    (lambda *a: 1 / 0, "ZeroDivisionError: division by zero"),
])
def test_broken_results_are_named(backend, result, says):
    name = backend(lambda func: result)
    with pytest.raises(RegionError, match=None) as info:
        byoc.build(_part(name)).run(X)
    assert says in str(info.value) and f"backend '{name}', region" in str(info.value)


def test_the_cli_says_the_backend_s_error_in_one_line(tmp_path, monkeypatch):
    """Through an entry point, as a user's backend is found: never 'internal error'."""
    onnx.save(_model(), tmp_path / "m.onnx")
    (tmp_path / "badbackend.py").write_text(
        "from byoc import register_backend\n"
        "def compile(func):\n    raise ValueError('no Mul here')\n"
        "def register():\n"
        "    return register_backend('badbe', supports={'Add','Mul','Relu','Identity'}, "
        "compile=compile)\n")
    (tmp_path / "sitecustomize.py").write_text(
        "import importlib.metadata as md\n"
        "_real = md.entry_points\n"
        "def entry_points(**kw):\n"
        "    eps = _real(**kw)\n"
        "    if kw.get('group') == 'byoc.backends':\n"
        "        return md.EntryPoints(list(eps) + [md.EntryPoint('badbe', 'badbackend:register', "
        "'byoc.backends')])\n"
        "    return eps\n"
        "md.entry_points = entry_points\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    r = run_cli("run", "m.onnx", "--backend", "badbe", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "internal error" not in r.stderr
    assert "backend 'badbe', region 'badbe_" in r.stderr and "ValueError: no Mul here" in r.stderr
    r = run_cli("run", "m.onnx", "--backend", "badbe", "--fallback", "host", cwd=tmp_path)
    assert r.returncode == 0 and "runs on the host" in r.stderr, r.stderr
