"""Small ONNX models with Loop and Scan bodies, for partitioning inside subgraphs (issue 8).

    python -m tests.models.make_control_flow     # writes files/loop_running_sum.onnx, ...

The tests build the same models in memory (``loop_model()``, ``scan_model()``), so nothing
depends on the files; they are there for the CLI (``byoc partition files/loop_running_sum.onnx
--backend reference --json``). Weights are seeded random, fixed by the seed below.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
OPSET = 17
SEQ, DIM = 6, 8


def _weights(seed: int, *shape: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) / np.sqrt(shape[0])).astype(
        np.float32)


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(
        value, name))


def loop_model() -> onnx.ModelProto:
    """A running sum over a sequence: each iteration reads row ``i`` of ``x`` (captured), runs a
    small dense layer on it (weight ``w`` an initializer of main, bias a Constant inside the body),
    adds it to the carried sum and scans out the row; an If inside the body, on the parity of
    the iteration, doubles or negates the row (a body nested in a body).

        x [SEQ, DIM] -> Loop(trip=len(x), sum0) -> (sum [DIM], rows [SEQ, DIM]) -> Relu(sum)
    """
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph(
        [helper.make_node("Add", ["h", "h"], ["twice"], name="loop_even_add")], "even", [],
        [vi("twice", FLOAT, [DIM])])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["h"], ["negated"], name="loop_odd_neg")], "odd", [],
        [vi("negated", FLOAT, [DIM])])
    body = helper.make_graph(
        [_const("loop_bias", _weights(2, DIM)),
         _const("loop_two", np.array(2, np.int64)),
         _const("loop_zero", np.array(0, np.int64)),
         helper.make_node("Gather", ["x", "i"], ["row"], name="loop_gather", axis=0),
         helper.make_node("MatMul", ["row", "w"], ["mm"], name="loop_matmul"),
         helper.make_node("Add", ["mm", "loop_bias"], ["pre"], name="loop_bias_add"),
         helper.make_node("Tanh", ["pre"], ["h"], name="loop_tanh"),
         helper.make_node("Mod", ["i", "loop_two"], ["parity"], name="loop_mod"),
         helper.make_node("Equal", ["parity", "loop_zero"], ["even"], name="loop_is_even"),
         helper.make_node("If", ["even"], ["h2"], name="loop_if", then_branch=then_g,
                          else_branch=else_g),
         helper.make_node("Add", ["sum_in", "h2"], ["sum_out"], name="loop_accumulate"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="loop_cond"),
         helper.make_node("Identity", ["h2"], ["row_out"], name="loop_row_out")],
        "body",
        [vi("i", INT64, []), vi("cond_in", BOOL, []), vi("sum_in", FLOAT, [DIM])],
        [vi("cond_out", BOOL, []), vi("sum_out", FLOAT, [DIM]), vi("row_out", FLOAT, [DIM])])
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["shape"], name="shape", start=0, end=1),
         helper.make_node("Squeeze", ["shape"], ["trips"], name="trips"),
         helper.make_node("Loop", ["trips", "", "sum0"], ["sum", "rows"], name="loop", body=body),
         helper.make_node("Relu", ["sum"], ["y"], name="relu")],
        "loop_running_sum",
        [vi("x", FLOAT, [SEQ, DIM])],
        [vi("y", FLOAT, [DIM]), vi("rows", FLOAT, [SEQ, DIM])],
        [numpy_helper.from_array(_weights(1, DIM, DIM), "w"),
         numpy_helper.from_array(np.zeros(DIM, np.float32), "sum0")])
    return _finish(graph)


def scan_model() -> onnx.ModelProto:
    """A tanh RNN as a Scan: state ``h`` [1, DIM], one row of ``x`` per step; the input weight
    ``w`` is captured from main, the recurrent weight ``u`` is a Constant inside the body.

        x [SEQ, 1, DIM] -> Scan(h0, x) -> (h [1, DIM], hs [SEQ, 1, DIM]) -> Sigmoid(hs)
    """
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [_const("scan_u", _weights(4, DIM, DIM)),
         helper.make_node("MatMul", ["xt", "w"], ["xw"], name="scan_xw"),
         helper.make_node("MatMul", ["h_in", "scan_u"], ["hu"], name="scan_hu"),
         helper.make_node("Add", ["xw", "hu"], ["pre"], name="scan_add"),
         helper.make_node("Tanh", ["pre"], ["h_out"], name="scan_tanh"),
         helper.make_node("Mul", ["h_out", "h_out"], ["sq"], name="scan_square")],
        "scan_body",
        [vi("h_in", FLOAT, [1, DIM]), vi("xt", FLOAT, [1, DIM])],
        [vi("h_out", FLOAT, [1, DIM]), vi("sq", FLOAT, [1, DIM])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["h0", "x"], ["h", "hs"], name="scan", body=body,
                          num_scan_inputs=1),
         helper.make_node("Sigmoid", ["hs"], ["y"], name="sigmoid")],
        "scan_rnn",
        [vi("x", FLOAT, [SEQ, 1, DIM]), vi("h0", FLOAT, [1, DIM])],
        [vi("y", FLOAT, [SEQ, 1, DIM]), vi("h", FLOAT, [1, DIM])],
        [numpy_helper.from_array(_weights(3, DIM, DIM), "w")])
    return _finish(graph)


def _finish(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


MODELS = {"loop_running_sum": loop_model, "scan_rnn": scan_model}


def main() -> None:
    files = Path(__file__).parent / "files"
    for name, make in MODELS.items():
        path = files / f"{name}.onnx"
        onnx.save(make(), str(path))
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
