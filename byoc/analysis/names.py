"""How IR nodes and values are named for people: by their ONNX node and value names.

A call's name is its span (the ONNX node name); a value's name is the ONNX name it had: a graph
input's ``Var.name``, an initializer's ``Constant.name``, a node output's ``span.outputs[i]``.
Hand-built graphs may lack spans; then the op name stands in.
"""

from __future__ import annotations

from ..ir import Call, Constant, Expr, GlobalVar, TupleGetItem, Var


def node_key(call: Call) -> str:
    """The name ``explain`` and the report use for a node: its ONNX node name."""
    return call.span.name if call.span is not None else call.op_name


def value_name(expr: Expr) -> str:
    """The ONNX name of the value ``expr`` computes ("" if it never had one)."""
    if isinstance(expr, (Var, Constant)):
        return expr.name
    index = 0
    if isinstance(expr, TupleGetItem):
        expr, index = expr.tuple_value, expr.index
    if isinstance(expr, Call):
        span = expr.span
        if span is not None and index < len(span.outputs) and span.outputs[index]:
            return span.outputs[index]
        base = span.name if span is not None else expr.op_name.lstrip("@")
        return f"{base}:{index}" if index else base
    return ""


def describe(expr: Expr) -> str:
    """A short phrase for an argument in an error: "graph input 'w'", "output 1 of node 'bn'"."""
    if isinstance(expr, Var):
        return f"graph input {expr.name!r}"
    if isinstance(expr, Constant):
        return f"constant {expr.name!r}" if expr.name else "a constant"
    if isinstance(expr, TupleGetItem) and isinstance(expr.tuple_value, Call):
        return f"output {expr.index} of node {node_key(expr.tuple_value)!r}"
    if isinstance(expr, Call):
        if isinstance(expr.op, GlobalVar):
            return f"the result of @{expr.op.name}"
        return f"the output of node {node_key(expr)!r} ({expr.op_name})"
    return type(expr).__name__.lower()


def unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_1``, ``name_2``... whichever is not in ``taken``; adds it there."""
    out, k = name, 0
    while out in taken:
        k += 1
        out = f"{name}_{k}"
    taken.add(out)
    return out
