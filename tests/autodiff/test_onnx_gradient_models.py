"""ONNX's own gradient test cases, shipped in the onnx wheel: a model whose
ai.onnx.preview.training Gradient node differentiates the forward graph, with inputs and
expected outputs (forward value, then one gradient per ``xs``) as .pb files.

byoc.gradient on the forward part (the model without its Gradient node) must give the shipped
gradient outputs."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import byoc

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "simple")
CASES = sorted(glob.glob(os.path.join(DATA, "test_gradient_of_add*")))


def _tensors(folder: str, prefix: str) -> list[np.ndarray]:
    out = []
    for path in sorted(glob.glob(os.path.join(folder, f"{prefix}_*.pb")),
                       key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0])):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
    return out


def _forward_part(model: onnx.ModelProto) -> tuple[onnx.ModelProto, onnx.NodeProto]:
    """The model without its Gradient node, its only output the differentiated value y."""
    (grad,) = [n for n in model.graph.node if n.op_type == "Gradient"]
    attrs = {a.name: helper.get_attribute_value(a) for a in grad.attribute}
    y = attrs["y"].decode() if isinstance(attrs["y"], bytes) else attrs["y"]
    forward = onnx.ModelProto()
    forward.CopyFrom(model)
    g = forward.graph
    keep = [n for n in g.node if n.op_type != "Gradient"]
    del g.node[:]
    g.node.extend(keep)
    outputs = [o for o in g.output if o.name == y]
    del g.output[:]
    g.output.extend(outputs)
    del forward.opset_import[:]
    forward.opset_import.extend([o for o in model.opset_import if o.domain in ("", "ai.onnx")])
    return forward, grad


def test_the_wheel_ships_the_cases():
    assert [os.path.basename(c) for c in CASES] == ["test_gradient_of_add",
                                                    "test_gradient_of_add_and_mul"]


@pytest.mark.parametrize("case", CASES, ids=os.path.basename)
def test_byoc_gradient_gives_the_shipped_outputs(case):
    model = onnx.load(os.path.join(case, "model.onnx"))
    forward, grad = _forward_part(model)
    attrs = {a.name: helper.get_attribute_value(a) for a in grad.attribute}
    xs = [x.decode() for x in attrs["xs"]]
    y = attrs["y"].decode()
    inputs = dict(zip([i.name for i in model.graph.input], _tensors(f"{case}/test_data_set_0",
                                                                    "input")))
    expected = dict(zip([o.name for o in model.graph.output],
                        _tensors(f"{case}/test_data_set_0", "output")))
    mod = byoc.gradient(byoc.load_onnx(forward), loss=y, wrt=xs)
    got = byoc.build(mod).run(inputs)
    np.testing.assert_array_equal(got[y], expected[y])
    for x, name in zip(xs, grad.output):  # the Gradient node's outputs, in xs order
        np.testing.assert_array_equal(got[f"grad:{x}"], expected[name])
