"""Importing ONNX: spans, constants, types, opset upgrades, subgraphs, and broken models."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.errors import ModelError
from byoc.ir import Call, Constant, TensorType, post_order
from tests.conftest import BOOL, FLOAT, INT64, assert_matches_onnxruntime, make_model


def test_spans_are_onnx_node_names_and_generated_names_are_stable():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Neg", ["b"], ["c"]),
             helper.make_node("Abs", ["c"], ["y"], name="first")]  # a duplicate name
    model = make_model(nodes, [("x", FLOAT, [2])], [("y", FLOAT, [2])])
    names = [[e.span.name for e in post_order(byoc.load_onnx(model).main.body) if isinstance(e, Call)]
             for _ in range(2)]
    assert names[0] == names[1]
    assert names[0] == ["first_1", "Neg_0", "Neg_1", "first_2"]
    assert len(set(names[0])) == 4


def test_initializers_and_constant_nodes_are_constants_and_symbolic_dims_are_kept():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    nodes = [helper.make_node("Constant", [], ["b"], value_floats=[1.0, 2.0, 3.0]),
             helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["y"], name="add")]
    model = make_model(nodes, [("x", FLOAT, ["batch", 2])], [("y", FLOAT, ["batch", 3])], [w])
    mod = byoc.load_onnx(model)
    assert [p.name for p in mod.main.params] == ["x"]
    consts = [e for e in post_order(mod.main.body) if isinstance(e, Constant)]
    assert sorted(c.name for c in consts) == ["b", "w"]
    assert mod.main.body.type == TensorType(("batch", 3), "float32")
    assert mod.main.body.span.name == "add" and mod.main.body.span.outputs == ("y",)
    x = np.ones((5, 2), np.float32)
    assert_matches_onnxruntime(model, {"x": x})


def test_older_opsets_are_upgraded_to_the_canonical_one():
    nodes = [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0])]  # axes as attr: opset < 13
    model = make_model(nodes, [("x", FLOAT, [3])], [("y", FLOAT, [1, 3])], opset=11)
    mod = byoc.load_onnx(model)
    assert mod.attrs["opset_imports"][""] == byoc.op.CANONICAL_OPSET
    unsq = mod.main.body
    assert isinstance(unsq.args[1], Constant) and unsq.args[1].value.tolist() == [0]
    assert_matches_onnxruntime(model, {"x": np.arange(3, dtype=np.float32)})


def _if_model(opset=28):
    # then: y = relu(x) * w_then (a weight inside the branch); else: y = x - outer
    w_then = numpy_helper.from_array(np.full(3, 2.0, np.float32), "w_then")
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                                helper.make_node("Mul", ["r", "w_then"], ["t_out"])],
                               "then", [], [helper.make_tensor_value_info("t_out", FLOAT, [3])],
                               [w_then])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "outer"], ["e_out"])],
                               "else", [], [helper.make_tensor_value_info("e_out", FLOAT, [3])])
    nodes = [helper.make_node("Neg", ["x"], ["outer"], name="neg"),
             helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g,
                              else_branch=else_g)]
    return make_model(nodes, [("x", FLOAT, [3]), ("cond", BOOL, [])], [("y", FLOAT, [3])], opset=opset)


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_with_captured_values_and_branch_weights(cond):
    model = _if_model()
    mod = byoc.load_onnx(model)
    call = mod.main.body
    assert call.op == "If"
    then_f = call.attrs["then_branch"]
    assert then_f.attrs["captures"] == len(call.args) - 1 == 2  # x and outer
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    assert_matches_onnxruntime(model, {"x": x, "cond": np.array(cond)})


def test_loop_running_sum_matches_onnxruntime():
    # carried: total; scan output: total after each step; reads outer 'step' value.
    body = helper.make_graph(
        [helper.make_node("Add", ["total_in", "step"], ["total_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["total_out"], ["scan_out"])],
        "body",
        [helper.make_tensor_value_info("i", INT64, []), helper.make_tensor_value_info("cond_in", BOOL, []),
         helper.make_tensor_value_info("total_in", FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", BOOL, []),
         helper.make_tensor_value_info("total_out", FLOAT, [2]),
         helper.make_tensor_value_info("scan_out", FLOAT, [2])])
    nodes = [helper.make_node("Loop", ["n", "", "init"], ["final", "history"], body=body, name="loop")]
    model = make_model(nodes, [("n", INT64, []), ("init", FLOAT, [2]), ("step", FLOAT, [2])],
                       [("final", FLOAT, [2]), ("history", FLOAT, [None, 2])])
    got = assert_matches_onnxruntime(model, {"n": np.array(4, np.int64), "init": np.zeros(2, np.float32),
                                             "step": np.array([1.0, 0.5], np.float32)})
    assert got["history"].shape == (4, 2)


def test_scan_cumulative_sum_matches_onnxruntime():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["row_out"])],
        "body", [helper.make_tensor_value_info("acc_in", FLOAT, [3]),
                 helper.make_tensor_value_info("row", FLOAT, [3])],
        [helper.make_tensor_value_info("acc_out", FLOAT, [3]),
         helper.make_tensor_value_info("row_out", FLOAT, [3])])
    nodes = [helper.make_node("Scan", ["init", "xs"], ["acc", "ys"], body=body, num_scan_inputs=1)]
    model = make_model(nodes, [("init", FLOAT, [3]), ("xs", FLOAT, [4, 3])],
                       [("acc", FLOAT, [3]), ("ys", FLOAT, [4, 3])])
    rng = np.random.default_rng(1)
    assert_matches_onnxruntime(model, {"init": np.zeros(3, np.float32),
                                       "xs": rng.standard_normal((4, 3)).astype(np.float32)})


def test_com_microsoft_ops_run_through_onnxruntime():
    nodes = [helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft", name="gelu")]
    model = make_model(nodes, [("x", FLOAT, [4, 5])], [("y", FLOAT, [4, 5])],
                       extra_opsets={"com.microsoft": 1})
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x})


def test_unsorted_nodes_are_sorted():
    nodes = [helper.make_node("Neg", ["a"], ["y"], name="second"),
             helper.make_node("Relu", ["x"], ["a"], name="first")]
    model = make_model(nodes, [("x", FLOAT, [2])], [("y", FLOAT, [2])])
    assert_matches_onnxruntime(model, {"x": np.array([-1.0, 2.0], np.float32)})


@pytest.mark.parametrize("nodes, message", [
    ([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")],
     "node 'b' (Neg): writes tensor 'y', which node 'a' writes too"),
    ([helper.make_node("Relu", ["nowhere"], ["y"], name="r")],
     "node 'r' (Relu): reads tensor 'nowhere', which no node, input or initializer provides"),
    ([helper.make_node("Relu", ["z"], ["y"], name="p"), helper.make_node("Neg", ["y"], ["z"], name="q")],
     "cycle"),
    ([helper.make_node("Frobnicate", ["x"], ["y"], name="f", domain="acme")],
     "node 'f' (Frobnicate): unknown op 'Frobnicate' in domain 'acme'"),
    ([helper.make_node("Relu", ["x"], ["y"], name="r", alpha=1.0)],
     "node 'r' (Relu): unknown attribute 'alpha'"),
    ([helper.make_node("Flatten", ["x"], ["y"], name="fl", axis=1.5)],
     "node 'fl' (Flatten): attribute 'axis' is FLOAT, the op wants INT"),
])
def test_broken_graphs_are_refused_naming_the_node(nodes, message):
    model = make_model(nodes, [("x", FLOAT, [2])], [("y", FLOAT, [2])])
    model.opset_import.append(helper.make_opsetid("acme", 1))
    with pytest.raises(ModelError) as info:
        byoc.load_onnx(model)
    assert message in str(info.value)


def test_not_onnx_and_missing_files(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        byoc.load_onnx(tmp_path / "nope.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(os.urandom(64) + b"\xff\xff\xff")
    with pytest.raises(ModelError, match="not an ONNX model"):
        byoc.load_onnx(junk)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(onnx.ModelProto(ir_version=8).SerializeToString())
    with pytest.raises(ModelError, match="no graph"):
        byoc.load_onnx(empty)


def test_newer_opset_is_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", FLOAT, [2])],
                       [("y", FLOAT, [2])], opset=byoc.op.CANONICAL_OPSET + 1)
    with pytest.raises(ModelError, match="newer than"):
        byoc.load_onnx(model)


def _external_model(tmp_path, location: str) -> str:
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", FLOAT, [4])],
                       [("y", FLOAT, [4])], [w])
    model_dir = tmp_path / "model"
    model_dir.mkdir(exist_ok=True)
    path = model_dir / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    if location != "weights.bin":
        m = onnx.load(path, load_external_data=False)
        for entry in m.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = location
        onnx.save(m, path)
    return str(path)


def test_external_data_inside_the_folder_loads(tmp_path):
    path = _external_model(tmp_path, "weights.bin")
    out = byoc.build(byoc.load_onnx(path)).run({"x": np.zeros(4, np.float32)})
    assert out["y"].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_external_data_outside_the_folder_is_refused(tmp_path, kind):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    if kind == "dotdot":
        path = _external_model(tmp_path, "../secret.bin")
    elif kind == "absolute":
        path = _external_model(tmp_path, str(secret))
    else:
        path = _external_model(tmp_path, "link.bin")
        os.symlink(secret, tmp_path / "model" / "link.bin")
    with pytest.raises(ModelError, match="tensor 'w'.*(absolute|outside)"):
        byoc.load_onnx(path)


def test_a_modelproto_given_is_not_modified():
    model = _if_model()
    before = model.SerializeToString()
    byoc.load_onnx(model)
    assert model.SerializeToString() == before


def test_model_local_functions_are_inlined():
    fn = helper.make_function("acme.fn", "Swish", ["X"], ["Y"],
                              [helper.make_node("Sigmoid", ["X"], ["S"]), helper.make_node("Mul", ["X", "S"], ["Y"])],
                              [helper.make_opsetid("", 28)])
    model = make_model([helper.make_node("Swish", ["x"], ["y"], domain="acme.fn", name="swish")],
                       [("x", FLOAT, [5])], [("y", FLOAT, [5])], extra_opsets={"acme.fn": 1})
    model.functions.append(fn)
    mod = byoc.load_onnx(model)
    assert sorted(e.op for e in post_order(mod.main.body) if isinstance(e, Call)) == ["Mul", "Sigmoid"]
    assert_matches_onnxruntime(model, {"x": np.linspace(-3, 3, 5).astype(np.float32)})


def test_a_2gb_external_data_model_loads_without_copying(tmp_path):
    """600M floats (2.4 GB) of external data in a sparse file: memory-mapped, not read."""
    n = 600_000_000
    big = TensorProto(name="big", data_type=TensorProto.FLOAT, dims=[n])
    big.data_location = TensorProto.EXTERNAL
    for k, v in {"location": "big.bin", "offset": "0", "length": str(4 * n)}.items():
        entry = big.external_data.add()
        entry.key, entry.value = k, v
    idx = numpy_helper.from_array(np.array([0, n - 1], np.int64), "idx")
    model = make_model([helper.make_node("Gather", ["big", "idx"], ["y"], name="pick")], [],
                       [("y", FLOAT, [2])], [big, idx])
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(4 * n)  # sparse: no disk used, reads as zeros
    onnx.save(model, tmp_path / "m.onnx")
    mod = byoc.load_onnx(tmp_path / "m.onnx")
    const = next(e for e in post_order(mod.main.body) if isinstance(e, Constant) and e.name == "big")
    assert isinstance(const.value, np.memmap) and const.value.shape == (n,)
    assert byoc.build(mod).run({})["y"].tolist() == [0.0, 0.0]


def test_external_data_whose_length_does_not_fit_its_shape_is_refused(tmp_path):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1000])
    t.data_location = TensorProto.EXTERNAL
    for k, v in {"location": "w.bin", "offset": "0", "length": "16"}.items():
        entry = t.external_data.add()
        entry.key, entry.value = k, v
    (tmp_path / "w.bin").write_bytes(b"\0" * 16)
    model = make_model([helper.make_node("Relu", ["w"], ["y"])], [], [("y", FLOAT, [1000])], [t])
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(ModelError, match="needs 4000 bytes, its external data has 16"):
        byoc.load_onnx(tmp_path / "m.onnx")


def _external_shape_constant(tmp_path) -> str:
    """Reshape by a shape held in a Constant node whose tensor is external data."""
    shape = TensorProto(name="s", data_type=TensorProto.INT64, dims=[2])
    shape.data_location = TensorProto.EXTERNAL
    for k, v in {"location": "s.bin", "offset": "0", "length": "16"}.items():
        entry = shape.external_data.add()
        entry.key, entry.value = k, v
    (tmp_path / "s.bin").write_bytes(np.array([3, 2], np.int64).tobytes())
    nodes = [helper.make_node("Constant", [], ["shape"], value=shape, name="shape"),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    model = make_model(nodes, [("x", FLOAT, [6])], [("y", FLOAT, None)])
    onnx.save(model, tmp_path / "m.onnx")
    return str(tmp_path / "m.onnx")


def test_an_external_constant_is_read_before_shape_inference(tmp_path):
    mod = byoc.load_onnx(_external_shape_constant(tmp_path))
    reshape = next(e for e in post_order(mod.main.body) if isinstance(e, Call) and e.op == "Reshape")
    assert reshape.type == TensorType((3, 2), "float32")  # inference saw the shape's value
    out = byoc.build(mod).run({"x": np.arange(6, dtype=np.float32)})["y"]
    assert out.tolist() == [[0, 1], [2, 3], [4, 5]]


def test_an_external_constant_in_a_modelproto_needs_its_path(tmp_path):
    model = onnx.load(_external_shape_constant(tmp_path), load_external_data=False)
    before = model.SerializeToString()
    with pytest.raises(ModelError, match="tensor 's' uses external data, which needs the model"):
        byoc.load_onnx(model)
    assert model.SerializeToString() == before


def test_an_external_location_spelled_as_an_overlong_varint_is_still_checked(tmp_path):
    """A hostile file may write data_location=EXTERNAL as 0x70 0x81 0x00 (a two-byte 1), which
    protobuf parses as EXTERNAL but a search for 0x70 0x01 in the file would miss."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.array([3, 2], np.int64).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    model = onnx.load(_external_shape_constant(tmp_path), load_external_data=False)
    tensor = model.graph.node[0].attribute[0].t
    tensor.name = "s_"  # one byte to give back, so that every enclosing length still holds
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = "../secret.bin"
    data = model.SerializeToString()
    assert data.count(b"p\x01") == 1 and data.count(b"B\x02s_") == 1
    data = data.replace(b"B\x02s_", b"B\x01s").replace(b"p\x01", b"p\x81\x00")
    assert b"p\x01" not in data
    reread = onnx.ModelProto.FromString(data)
    assert reread.graph.node[0].attribute[0].t.data_location == TensorProto.EXTERNAL
    (folder / "m.onnx").write_bytes(data)
    with pytest.raises(ModelError, match="tensor 's': external data location '../secret.bin' "
                                         "points outside"):
        byoc.load_onnx(folder / "m.onnx")


def test_maybe_external_misses_no_external_tensor(tmp_path):
    """The byte test that spares the walk over every node is never wrong when it says no."""
    from byoc.frontends.onnx.external_data import maybe_external

    for path in (_external_shape_constant(tmp_path), _external_model(tmp_path, "weights.bin")):
        assert maybe_external(open(path, "rb").read())
    sub = helper.make_graph([helper.make_node("Constant", [], ["c"], value=onnx.load(
        _external_shape_constant(tmp_path), load_external_data=False).graph.node[0].attribute[0].t)],
        "then", [], [helper.make_tensor_value_info("c", INT64, [2])])
    nested = make_model([helper.make_node("If", ["b"], ["c"], then_branch=sub, else_branch=sub)],
                        [("b", BOOL, [])], [("c", INT64, [2])])
    assert maybe_external(nested.SerializeToString())
    assert not maybe_external(_if_model().SerializeToString())


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_ceil_mode_pools_are_typed_by_the_spec_and_so_is_what_reads_them(op):
    # Width 2, stride 2, pads given: ONNX's inference (1.23) counts a second window starting at
    # 2, past the input; the spec drops it. The Relu and the Add after it follow the pool.
    nodes = [helper.make_node(op, ["x"], ["p"], name="pool", ceil_mode=1, kernel_shape=[1, 1],
                              pads=[0, 0, 0, 0], strides=[1, 2]),
             helper.make_node("Relu", ["p"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "r"], ["y"], name="add")]
    model = make_model(nodes, [("x", FLOAT, [1, 1, 2, 2])], [("y", FLOAT, None)], opset=21)
    calls = {e.span.name: e for e in post_order(byoc.load_onnx(model).main.body)
             if isinstance(e, Call)}
    assert {name: c.type.shape for name, c in calls.items()} == {
        "pool": (1, 1, 2, 1), "relu": (1, 1, 2, 1), "add": (1, 1, 2, 1)}
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    assert_matches_onnxruntime(model, {"x": x})


def test_a_ceil_mode_pool_built_by_hand_is_typed_by_the_spec():
    x = byoc.op.var("x", (1, 1, 2, 2))
    y = byoc.op.MaxPool(x, ceil_mode=1, kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 2])
    assert y.type.shape == (1, 1, 2, 1)
