"""The toy accelerator of examples/: found through its entry point, it partitions and runs real
models, alone and beside ccompiler."""

from __future__ import annotations

import importlib.metadata
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from onnx import helper, numpy_helper

import byoc
from byoc.backend import ENTRY_POINT_GROUP, unregister_backend
from byoc.compare import compare_outputs, run_onnxruntime
from tests.models.zoo import MODELS

TOY = Path(__file__).parents[2] / "examples" / "toy_accelerator"


@pytest.fixture
def toy(monkeypatch):
    """The toy package importable and its entry point listed, as `pip install` would make it."""
    monkeypatch.syspath_prepend(str(TOY))
    point = importlib.metadata.EntryPoint("toy", "toy_accelerator:register", ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points

    def entry_points(**params):
        if params.get("group") == ENTRY_POINT_GROUP:
            return importlib.metadata.EntryPoints([point])
        return real(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    unregister_backend("toy")
    yield
    unregister_backend("toy")
    sys.modules.pop("toy_accelerator", None)


def test_pyproject_declares_the_entry_point():
    project = tomllib.loads((TOY / "pyproject.toml").read_text())["project"]
    assert project["entry-points"][ENTRY_POINT_GROUP] == {"toy": "toy_accelerator:register"}


def test_backend_code_is_small():
    code = [ln for ln in (TOY / "toy_accelerator" / "__init__.py").read_text().splitlines()
            if ln.strip() and not ln.strip().startswith("#")]
    assert len(code) <= 40


def _assert_matches(got, want, rtol):
    bad = [c for c in compare_outputs(got, want, rtol) if not c.ok]
    assert not bad, bad


def _regions(part, compiler):
    return [f for name, f in part.functions.items()
            if name != "main" and f.attrs.get("Compiler") == compiler]


@pytest.mark.parametrize("name", ["gru", "bert_tiny"])
def test_toy_runs_a_real_model(toy, name):
    model = next(m for m in MODELS if m.name == name)
    proto = model.load()
    feeds = model.make_inputs(np.random.default_rng(0))
    assert byoc.get_backend("toy").name == "toy"  # loaded through the entry point
    part = byoc.partition(byoc.load_onnx(proto), backends=["toy"])
    assert _regions(part, "toy")
    _assert_matches(byoc.build(part).run(feeds), run_onnxruntime(proto, feeds), model.rel_tol)


def test_toy_beside_ccompiler(toy):
    """toy takes the MatMul and Add, ccompiler the Softmax and LayerNormalization after them."""
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("Softmax", ["a"], ["s"], name="softmax"),
             helper.make_node("LayerNormalization", ["s", "g"], ["y"], name="ln")]
    inits = [numpy_helper.from_array(v, k) for k, v in {"w": w, "b": b, "g": b}.items()]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [3, 8])],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)], ir_version=10)
    part = byoc.partition(byoc.load_onnx(proto), backends=["toy", "ccompiler"])
    assert _regions(part, "toy") and _regions(part, "ccompiler")
    feeds = {"x": rng.standard_normal((3, 8)).astype(np.float32)}
    _assert_matches(byoc.build(part).run(feeds), run_onnxruntime(proto, feeds), 1e-5)
