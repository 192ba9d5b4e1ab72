"""What the ccompiler backend takes, and why it declines the rest.

Shapes are known only at a region's first call (the code is specialized then), so only what is
impossible whatever the shapes is declined here: unsupported dtypes and attributes, unknown
ranks where the op needs one, and shape-computing inputs (Reshape's shape, Slice's starts...)
that are not constants. ``supports(call)`` answers True or a reason starting "ccompiler: ".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from byoc.ir import Call, Constant, TensorType, TupleType

Check = Callable[[Call], "bool | str"]
MAX_OUTPUTS = 64  # of one op (variadic inputs are made trees instead: wide.py)

F32 = frozenset({"float32"})
NUM = frozenset({"float32", "int64", "int32"})
DATA = frozenset({"float32", "int64", "int32", "bool", "uint8", "int8"})
BOOL = frozenset({"bool"})
INDEX = frozenset({"int64", "int32"})


@dataclass(frozen=True)
class Rule:
    """``dtypes`` of the data inputs and outputs; ``inputs`` overrides it for some inputs,
    ``outputs`` for the outputs; ``static`` inputs must be constants; ``check`` the rest."""

    dtypes: frozenset[str]
    static: tuple[int, ...] = ()
    inputs: tuple[tuple[int, frozenset[str]], ...] = ()
    outputs: frozenset[str] | None = None
    check: Check | None = None


def _attr(name: str, allowed: set, default) -> Check:
    def attr_allowed(call: Call) -> bool | str:
        value = call.attrs.get(name, default)
        return value in allowed or f"{call.op} with {name}={value!r} is not supported"

    return attr_allowed


def _one_output(what: str) -> Check:
    def one_output(call: Call) -> bool | str:
        return not isinstance(call.type, TupleType) or f"{call.op}'s {what} is not supported"

    return one_output


def _spatial(*ranks: int) -> Check:
    def rank_known(call: Call) -> bool | str:
        t = call.args[0].type  # type: ignore[union-attr]
        if not isinstance(t, TensorType) or t.rank is None:
            return f"{call.op} needs a known rank"
        return t.rank - 2 in ranks or f"{call.op} over {t.rank - 2} spatial dims is not supported"

    return rank_known


def _all(*checks: Check) -> Check:
    def all_hold(call: Call) -> bool | str:
        for c in checks:
            verdict = c(call)
            if verdict is not True:
                return verdict
        return True

    return all_hold


def _no_dilation(call: Call) -> bool | str:
    return all(d == 1 for d in call.attrs.get("dilations", [1])) or \
        f"{call.op} with dilations is not supported"


def _dropout_inference(call: Call) -> bool | str:
    if len(call.args) > 2 and call.args[2] is not None:
        mode = call.args[2]
        if not isinstance(mode, Constant) or bool(mode.value):
            return "Dropout in training mode is not supported"
    return True


Q8 = frozenset({"int8", "uint8"})


def _quant_params(call: Call) -> bool | str:
    """Per-tensor or per-axis (1-D along ``axis``) scale and zero point, no blocks."""
    if call.attrs.get("block_size", 0):
        return f"{call.op} with block_size (blocked quantization) is not supported"
    x, scale = (getattr(a, "type", None) for a in call.args[:2])
    zp = call.args[2] if len(call.args) > 2 else None
    if not isinstance(scale, TensorType) or scale.rank is None or scale.rank > 1:
        return f"{call.op}'s scale must be a scalar or 1-D"
    zshape = getattr(zp.type, "shape", None) if zp is not None else None
    if zp is not None and zshape != scale.shape and not (
            scale.shape in ((), (1,)) and zshape in ((), (1,))):
        return f"{call.op}'s zero point must have the scale's shape"
    if call.op == "QuantizeLinear" and zp is not None \
            and call.type.dtype != zp.type.dtype:  # type: ignore[union-attr]
        return f"{call.op} with output_dtype other than the zero point's is not supported"
    if scale.rank == 1 and scale.shape != (1,):
        if not isinstance(x, TensorType) or x.rank is None or not scale.is_static:
            return f"per-axis {call.op} needs a known data rank and scale size"
        if not -x.rank <= call.attrs.get("axis", 1) < x.rank:
            return f"{call.op}'s axis is out of range"
    return True


def _few_outputs(call: Call) -> bool | str:
    # One C parameter per output: a split into thousands would be a function gcc cannot build.
    n = len(call.type.fields) if isinstance(call.type, TupleType) else 1
    return n <= MAX_OUTPUTS or f"{call.op} into {n} outputs (at most {MAX_OUTPUTS})"


UNARY_FLOAT = """Exp Log Sqrt Reciprocal Floor Ceil Round Sin Cos Tan Tanh Sigmoid LeakyRelu Elu
Selu Celu Softplus Softsign HardSigmoid HardSwish Erf Mish ThresholdedRelu""".split()
UNARY_NUM = "Abs Neg Relu Sign".split()
BINARY_NUM = "Add Sub Mul Div Max Min Sum".split()
COMPARE = "Equal Less Greater LessOrEqual GreaterOrEqual".split()
REDUCE_FLOAT = "ReduceMean ReduceProd ReduceSumSquare ReduceL1 ReduceL2".split()
REDUCE_NUM = "ReduceSum ReduceMax ReduceMin".split()
POOL = _spatial(1, 2)

RULES: dict[str, Rule] = {
    **{op: Rule(F32) for op in UNARY_FLOAT},
    **{op: Rule(NUM) for op in UNARY_NUM},
    **{op: Rule(NUM) for op in BINARY_NUM},
    **{op: Rule(NUM, outputs=BOOL) for op in COMPARE},
    "Equal": Rule(NUM | BOOL, outputs=BOOL),
    **{op: Rule(BOOL) for op in ("And", "Or", "Xor", "Not")},
    "IsNaN": Rule(F32, outputs=BOOL),
    "IsInf": Rule(F32, outputs=BOOL),
    "Pow": Rule(F32),
    "Mean": Rule(F32),
    "PRelu": Rule(F32),
    "Clip": Rule(NUM),
    "Gelu": Rule(F32, check=_attr("approximate", {"none", "tanh"}, "none")),
    "Where": Rule(DATA, inputs=((0, BOOL),)),
    "Cast": Rule(DATA),
    "QuantizeLinear": Rule(F32, inputs=((2, Q8),), outputs=Q8, check=_quant_params),
    "DequantizeLinear": Rule(Q8 | {"int32"}, inputs=((1, F32),), outputs=F32,
                             check=_quant_params),
    "Identity": Rule(DATA),
    "Dropout": Rule(F32, inputs=((1, F32), (2, BOOL)), static=(1, 2), check=_dropout_inference,
                    outputs=frozenset({"float32", "bool"})),
    "MatMul": Rule(F32),
    "Gemm": Rule(F32),
    "Conv": Rule(F32, check=_spatial(1, 2)),
    "ConvTranspose": Rule(F32, check=_spatial(1, 2)),
    "MaxPool": Rule(F32, check=_all(POOL, _one_output("Indices output"))),
    "AveragePool": Rule(F32, check=_all(POOL, _no_dilation)),
    "GlobalAveragePool": Rule(F32, check=_spatial(1, 2, 3)),
    "GlobalMaxPool": Rule(F32, check=_spatial(1, 2, 3)),
    "LRN": Rule(F32, check=_spatial(1, 2)),
    "BatchNormalization": Rule(F32, check=_all(_attr("training_mode", {0}, 0),
                                               _one_output("running mean/var outputs"))),
    "LayerNormalization": Rule(F32, check=_one_output("Mean/InvStdDev outputs")),
    "Softmax": Rule(F32),
    "LogSoftmax": Rule(F32),
    **{op: Rule(F32, static=(1,)) for op in REDUCE_FLOAT},
    **{op: Rule(NUM, static=(1,)) for op in REDUCE_NUM},
    "Reshape": Rule(DATA, static=(1,)),
    "Flatten": Rule(DATA),
    "Squeeze": Rule(DATA, static=(1,)),
    "Unsqueeze": Rule(DATA, static=(1,)),
    "Transpose": Rule(DATA),
    "Concat": Rule(DATA),
    "Split": Rule(DATA, static=(1,), check=_few_outputs),
    "Slice": Rule(DATA, static=(1, 2, 3, 4)),
    "Gather": Rule(DATA, inputs=((1, INDEX),)),
    "Expand": Rule(DATA, static=(1,)),
    "Shape": Rule(DATA, outputs=frozenset({"int64"})),
    "ConstantOfShape": Rule(DATA, static=(0,)),
    "Pad": Rule(DATA, static=(1, 2, 3), inputs=((1, INDEX), (3, INDEX)),
                check=_attr("mode", {"constant", "reflect", "edge", "wrap"}, "constant")),
}


def is_static_input(call: Call, index: int) -> bool:
    """Whether input ``index`` of ``call`` is read at code generation, not at run time."""
    rule = RULES.get(call.op) if isinstance(call.op, str) else None
    return rule is not None and index in rule.static


def static_inputs(call: Call) -> list[int]:
    """The inputs of ``call`` read at code generation, in order (one rule lookup for all)."""
    rule = RULES.get(call.op) if isinstance(call.op, str) else None
    return [] if rule is None else sorted(j for j in set(rule.static) if 0 <= j < len(call.args))


def supports(call: Call) -> bool | str:
    """True if ccompiler takes ``call``, else why not."""
    verdict = _verdict(call)
    return True if verdict is True else f"ccompiler: {verdict}"


def _verdict(call: Call) -> bool | str:
    if not isinstance(call.op, str) or call.op not in RULES:
        return f"op {call.op_name} is not supported"
    rule = RULES[call.op]
    verdict = rule.check(call) if rule.check is not None else True
    if verdict is not True:
        return verdict
    special = dict(rule.inputs)
    for j, a in enumerate(call.args):
        if a is None:
            continue
        if j in rule.static:
            if not isinstance(a, Constant):
                return (f"{call.op}'s input {j} must be a constant (it decides a shape; "
                        "shapes computed at run time are not supported)")
            continue
        allowed = special.get(j, rule.dtypes)
        why = _dtype_refusal(getattr(a, "type", None), allowed, f"input {j}")
        if why:
            return why
    outs = call.type.fields if isinstance(call.type, TupleType) else (call.type,)
    for k, t in enumerate(outs):
        why = _dtype_refusal(t, rule.outputs or rule.dtypes, f"output {k}")
        if why:
            return why
    return True


def _dtype_refusal(t, allowed: frozenset[str], what: str) -> str | None:
    if not isinstance(t, TensorType):
        return f"{what} is not a tensor"
    if t.dtype is None:
        return f"{what} has an unknown dtype"
    if t.dtype in allowed:
        return None
    if allowed == F32:
        return f"float32 only ({what} is {t.dtype})"
    return f"{what} is {t.dtype}, not {'/'.join(sorted(allowed))}"
