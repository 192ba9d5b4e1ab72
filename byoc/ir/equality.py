"""Structural equality: same shape of graph, same ops, attrs, types and constants.

Vars are matched by position (parameters) or by first appearance (free vars), not by name;
spans are ignored unless asked for. Both graphs are walked in their deterministic post-order,
so the comparison is iterative and linear.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .expr import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var, children
from .module import IRModule
from .traversal import post_order


class StructuralMismatch(AssertionError):
    """Raised by assert_structural_equal, with the first difference found."""


def _attr_equal(a: Any, b: Any, spans: bool) -> bool:
    if isinstance(a, Function) or isinstance(b, Function):
        return isinstance(a, Function) and isinstance(b, Function) and _diff(a, b, spans) is None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_attr_equal(x, y, spans) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_attr_equal(a[k], b[k], spans) for k in a)
    return type(a) is type(b) and a == b


def _diff(lhs: Function, rhs: Function, spans: bool) -> str | None:
    """The first difference between two functions, or None."""
    if len(lhs.params) != len(rhs.params):
        return f"{len(lhs.params)} params vs {len(rhs.params)}"
    if not _attr_equal(lhs.attrs, rhs.attrs, spans):
        return f"function attrs differ: {lhs.attrs} vs {rhs.attrs}"
    pair: dict[Expr, Expr] = {}
    for a, b in zip(lhs.params, rhs.params):
        if a.type != b.type:
            return f"param {a.name}: {a.type} vs {b.type}"
        pair[a] = b
    la, lb = post_order(lhs.body), post_order(rhs.body)
    if len(la) != len(lb):
        return f"{len(la)} nodes vs {len(lb)}"
    for a, b in zip(la, lb):
        if type(a) is not type(b):
            return f"{a!r} vs {b!r}"
        if a in pair:
            if pair[a] is not b:
                return f"{a!r} is matched with two different nodes"
        elif isinstance(a, Var):
            if a.type != b.type:
                return f"free var {a.name}: {a.type} vs {b.type}"
        pair[a] = b
        ca, cb = children(a), children(b)
        if len(ca) != len(cb) or any(pair.get(x) is not y for x, y in zip(ca, cb)):
            return f"arguments of {a!r} differ from those of {b!r}"
        if isinstance(a, Call):
            assert isinstance(b, Call)
            if [x is None for x in a.args] != [y is None for y in b.args]:
                return f"omitted inputs of {a!r} differ"
            if isinstance(a.op, str) or isinstance(b.op, str):
                same_op = a.op == b.op
            elif isinstance(a.op, GlobalVar) and isinstance(b.op, GlobalVar):
                same_op = a.op.name == b.op.name
            else:
                same_op = _attr_equal(a.op, b.op, spans)
            if not same_op:
                return f"op {a.op_name} vs {b.op_name}"
            if not _attr_equal(a.attrs, b.attrs, spans):
                return f"attrs of {a!r}: {a.attrs} vs {b.attrs}"
            if a.type != b.type:
                return f"type of {a!r}: {a.type} vs {b.type}"
            if spans and a.span != b.span:
                return f"span {a.span} vs {b.span}"
        elif isinstance(a, Constant):
            assert isinstance(b, Constant)
            if not _attr_equal(a.value, b.value, spans):
                return f"constant {a.name!r} differs from {b.name!r}"
        elif isinstance(a, TupleGetItem):
            assert isinstance(b, TupleGetItem)
            if a.index != b.index:
                return f"tuple index {a.index} vs {b.index}"
        elif isinstance(a, GlobalVar):
            assert isinstance(b, GlobalVar)
            if a.name != b.name:
                return f"@{a.name} vs @{b.name}"
        elif isinstance(a, Tuple):
            pass
    return None


def _module_diff(lhs: IRModule, rhs: IRModule, spans: bool) -> str | None:
    if lhs.functions.keys() != rhs.functions.keys():
        return f"functions {sorted(lhs.functions)} vs {sorted(rhs.functions)}"
    for name in lhs.functions:
        d = _diff(lhs.functions[name], rhs.functions[name], spans)
        if d:
            return f"@{name}: {d}"
    return None


def structural_diff(lhs: Any, rhs: Any, spans: bool = False) -> str | None:
    """The first structural difference between two modules, functions or expressions."""
    if isinstance(lhs, IRModule) and isinstance(rhs, IRModule):
        return _module_diff(lhs, rhs, spans)
    if isinstance(lhs, Expr) and not isinstance(lhs, Function):
        lhs = Function((), lhs)
    if isinstance(rhs, Expr) and not isinstance(rhs, Function):
        rhs = Function((), rhs)
    if isinstance(lhs, Function) and isinstance(rhs, Function):
        return _diff(lhs, rhs, spans)
    return f"cannot compare {type(lhs).__name__} with {type(rhs).__name__}"


def structural_equal(lhs: Any, rhs: Any, spans: bool = False) -> bool:
    return structural_diff(lhs, rhs, spans) is None


def assert_structural_equal(lhs: Any, rhs: Any, spans: bool = False) -> None:
    d = structural_diff(lhs, rhs, spans)
    if d is not None:
        raise StructuralMismatch(f"not structurally equal: {d}\n--- lhs\n{_text(lhs)}\n--- rhs\n{_text(rhs)}")


def _text(x: Any) -> str:
    from .printer import astext

    return astext(x)
