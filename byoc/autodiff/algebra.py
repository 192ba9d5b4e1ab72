"""IR values with arithmetic operators, so a rule reads as its math: ``g * y * (1 - y)``.

Each operator builds one ONNX call through the rule's ``Backward`` (so it carries the forward
node's span); a Python number on either side becomes a scalar constant of the other side's
dtype. Nothing is evaluated.
"""

from __future__ import annotations

from typing import Any

from ..ir import Expr
from .rule import Backward

class Sym:
    """An IR value plus the Backward that builds on it."""

    __slots__ = ("b", "e")

    def __init__(self, b: Backward, e: Expr):
        self.b, self.e = b, e

    def _lift(self, other: Any) -> Expr:
        if isinstance(other, Sym):
            return other.e
        if isinstance(other, Expr):
            return other
        return self.b.const(other, self.e)

    def _bin(self, op: str, other: Any, flip: bool = False) -> Sym:
        a, c = self.e, self._lift(other)
        return Sym(self.b, self.b.op(op, *((c, a) if flip else (a, c))))

    def __add__(self, o: Any) -> Sym:
        return self._bin("Add", o)

    def __radd__(self, o: Any) -> Sym:
        return self._bin("Add", o, flip=True)

    def __sub__(self, o: Any) -> Sym:
        return self._bin("Sub", o)

    def __rsub__(self, o: Any) -> Sym:
        return self._bin("Sub", o, flip=True)

    def __mul__(self, o: Any) -> Sym:
        return self._bin("Mul", o)

    def __rmul__(self, o: Any) -> Sym:
        return self._bin("Mul", o, flip=True)

    def __truediv__(self, o: Any) -> Sym:
        return self._bin("Div", o)

    def __rtruediv__(self, o: Any) -> Sym:
        return self._bin("Div", o, flip=True)

    def __pow__(self, o: Any) -> Sym:
        return self._bin("Pow", o)

    def __neg__(self) -> Sym:
        return self.apply("Neg")

    def __gt__(self, o: Any) -> Sym:
        return self._bin("Greater", o)

    def __lt__(self, o: Any) -> Sym:
        return self._bin("Less", o)

    def __ge__(self, o: Any) -> Sym:
        return self._bin("GreaterOrEqual", o)

    def __le__(self, o: Any) -> Sym:
        return self._bin("LessOrEqual", o)

    def apply(self, op: str, *args: Any, **attrs: Any) -> Sym:
        """``op(self, *args)``: a unary function or an op with extra inputs (axes, shape)."""
        extra = [self._lift(a) if isinstance(a, (Sym, Expr)) else a for a in args]
        return Sym(self.b, self.b.op(op, self.e, *extra, **attrs))


def sym(b: Backward, e: Expr) -> Sym:
    return Sym(b, e)


def where(cond: Sym, a: Any, c: Any) -> Sym:
    """``cond ? a : c``; numbers take the dtype of the Sym branch."""
    ref = a if isinstance(a, Sym) else c
    assert isinstance(ref, Sym), "where needs one tensor branch to take a dtype from"
    return Sym(cond.b, cond.b.op("Where", cond.e, ref._lift(a), ref._lift(c)))
