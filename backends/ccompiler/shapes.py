"""Concrete types of every value of a region, for the shapes of one call.

The region's own types may hold symbolic dims; generated code is specialized, so each value
gets its concrete shape by running the op registry's type rules over the concrete argument
types (the same rules the importer and builder use, so the two never disagree).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from byoc.errors import KernelError
from byoc.ir import (
    Call,
    Constant,
    Expr,
    Function,
    TensorType,
    TupleGetItem,
    TupleType,
    Var,
    post_order,
)
from byoc.op import registry
from byoc.op.type_rules import SHAPE_CHECKED, shape_problem

from .emitter import Unsupported

Key = tuple[Expr, int]  # (the producing node, output index)


def key_of(expr: Expr) -> Key:
    """The key of the value an expression stands for (a TupleGetItem names its call's output)."""
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value, expr.index)
    return (expr, 0)


def n_outputs(call: Call) -> int:
    return len(call.type.fields) if isinstance(call.type, TupleType) else 1


def concrete_types(func: Function, arg_types: Sequence[TensorType]) -> dict[Key, TensorType]:
    """Every value's static TensorType when ``func`` is called with ``arg_types``."""
    types: dict[Key, TensorType] = {}
    for p, t in zip(func.params, arg_types):
        types[(p, 0)] = t
    for e in post_order(func.body):
        if isinstance(e, Constant):
            types[(e, 0)] = e.type
        elif isinstance(e, Call):
            for k, t in enumerate(_call_types(e, types)):
                types[(e, k)] = t
            if e.op == "Reshape":
                _check_reshape(e, types)
            elif e.op in SHAPE_CHECKED:
                _check_shapes(e, types)
        elif isinstance(e, Var) and (e, 0) not in types:
            raise Unsupported(f"free variable {e.name!r} in the region")
    return types


def _check_reshape(call: Call, types: dict[Key, TensorType]) -> None:
    """A Reshape must keep the element count: C would read past its input (the shape rule
    takes the target as given)."""
    data, out = types[key_of(call.args[0])], types[(call, 0)]  # type: ignore[arg-type]
    have, want = int(np.prod(data.shape, dtype=np.int64)), int(np.prod(out.shape, dtype=np.int64))
    if have != want:
        span = call.span
        raise KernelError(f"cannot reshape {list(data.shape)} ({have} elements) into "
                          f"{list(out.shape)} ({want} elements)",
                          span.name if span is not None else None, call.op_name)


def _check_shapes(call: Call, types: dict[Key, TensorType]) -> None:
    """An op's input shapes against each other (a conv's channels and weights, a MatMul's
    inner dims, ...): C would read short or past an end."""
    shapes = [None if a is None else types[key_of(a)].shape for a in call.args]
    problem = shape_problem(call.op_name, shapes, call.attrs)
    if problem:
        span = call.span
        raise KernelError(problem, span.name if span is not None else None, call.op_name)


def _call_types(call: Call, types: dict[Key, TensorType]) -> list[TensorType]:
    if not isinstance(call.op, str):
        raise Unsupported(f"cannot generate code for a call of {call.op_name}")
    entry = registry.get(call.op)
    n = n_outputs(call)
    args = [None if a is None else types[key_of(a)] for a in call.args]
    values = [a.value if isinstance(a, Constant) else None for a in call.args]
    try:
        out = entry.type_rule(call.attrs, args, n, values)
    except Exception as exc:
        raise Unsupported(f"{call.op}: no type for these shapes "
                          f"({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"
                          ) from exc
    if any(not (isinstance(t, TensorType) and t.is_static) for t in out):
        out = _onnx_inference(call, args, values, n) or out
    declared = call.type.fields if isinstance(call.type, TupleType) else (call.type,)
    result = []
    for k, t in enumerate(out):
        dtype = (t.dtype if isinstance(t, TensorType) and t.dtype
                 else getattr(declared[k], "dtype", None))
        if not isinstance(t, TensorType) or not t.is_static or dtype is None:
            raise Unsupported(f"{call.op}: output {k} has no static shape for these inputs ({t})")
        result.append(TensorType(t.shape, dtype))
    return result


def _onnx_inference(call: Call, args: list, values: list, n: int) -> list[TensorType] | None:
    """ONNX shape inference on the one node, with rank-0 inputs typed as such.

    byoc.op.onnx_bridge.type_to_proto leaves a rank-0 shape unset (unknown rank), so the
    registry's rule cannot type Gather(x, scalar) or Cast(scalar); this asks ONNX directly.
    """
    import onnx
    from onnx import helper, numpy_helper, shape_inference

    from byoc.op import onnx_bridge

    ins = [f"i{k}" if t is not None else "" for k, t in enumerate(args)]
    outs = [f"o{k}" for k in range(n)]
    node = helper.make_node(call.op, ins, outs)
    node.attribute.extend(onnx_bridge.attr_to_proto(k, v) for k, v in call.attrs.items()
                          if not k.startswith("_"))
    types = {}
    for name, t in zip(ins, args):
        if name:
            types[name] = helper.make_tensor_type_proto(onnx_bridge.elem_type(t.dtype), t.shape)
    data = {name: numpy_helper.from_array(v, name) for name, v in zip(ins, values)
            if name and v is not None and v.dtype != object}
    try:
        result = shape_inference.infer_node_outputs(
            onnx.defs.get_schema(call.op, registry.CANONICAL_OPSET), node, types, data,
            opset_imports=[helper.make_opsetid("", registry.CANONICAL_OPSET)])
        return [onnx_bridge.type_from_proto(result[o]) for o in outs]
    except Exception:  # the registry's answer stands
        return None
