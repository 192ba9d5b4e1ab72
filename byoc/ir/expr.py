"""The IR: an immutable expression DAG in the style of Relay.

Nodes are frozen, slotted dataclasses compared by identity: two ``Call`` objects are the same
value only if they are the same object. Structural comparison lives in ``equality.py``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .span import Span
from .types import TensorType, TupleType, Type

# An op is named by its ONNX type, with the domain in front for non-default domains:
# "Conv", "com.microsoft.Gelu", "annotation.compiler_begin". A call can also target a
# GlobalVar (an external function of the module) or a Function (a composite).


class _NoAttrs(dict):
    """The attrs of a call that has none: one shared, read-only empty dict. A fresh ``{}`` per
    call is 64 bytes, 6 MB of a 100,000-node import (most ONNX nodes have no attributes)."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("NO_ATTRS is shared by every call without attributes: build a new dict")

    __setitem__ = __delitem__ = __ior__ = update = setdefault = pop = popitem = clear = _read_only

    def __reduce__(self) -> str:
        return "NO_ATTRS"  # pickled by name, so unpickled and copied as the one instance


NO_ATTRS = _NoAttrs()


class Expr:
    """Base of every IR node."""

    __slots__ = ()


@dataclass(frozen=True, slots=True, eq=False)
class Var(Expr):
    """A function parameter (an ONNX graph input)."""

    name: str
    type: Type

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.type})"


@dataclass(frozen=True, slots=True, eq=False)
class Constant(Expr):
    """A tensor known at compile time (an ONNX initializer or Constant node)."""

    value: np.ndarray
    name: str = ""

    @property
    def type(self) -> TensorType:
        return TensorType(tuple(self.value.shape), self.value.dtype.name)

    def __repr__(self) -> str:
        return f"Constant({self.name!r}, {self.type})"


@dataclass(frozen=True, slots=True, eq=False)
class GlobalVar(Expr):
    """The name of a function in an IRModule."""

    name: str

    def __repr__(self) -> str:
        return f"@{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class Call(Expr):
    """An op applied to arguments.

    ``args`` may hold None for an omitted optional ONNX input. ``attrs`` holds ONNX attribute
    values as Python values; a graph attribute (an If branch, a Loop body) is a ``Function``.
    ``type`` is a ``TupleType`` exactly when the op has several outputs.
    """

    op: str | GlobalVar | Function
    args: tuple[Expr | None, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    type: Type = field(default_factory=lambda: TensorType(None, None))
    span: Span | None = None

    @property
    def op_name(self) -> str:
        if isinstance(self.op, str):
            return self.op
        if isinstance(self.op, GlobalVar):
            return "@" + self.op.name
        return str(self.op.attrs.get("Composite", "fn"))

    def __repr__(self) -> str:
        return f"Call({self.op_name}, span={self.span})"


@dataclass(frozen=True, slots=True, eq=False)
class Tuple(Expr):
    """Several values grouped as one."""

    fields: tuple[Expr, ...]

    @property
    def type(self) -> TupleType:
        return TupleType(tuple(f.type for f in self.fields))

    @property
    def span(self) -> Span | None:
        return None


@dataclass(frozen=True, slots=True, eq=False)
class TupleGetItem(Expr):
    """Field ``index`` of a tuple-typed value (one output of a multi-output op)."""

    tuple_value: Expr
    index: int

    @property
    def type(self) -> Type:
        t = self.tuple_value.type
        assert isinstance(t, TupleType), f"TupleGetItem of a non-tuple {t}"
        return t.fields[self.index]

    @property
    def span(self) -> Span | None:
        return getattr(self.tuple_value, "span", None)


#: ``Function.attrs[DEFAULTS]``: {parameter name: array}, the value a parameter takes when a run
#: does not feed it (ONNX's graph input that also has an initializer; ``byoc.gradient``'s
#: weights). Exported back to ONNX as initializers of those inputs.
DEFAULTS = "defaults"


@dataclass(frozen=True, slots=True, eq=False)
class Function(Expr):
    """A function: parameters and a body. ``attrs`` carry e.g. Compiler, global_symbol,
    DEFAULTS."""

    params: tuple[Var, ...]
    body: Expr
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def ret_type(self) -> Type:
        return self.body.type

    @property
    def type(self) -> Type:
        return self.ret_type

    def with_attrs(self, **attrs: Any) -> Function:
        return Function(self.params, self.body, {**self.attrs, **attrs})


def children(expr: Expr) -> tuple[Expr, ...]:
    """The values an expression reads, in argument order (function bodies excluded)."""
    if isinstance(expr, Call):
        args = expr.args  # most calls omit no input: skip the filtering copy (a hot path)
        return args if None not in args else tuple(a for a in args if a is not None)
    if isinstance(expr, Tuple):
        return expr.fields
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value,)
    return ()


def with_children(expr: Expr, new: list[Expr]) -> Expr:
    """A copy of ``expr`` reading ``new`` instead of its children (same order as ``children``).

    Returns ``expr`` itself when nothing changed, so rewrites keep sharing.
    """
    if isinstance(expr, Call) and len(new) == len(expr.args):  # no omitted input: a hot path
        if all(map(operator.is_, expr.args, new)):
            return expr
        return Call(expr.op, tuple(new), expr.attrs, expr.type, expr.span)
    old = children(expr)
    if len(old) == len(new) and all(map(operator.is_, old, new)):
        return expr
    if isinstance(expr, Call):
        it = iter(new)
        args = tuple(None if a is None else next(it) for a in expr.args)
        return Call(expr.op, args, expr.attrs, expr.type, expr.span)
    if isinstance(expr, Tuple):
        return Tuple(tuple(new))
    if isinstance(expr, TupleGetItem):
        return TupleGetItem(new[0], expr.index)
    raise TypeError(f"{type(expr).__name__} has no children")
