"""Shared helpers for byoc's tests: small ONNX models built with onnx.helper."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from byoc.compare import compare_outputs, run_onnxruntime


def make_model(nodes, inputs, outputs, initializers=(), opset: int = 28, **kw) -> onnx.ModelProto:
    """A model from nodes and (name, elem_type, shape) input/output triples."""
    def vi(spec):
        if isinstance(spec, onnx.ValueInfoProto):
            return spec
        name, et, shape = spec
        return helper.make_tensor_value_info(name, et, shape)

    graph = helper.make_graph(nodes, kw.pop("name", "test"), [vi(i) for i in inputs],
                              [vi(o) for o in outputs], list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in kw.pop("extra_opsets", {}).items()]
    return helper.make_model(graph, opset_imports=opsets, ir_version=kw.pop("ir_version", 10))


def assert_matches_onnxruntime(model: onnx.ModelProto, inputs: dict, rtol: float | None = None):
    """Run the model with byoc and onnxruntime and compare every output."""
    import byoc

    got = byoc.build(byoc.load_onnx(model)).run(inputs)
    want = run_onnxruntime(model, inputs)
    bad = [c for c in compare_outputs(got, want, rtol) if not c.ok]
    assert not bad, bad
    return got


def chain_model(batch: int | str = 1) -> onnx.ModelProto:
    """x -> Conv -> Relu -> Softmax -> Sigmoid -> y, with real weights (``batch`` may be a name)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=1),
             helper.make_node("Sigmoid", ["s"], ["y"], name="sigmoid")]
    return make_model(nodes, [("x", FLOAT, [batch, 3, 8, 8])], [("y", FLOAT, [batch, 4, 8, 8])],
                      [w])


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def backends():
    """``backends(name, supports, **options)`` registers a test backend (the reference backend's
    compile, ``tests/passes/util.make_backend``) for one test."""
    from byoc.backend import unregister_backend
    from tests.passes.util import make_backend

    made: list[str] = []

    def make(name: str, supports, **options):
        made.append(name)
        return make_backend(name, supports, **options)

    yield make
    for name in made:
        unregister_backend(name)


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
BOOL = TensorProto.BOOL
