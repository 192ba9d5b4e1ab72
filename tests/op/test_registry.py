"""The op registry covers every ONNX op, and the builder checks calls against schemas."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from byoc import op
from byoc.ir import TensorType, TupleType
from byoc.op import CANONICAL_OPSET, FusePattern, OpBuildError


def test_every_default_domain_op_has_an_entry():
    names = {s.name for s in onnx.defs.get_all_schemas_with_history()
             if s.domain in ("", "ai.onnx") and not onnx.defs.get_schema(s.name, CANONICAL_OPSET).deprecated}
    table = op.all_ops()
    assert names <= set(table), sorted(names - set(table))
    for entry in table.values():
        assert callable(entry.type_rule) and callable(entry.make_kernel)
        assert isinstance(entry.fuse_pattern, FusePattern)
        assert entry.kernel_source in {"numpy", "reference", "control_flow", "framework"}


def test_hot_ops_have_numpy_kernels_and_fuse_patterns():
    hot = ["Conv", "ConvTranspose", "MatMul", "Gemm", "BatchNormalization", "MaxPool", "AveragePool",
           "GlobalAveragePool", "LayerNormalization", "Softmax", "Add", "Relu", "Sigmoid", "Erf",
           "Reshape", "Transpose", "Concat", "Gather", "Slice", "Resize", "LSTM", "GRU"]
    for name in hot:
        assert op.get(name).kernel_source == "numpy", name
    assert op.get("Conv").fuse_pattern == FusePattern.OUT_EWISE_FUSABLE
    assert op.get("Relu").fuse_pattern == FusePattern.ELEMWISE
    assert op.get("Add").fuse_pattern == FusePattern.BROADCAST
    assert op.get("Transpose").fuse_pattern == FusePattern.INJECTIVE
    assert op.get("ReduceMean").fuse_pattern == FusePattern.COMM_REDUCE
    assert op.get("NonMaxSuppression").fuse_pattern == FusePattern.OPAQUE


def test_builder_infers_types():
    x = op.var("x", ("N", 3, 32, 32))
    w = op.const(np.zeros((8, 3, 3, 3), np.float32))
    conv = op.Conv(x, w, pads=[1, 1, 1, 1], strides=[2, 2])
    assert conv.type == TensorType(("N", 8, 16, 16), "float32")
    bn = op.BatchNormalization(conv, *[op.const(np.ones(8, np.float32)) for _ in range(4)],
                               training_mode=1, n_outputs=3)
    assert isinstance(bn.type, TupleType) and bn.type.fields[1] == TensorType((8,), "float32")
    assert op.Add(x, op.const(np.float32(1))).type == x.type
    assert op.Equal(x, x).type == TensorType(x.type.shape, "bool")


@pytest.mark.parametrize("build, message", [
    (lambda x: op.Conv(x, x, padz=[1]), "Conv has no attribute 'padz'"),
    (lambda x: op.Conv(x, x, pads=1.5), "attribute 'pads' must be INTS"),
    (lambda x: op.Relu(x, x), "Relu takes 1 to 1 inputs, got 2"),
    (lambda x: op.Cast(x), "attribute 'to' is required"),
    (lambda x: op.make_call("NoSuchOp", x), "unknown op 'NoSuchOp'"),
])
def test_builder_refuses_what_the_schema_does_not_allow(build, message):
    x = op.var("x", (1, 3, 8, 8))
    with pytest.raises(OpBuildError, match=message):
        build(x)
