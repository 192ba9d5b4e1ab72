"""Variadic ops of many inputs as trees of ops of at most ``WIDTH`` inputs.

A Sum or Concat of 50,000 inputs would be one C function of 50,000 parameters (gcc crashes on
it) and, for Sum, one expression 50,000 operands deep. As a tree, each op is small, identical
ones share one C function (``codegen._emit_op``), and the region's entry, which passes the
values around, is cut into bounded parts (``entry.py``). Concat, Max and Min come out exact;
Sum and Mean add in another order, as any reassociation does (within fp32 tolerance).

    Sum(x0, ..., x99)  ->  Sum(Sum(x0, ..., x63), Sum(x64, ..., x99))
"""

from __future__ import annotations

import numpy as np

from byoc.ir import (
    Call,
    Constant,
    Expr,
    Function,
    Span,
    TensorType,
    post_order,
    rewrite,
)
from byoc.op.builder import make_call

WIDTH = 64
VARIADIC = frozenset({"Sum", "Max", "Min", "Mean", "Concat"})


def split_wide_ops(func: Function) -> Function:
    """``func`` with every variadic call of more than ``WIDTH`` inputs made a tree."""
    if not any(isinstance(e, Call) and e.op in VARIADIC and len(e.args) > WIDTH
               for e in post_order(func.body)):
        return func
    (body,), _ = rewrite([func.body], _split)
    return Function(func.params, body, func.attrs)


def _split(old: Expr, new: Expr) -> Expr:
    if not (isinstance(new, Call) and new.op in VARIADIC and len(new.args) > WIDTH):
        return new
    name = new.span.name if new.span is not None else new.op_name
    inner = "Sum" if new.op == "Mean" else new.op  # a Mean is the sum of all, divided once
    attrs = dict(new.attrs) if new.op == "Concat" else {}
    level = list(new.args)
    while len(level) > WIDTH:
        level = [make_call(inner, *level[i:i + WIDTH], span=Span(name, inner), **attrs)
                 if len(level[i:i + WIDTH]) > 1 else level[i]
                 for i in range(0, len(level), WIDTH)]
    if new.op != "Mean":
        return Call(new.op, tuple(level), new.attrs, new.type, new.span)
    total = make_call("Sum", *level, span=Span(name, "Sum"))
    t = new.type
    count = Constant(np.array(len(new.args), np.dtype(t.dtype if isinstance(t, TensorType)
                                                       and t.dtype else "float32")))
    return Call("Div", (total, count), {}, new.type, new.span)
