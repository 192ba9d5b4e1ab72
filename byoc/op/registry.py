"""The op registry: one entry per op, with its type rule, fuse pattern and host kernel.

Every op of ONNX's default domain at the canonical opset gets an entry here, built in one
place (``_build``) from onnx.defs plus the tables below; nothing registers by import side
effect. Contrib ops (com.microsoft) get entries on first use, run by onnxruntime.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx

from . import control_flow, host_kernels, type_rules
from .host_kernels import KernelFactory
from .type_rules import TypeRule

if TYPE_CHECKING:
    from ..autodiff.rule import GradientRule

CANONICAL_OPSET = onnx.defs.onnx_opset_version()


class FusePattern(enum.IntEnum):
    """How an op may fuse with its neighbours (the NNVM seed's classes, TVM's numbering)."""

    ELEMWISE = 0  # out[i] = f(in[i]), same shape
    BROADCAST = 1  # elementwise with numpy broadcasting
    INJECTIVE = 2  # each output element reads one input element (reshape, transpose, slice)
    COMM_REDUCE = 3  # commutative reduction over axes
    OUT_EWISE_FUSABLE = 4  # complex op whose output can take an elementwise epilogue (conv)
    OPAQUE = 8  # fuses with nothing


@dataclass(frozen=True, slots=True)
class OpDef:
    """Everything byoc knows about one op, as typed fields."""

    name: str  # "Conv", "com.microsoft.Gelu"
    fuse_pattern: FusePattern
    type_rule: TypeRule
    make_kernel: KernelFactory
    schema: onnx.defs.OpSchema | None = None
    kernel_source: str = "reference"  # numpy, reference, onnxruntime, control_flow, framework
    gradient: GradientRule | None = None  # input gradients from output gradients (autodiff)


UNARY = """Abs Neg Exp Log Sqrt Reciprocal Floor Ceil Round Sign Sin Cos Tan Asin Acos Atan Sinh
Cosh Asinh Acosh Atanh Erf Relu LeakyRelu Elu Selu Celu Sigmoid HardSigmoid HardSwish Softplus
Softsign Tanh Gelu Mish ThresholdedRelu Not IsNaN IsInf BitwiseNot Identity Shrink Clip Cast
CastLike Dropout""".split()
BINARY = """Add Sub Mul Div Pow Mod Max Min Sum Mean PRelu And Or Xor BitShift BitwiseAnd BitwiseOr
BitwiseXor Equal Less Greater LessOrEqual GreaterOrEqual Where""".split()
COMPARE = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}
INJECTIVE = """Reshape Flatten Transpose Concat Split Squeeze Unsqueeze Expand Gather GatherElements
GatherND Slice Tile Pad DepthToSpace SpaceToDepth Resize Upsample ReverseSequence Identity Trilu
Compress OneHot EyeLike""".split()
REDUCE = """ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum
ReduceLogSumExp ReduceSumSquare ArgMax ArgMin""".split()
OUT_EWISE = """Conv ConvTranspose MatMul Gemm ConvInteger MatMulInteger QLinearConv QLinearMatMul
DeformConv""".split()
CONTROL_FLOW = {"If": control_flow.if_kernel, "Loop": control_flow.loop_kernel,
                "Scan": control_flow.scan_kernel}
# Rules cheaper than asking ONNX shape inference, for the ops passes build most often.
HAND_RULES: dict[str, TypeRule] = {
    **{op: type_rules.same_as_first for op in UNARY if op not in {"Cast", "CastLike", "Dropout"}},
    **{op: type_rules.broadcast for op in BINARY},
    **{op: type_rules.compare for op in COMPARE},
    "Where": type_rules.where,
    "IsNaN": type_rules.compare, "IsInf": type_rules.compare,
}


def _fuse_pattern(op_type: str) -> FusePattern:
    if op_type in UNARY:
        return FusePattern.ELEMWISE
    if op_type in BINARY:
        return FusePattern.BROADCAST
    if op_type in INJECTIVE:
        return FusePattern.INJECTIVE
    if op_type in REDUCE:
        return FusePattern.COMM_REDUCE
    if op_type in OUT_EWISE:
        return FusePattern.OUT_EWISE_FUSABLE
    return FusePattern.OPAQUE


def _build() -> dict[str, OpDef]:
    from ..autodiff.rules import GRADIENTS
    from ..runtime import limits
    from .kernels import HAND_KERNELS

    table: dict[str, OpDef] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain not in ("", "ai.onnx") or schema.deprecated:
            continue
        op = schema.name
        if op in table:
            continue
        latest = onnx.defs.get_schema(op, CANONICAL_OPSET, "")
        if latest.deprecated:
            continue
        if op in CONTROL_FLOW:
            factory, source = CONTROL_FLOW[op], "control_flow"
        elif op in HAND_KERNELS:
            factory, source = host_kernels.hand(HAND_KERNELS[op]), "numpy"
        else:
            factory, source = host_kernels.reference, "reference"
        if op in limits.GUARDED:
            factory = host_kernels.guarded(op, factory)
        rule = HAND_RULES.get(op) or type_rules.onnx_inference(op, CANONICAL_OPSET)
        table[op] = OpDef(op, _fuse_pattern(op), rule, factory, latest, source, GRADIENTS.get(op))
    # The framework's own op: the executor's copy between devices (placed by plan_devices).
    table["device_copy"] = OpDef("device_copy", FusePattern.OPAQUE, type_rules.same_as_first,
                                 host_kernels.device_copy, None, "framework")
    return table


_lock = threading.Lock()
_TABLE: dict[str, OpDef] | None = None


def _table() -> dict[str, OpDef]:
    global _TABLE
    if _TABLE is None:
        with _lock:
            if _TABLE is None:
                _TABLE = _build()
    return _TABLE


# Domains whose ops onnxruntime runs, and those only onnx.reference implements.
ORT_DOMAINS = {"com.microsoft", "ai.onnx.ml", "com.microsoft.nchwc"}
REFERENCE_DOMAINS = {"ai.onnx.preview.training", "ai.onnx.preview"}


def _contrib(name: str) -> OpDef | None:
    """An entry for an op of another domain that onnxruntime can run (e.g. com.microsoft)."""
    domain, op_type = name.rpartition(".")[::2]
    if domain not in ORT_DOMAINS and domain not in REFERENCE_DOMAINS:
        return None
    try:
        schema = onnx.defs.get_schema(op_type, 1000, domain)
        rule = type_rules.onnx_inference(name, schema.since_version)
    except onnx.defs.SchemaError:  # onnx does not know it; onnxruntime may
        # its dtype guessed from its first input, its shape left unknown: a guessed shape
        # (QLinearGlobalAveragePool's input's) is a wrong declared type downstream
        schema, rule = None, type_rules.dtype_of_first
    if domain in REFERENCE_DOMAINS:
        return OpDef(name, FusePattern.OPAQUE, rule, host_kernels.reference, schema, "reference")
    return OpDef(name, FusePattern.OPAQUE, rule, host_kernels.onnxruntime, schema, "onnxruntime")


def lookup(name: str) -> OpDef | None:
    """The entry for an op, or None if byoc knows no such op."""
    table = _table()
    entry = table.get(name)
    if entry is None and "." in name:
        entry = _contrib(name)
        if entry is not None:
            with _lock:
                table[name] = entry
    return entry


def get(name: str) -> OpDef:
    """The entry for an op; KeyError naming it if byoc knows no such op."""
    entry = lookup(name)
    if entry is None:
        raise KeyError(f"unknown op {name!r}")
    return entry


def all_ops() -> dict[str, OpDef]:
    """Every default-domain entry (and the framework's own), by name; contrib ops not included."""
    return {name: entry for name, entry in _table().items() if "." not in name}
