"""Write the corpus of broken and hostile models into this folder (each file a few hundred bytes).

    python tests/bad_inputs/make_corpus.py

Each entry's name says what is wrong with it; test_bad_models.py says what byoc must answer.
Cases that need links or sparse files are made by the test itself, in a temporary folder.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT


def model(nodes, inputs=(("x", F, [2]),), outputs=(("y", F, [2]),), inits=(), opset=28, extra=()):
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(inits))
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", opset),
                                                                  *extra])


def huge(name: str) -> TensorProto:
    return numpy_helper.from_array(np.array([10**6, 10**6], np.int64), name)


def external(location: str) -> onnx.ModelProto:
    w = TensorProto(name="w", data_type=F, dims=[2])
    w.data_location = TensorProto.EXTERNAL
    for k, v in {"location": location, "offset": "0", "length": "8"}.items():
        e = w.external_data.add()
        e.key, e.value = k, v
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add_w")], inits=[w])


def corpus() -> dict[str, bytes]:
    good = model([helper.make_node("Relu", ["x"], ["y"], name="relu")]).SerializeToString()
    wrong_attr = helper.make_node("Flatten", ["x"], ["y"], name="flatten_bad_axis")
    wrong_attr.attribute.append(helper.make_attribute("axis", 1.5))
    no_data = TensorProto(name="big", data_type=F, dims=[10**6, 10**6])
    return {
        "truncated.onnx": good[: len(good) // 2],
        "random_bytes.onnx": np.random.default_rng(7).bytes(512),
        "no_graph.onnx": onnx.ModelProto(ir_version=10).SerializeToString(),
        "two_writers.onnx": model([helper.make_node("Relu", ["x"], ["y"], name="first_writer"),
                                   helper.make_node("Neg", ["x"], ["y"], name="second_writer")]),
        "cycle.onnx": model([helper.make_node("Relu", ["z"], ["y"], name="cycle_a"),
                             helper.make_node("Neg", ["y"], ["z"], name="cycle_b")]),
        "dangling_input.onnx": model([helper.make_node("Add", ["x", "ghost"], ["y"], name="reads_ghost")]),
        "unknown_op.onnx": model([helper.make_node("Teleport", ["x"], ["y"], name="teleporter",
                                                   domain="com.example")],
                                 extra=[helper.make_opsetid("com.example", 1)]),
        "wrong_attr_type.onnx": model([wrong_attr], outputs=(("y", F, None),)),
        "newer_opset.onnx": model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                  opset=onnx.defs.onnx_opset_version() + 1),
        "huge_initializer.onnx": model([helper.make_node("Add", ["x", "big"], ["y"], name="add_big")],
                                       inits=[no_data], outputs=(("y", F, None),)),
        "huge_constant_of_shape.onnx": model(
            [helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill_huge")],
            inputs=(), inits=[huge("shape")], outputs=(("y", F, None),)),
        "huge_reshape.onnx": model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_huge")],
                                   inits=[huge("shape")], outputs=(("y", F, None),)),
        "external_dotdot.onnx": external("../secret.bin"),
        "external_absolute.onnx": external("/etc/passwd"),
    }


def main() -> None:
    for name, content in corpus().items():
        data = content if isinstance(content, bytes) else content.SerializeToString()
        tmp = os.path.join(HERE, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(HERE, name))
    print(f"wrote {len(corpus())} files to {HERE}")


if __name__ == "__main__":
    main()
