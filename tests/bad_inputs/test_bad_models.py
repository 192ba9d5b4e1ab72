"""Every broken or hostile model: exit 2, one line naming the problem, nothing written, and no
allocation the input does not justify (the CLI runs under an address-space limit)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MEMORY_LIMIT = 6 << 30  # bytes of address space: far below any of the sizes these models ask for

EXPECTED = {
    "truncated.onnx": "not an ONNX model",
    "random_bytes.onnx": "not an ONNX model",
    "no_graph.onnx": "no graph",
    "two_writers.onnx": "node 'second_writer' (Neg): writes tensor 'y', which node 'first_writer'",
    "cycle.onnx": "cycle through nodes ['cycle_a', 'cycle_b']",
    "dangling_input.onnx": "node 'reads_ghost' (Add): reads tensor 'ghost'",
    "unknown_op.onnx": "node 'teleporter' (Teleport): unknown op 'Teleport' in domain 'com.example'",
    "wrong_attr_type.onnx": "node 'flatten_bad_axis' (Flatten): attribute 'axis' is FLOAT",
    "newer_opset.onnx": "opset 29 is newer",
    "huge_initializer.onnx": "initializer 'big' (shape [1000000, 1000000])",
    "huge_constant_of_shape.onnx": "node 'fill_huge' (ConstantOfShape): its output shape [1000000, 1000000]",
    "huge_reshape.onnx": "node 'reshape_huge' (Reshape): its output shape [1000000, 1000000]",
    "huge_input.onnx": "graph input 'x': its shape [100000, 100000, 100] would take",
    "sparse_huge.onnx": "sparse tensor 'sv': its dense shape [1000000, 1000000] would take",
    "sparse_out_of_range.onnx": "sparse tensor 'sv': an index is outside its shape [2]",
    "negative_dim.onnx": "initializer 'w' has a negative dim: [-1, 2]",
    "zero_group_conv.onnx": "node 'conv_group_0' (Conv): ",
    "conv_channels.onnx": "node 'conv_6_for_2' (Conv): input has 6 channels, its weights "
                          "(8, 2, 3, 3) take 2 x group 1 = 2",
    "matmul_inner.onnx": "node 'matmul_5_by_4' (MatMul): inner dims differ: A (2, 5) has 5 "
                         "columns, B (4, 3) has 4 rows",
    "gemm_inner.onnx": "node 'gemm_5_by_4' (Gemm): inner dims differ: A (2, 5) has 5 columns, "
                       "B (3, 4) transposed has 4 rows",
    "batchnorm_scale.onnx": "node 'bn_3_for_4' (BatchNormalization): scale has 3 values for 4 "
                            "channels",
    "recursive_function.onnx": "Model-local functions must not be recursive",
    "not_utf8.onnx": "a node name is not valid UTF-8: b'\\xff\\xfe",
    "external_dotdot.onnx": "tensor 'w': external data location '../secret.bin' points outside",
    "external_absolute.onnx": "tensor 'w': external data location '/etc/passwd' is absolute",
}


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "byoc", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120, preexec_fn=_limit_memory,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def assert_refused(result, needle):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert needle in lines[0], lines[0]
    assert lines[0].startswith("byoc: error: "), lines[0]


def test_the_corpus_is_complete():
    assert sorted(f for f in os.listdir(HERE) if f.endswith(".onnx")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_model_is_refused_in_one_line(name, tmp_path):
    before = sorted(os.listdir(HERE))
    assert_refused(run_cli("run", os.path.join(HERE, name), cwd=tmp_path), EXPECTED[name])
    assert os.listdir(tmp_path) == [] and sorted(os.listdir(HERE)) == before


def test_external_data_through_a_symlink_out_of_the_folder(tmp_path):
    from tests.bad_inputs.make_corpus import external

    import onnx

    (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(tmp_path / "secret.bin", folder / "w.bin")
    onnx.save(external("w.bin"), folder / "m.onnx")
    assert_refused(run_cli("run", folder / "m.onnx", cwd=tmp_path), "points outside the model's folder")


def test_a_shape_fed_at_run_time_is_checked_before_allocating(tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], "g",
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)]), tmp_path / "m.onnx")
    np.save(tmp_path / "s.npy", np.array([10**6, 10**6], np.int64))
    assert_refused(run_cli("run", "m.onnx", "--input", "s=s.npy", cwd=tmp_path),
                   "node 'fill' (ConstantOfShape): MemoryError: refused to allocate")
