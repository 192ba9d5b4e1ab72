"""Write byoc/data/tiny_resnet.onnx, the model `byoc run` uses when given none.

A small ResNet for 3x32x32 images (stem, two residual stages, global pool, classifier) with
seeded He-initialised weights and real BatchNormalization statistics, so it exercises the ops
real CNNs use (Conv, BatchNormalization, Relu, Add, MaxPool, GlobalAveragePool, Flatten, Gemm,
Softmax) in a few hundred kB.

    python tools/make_default_model.py
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(2024)
nodes: list[onnx.NodeProto] = []
inits: list[onnx.TensorProto] = []


def weight(name: str, shape: tuple[int, ...], fan_in: int) -> str:
    inits.append(numpy_helper.from_array(
        (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), name))
    return name


def conv_bn(x: str, name: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
    w = weight(f"{name}.weight", (cout, cin, k, k), cin * k * k)
    nodes.append(helper.make_node("Conv", [x, w], [f"{name}.conv"], name=f"{name}/conv",
                                  kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
    for p, v in {"scale": rng.uniform(0.5, 1.5, cout), "bias": rng.normal(0, 0.1, cout),
                 "mean": rng.normal(0, 0.1, cout), "var": rng.uniform(0.5, 1.5, cout)}.items():
        inits.append(numpy_helper.from_array(v.astype(np.float32), f"{name}.bn.{p}"))
    out = f"{name}.bn"
    nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv"] + [
        f"{name}.bn.{p}" for p in ("scale", "bias", "mean", "var")], [out], name=f"{name}/bn",
        epsilon=1e-5))
    if relu:
        nodes.append(helper.make_node("Relu", [out], [f"{name}.relu"], name=f"{name}/relu"))
        out = f"{name}.relu"
    return out


def block(x: str, name: str, cin: int, cout: int, stride: int) -> str:
    y = conv_bn(x, f"{name}.a", cin, cout, 3, stride)
    y = conv_bn(y, f"{name}.b", cout, cout, 3, relu=False)
    skip = x if stride == 1 and cin == cout else conv_bn(x, f"{name}.down", cin, cout, 1, stride, relu=False)
    nodes.append(helper.make_node("Add", [y, skip], [f"{name}.add"], name=f"{name}/add"))
    nodes.append(helper.make_node("Relu", [f"{name}.add"], [f"{name}.out"], name=f"{name}/relu"))
    return f"{name}.out"


x = conv_bn("image", "stem", 3, 16, 3)
nodes.append(helper.make_node("MaxPool", [x], ["stem.pool"], name="stem/pool", kernel_shape=[2, 2],
                              strides=[2, 2]))
x = block("stem.pool", "stage1", 16, 16, 1)
x = block(x, "stage2", 16, 32, 2)
x = block(x, "stage3", 32, 64, 2)
nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="head/pool"))
nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="head/flatten"))
w = weight("fc.weight", (10, 64), 64)
inits.append(numpy_helper.from_array(np.zeros(10, np.float32), "fc.bias"))
nodes.append(helper.make_node("Gemm", ["flat", w, "fc.bias"], ["logits"], name="head/fc", transB=1))
nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], name="head/softmax", axis=1))

graph = helper.make_graph(
    nodes, "tiny_resnet",
    [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
    [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                          producer_name="byoc tools/make_default_model.py")
onnx.checker.check_model(model, full_check=True)
out = os.path.join(os.path.dirname(__file__), "..", "byoc", "data", "tiny_resnet.onnx")
tmp = out + ".tmp"
onnx.save(model, tmp)
os.replace(tmp, out)
print(f"wrote {os.path.normpath(out)} ({os.path.getsize(out) // 1024} kB, {len(nodes)} nodes)")
