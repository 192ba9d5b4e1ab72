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


def sparse(dims: list[int], index: int) -> onnx.ModelProto:
    values = numpy_helper.from_array(np.array([1.0], np.float32), "sv")
    indices = numpy_helper.from_array(np.array([index], np.int64), "si")
    m = model([helper.make_node("Add", ["x", "sv"], ["y"], name="add_sparse")],
              outputs=(("y", F, None),))
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, dims))
    return m


def recursive_function() -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", 28), helper.make_opsetid("local", 1)]
    rec = helper.make_function("local", "Rec", ["a"], ["b"],
                               [helper.make_node("Rec", ["a"], ["b"], domain="local")], opsets)
    m = model([helper.make_node("Rec", ["x"], ["y"], name="recurse", domain="local")],
              extra=[opsets[1]])
    m.functions.append(rec)
    return m


def not_utf8() -> bytes:
    """A node name whose bytes are not UTF-8 (protobuf keeps them; Python sees bytes)."""
    good = model([helper.make_node("Relu", ["x"], ["y"], name="NODENAME")]).SerializeToString()
    return good.replace(b"NODENAME", b"\xff\xfe\x80\xc0\xafABC")  # as long: lengths hold


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
        "huge_input.onnx": model([helper.make_node("ReduceSum", ["x"], ["y"], name="sum",
                                                   keepdims=0)],
                                 inputs=(("x", F, [10**5, 10**5, 100]),), outputs=(("y", F, []),)),
        "sparse_huge.onnx": sparse([10**6, 10**6], 0),
        "sparse_out_of_range.onnx": sparse([2], 99),
        "negative_dim.onnx": model([helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
                                   inits=[TensorProto(name="w", data_type=F, dims=[-1, 2])],
                                   outputs=(("y", F, None),)),
        "zero_group_conv.onnx": model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv_group_0", group=0)],
            inputs=(("x", F, [1, 2, 4, 4]),), outputs=(("y", F, None),),
            inits=[numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")]),
        # 6 input channels against weights that take 2: kernels would read the weights past
        # their end (ONNX's shape inference does not check it)
        "conv_channels.onnx": model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv_6_for_2")],
            inputs=(("x", F, [1, 6, 8, 8]),), outputs=(("y", F, None),),
            inits=[numpy_helper.from_array(np.ones((8, 2, 3, 3), np.float32), "w")]),
        # inner dims that differ, and per-channel scales of another length: let through by
        # ONNX's shape inference (it takes them as given)
        "matmul_inner.onnx": model(
            [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul_5_by_4")],
            inputs=(("x", F, [2, 5]),), outputs=(("y", F, None),),
            inits=[numpy_helper.from_array(np.ones((4, 3), np.float32), "w")]),
        "gemm_inner.onnx": model(
            [helper.make_node("Gemm", ["x", "w"], ["y"], name="gemm_5_by_4", transB=1)],
            inputs=(("x", F, [2, 5]),), outputs=(("y", F, None),),
            inits=[numpy_helper.from_array(np.ones((3, 4), np.float32), "w")]),
        "batchnorm_scale.onnx": model(
            [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                              name="bn_3_for_4")],
            inputs=(("x", F, [1, 4, 2, 2]),), outputs=(("y", F, None),),
            inits=[numpy_helper.from_array(np.ones(n, np.float32), name)
                   for name, n in (("s", 3), ("b", 4), ("m", 4), ("v", 4))]),
        "recursive_function.onnx": recursive_function(),
        "not_utf8.onnx": not_utf8(),
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
