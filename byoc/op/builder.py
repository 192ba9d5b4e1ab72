"""Build calls by hand: ``byoc.op.Conv(x, w, pads=[1, 1, 1, 1])``.

Made from onnx.defs schemas: argument counts and attribute names and types are checked, and
the result's type is inferred, so a graph written by hand is typed like an imported one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..ir import Call, Constant, Expr, Function, Span, TensorType, TupleGetItem, TupleType, Type, Var
from . import registry

_A = onnx.defs.OpSchema.AttrType
_CHECKS = {
    _A.INT: lambda v: isinstance(v, (int, np.integer)),
    _A.FLOAT: lambda v: isinstance(v, (int, float, np.floating, np.integer)),
    _A.STRING: lambda v: isinstance(v, str),
    _A.INTS: lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, np.integer)) for x in v),
    _A.FLOATS: lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, np.floating)) for x in v),
    _A.STRINGS: lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    _A.TENSOR: lambda v: isinstance(v, np.ndarray),
    _A.GRAPH: lambda v: isinstance(v, Function),
}


class OpBuildError(ValueError):
    """A hand-built call that does not fit its op's schema."""


def var(name: str, shape: tuple | list | None, dtype: str = "float32") -> Var:
    """A graph input."""
    return Var(name, TensorType(None if shape is None else tuple(shape), np.dtype(dtype).name))


def const(value: Any, name: str = "", dtype: str | None = None) -> Constant:
    """A constant from anything numpy takes."""
    return Constant(np.asarray(value, dtype=dtype), name)


def _expr(x: Any) -> Expr | None:
    if x is None or isinstance(x, Expr):
        return x
    return const(x)


def _normalize(name: str, value: Any, kind) -> Any:
    if kind == _A.INT:
        return int(value)
    if kind == _A.FLOAT:
        return float(value)
    if kind == _A.INTS:
        return [int(v) for v in value]
    if kind == _A.FLOATS:
        return [float(v) for v in value]
    if kind == _A.STRINGS:
        return list(value)
    return value


def default_outputs(op: str, schema: onnx.defs.OpSchema | None, attrs: dict[str, Any]) -> int:
    """How many outputs a call of ``op`` has when the caller does not say."""
    if op == "Split" and "num_outputs" in attrs:
        return int(attrs["num_outputs"])
    if schema is None:
        return 1
    return max(1, sum(1 for o in schema.outputs
                      if o.option == onnx.defs.OpSchema.FormalParameterOption.Single))


def make_call(op: str, *args: Any, n_outputs: int | None = None, span: Span | str | None = None,
              **attrs: Any) -> Call:
    """A typed call of ``op``; raises OpBuildError when it does not fit the schema."""
    entry = registry.lookup(op)
    if entry is None:
        raise OpBuildError(f"unknown op {op!r}")
    schema = entry.schema
    exprs = [_expr(a) for a in args]
    while exprs and exprs[-1] is None:
        exprs.pop()
    if schema is not None:
        if not schema.min_input <= len(exprs) <= schema.max_input:
            raise OpBuildError(f"{op} takes {schema.min_input} to {schema.max_input} inputs, "
                               f"got {len(exprs)}")
        for k, formal in enumerate(schema.inputs[:len(exprs)]):
            if exprs[k] is None and formal.option == onnx.defs.OpSchema.FormalParameterOption.Single:
                raise OpBuildError(f"{op}: input {k} ({formal.name}) is required")
        for name, value in list(attrs.items()):
            spec = schema.attributes.get(name)
            if spec is None:
                known = ", ".join(sorted(schema.attributes)) or "none"
                raise OpBuildError(f"{op} has no attribute {name!r} (it has: {known})")
            check = _CHECKS.get(spec.type)
            if check is not None and not check(value):
                raise OpBuildError(f"{op}: attribute {name!r} must be {spec.type.name}, "
                                   f"got {type(value).__name__} {value!r}")
            attrs[name] = _normalize(name, value, spec.type)
        for name, spec in schema.attributes.items():
            if spec.required and name not in attrs:
                raise OpBuildError(f"{op}: attribute {name!r} is required")
    n = n_outputs if n_outputs is not None else default_outputs(op, schema, attrs)
    arg_types = [None if e is None else e.type for e in exprs]
    values = [e.value if isinstance(e, Constant) else None for e in exprs]
    try:
        types = entry.type_rule(attrs, arg_types, n, values)
    except Exception as exc:  # ONNX inference rejects the call: say why, with the op
        raise OpBuildError(f"{op}: {exc}".splitlines()[0]) from exc
    out_type: Type = types[0] if n == 1 else TupleType(tuple(types))
    if isinstance(span, str):
        span = Span(span, op)
    return Call(op, tuple(exprs), attrs, out_type, span)


def outputs(call: Call) -> list[Expr]:
    """The outputs of a call as separate values (TupleGetItem for multi-output ops)."""
    if isinstance(call.type, TupleType):
        return [TupleGetItem(call, i) for i in range(len(call.type.fields))]
    return [call]
