"""The two annotation ops: where a value enters a backend's region and where it leaves it.

    %0 = annotation.compiler_begin(%x, compiler="ref")   # %x enters a region of "ref"
    %1 = Relu(%0)                                         # inside the region
    %2 = annotation.compiler_end(%1, compiler="ref")     # %1 leaves it
    %3 = Abs(%2)                                          # on the host

They are TVM's markers, written by hand or by the annotate passes. An optional ``region`` attr
ties together parts of one region that no data edge connects (see ``regions.py``).
"""

from __future__ import annotations

from ..ir import Call, Expr, TupleType

BEGIN = "annotation.compiler_begin"
END = "annotation.compiler_end"


def _marker(op: str, expr: Expr, compiler: str, region: int | None) -> Call:
    if not isinstance(expr, Expr):
        raise TypeError(f"{op.split('.')[-1]} wants an IR value, got {type(expr).__name__}")
    if isinstance(expr.type, TupleType):  # type: ignore[attr-defined]
        raise ValueError(f"{op.split('.')[-1]} of a multi-output value: mark each output "
                         "(byoc.op.outputs(call)[i]) instead")
    attrs: dict = {"compiler": compiler}
    if region is not None:
        attrs["region"] = region
    return Call(op, (expr,), attrs, expr.type)  # type: ignore[attr-defined]


def compiler_begin(expr: Expr, compiler: str, region: int | None = None) -> Call:
    """``expr`` enters a region of backend ``compiler``."""
    return _marker(BEGIN, expr, compiler, region)


def compiler_end(expr: Expr, compiler: str, region: int | None = None) -> Call:
    """``expr``, computed inside a region of backend ``compiler``, leaves it."""
    return _marker(END, expr, compiler, region)


MARKERS = frozenset({BEGIN, END})


def is_annotation(expr: Expr) -> bool:
    return isinstance(expr, Call) and expr.op in MARKERS
