"""The Relay-like text form: one binding per line, types and spans in comments.

    def @main(%x: Tensor[(1, 3), float32]) -> Tensor[(1, 3), float32] {
      %0 = Relu(%x) /* ty=Tensor[(1, 3), float32] span=relu_1 */;
      %0
    }

Names from a model are quoted and escaped, so no string in it can end a comment or a line.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .expr import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var
from .module import IRModule
from .traversal import post_order

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/\-]*\Z")


def quote(name: str) -> str:
    """A model string as it may appear in the text: plain if safe, else a JSON-style quote."""
    if _PLAIN.match(name):
        return name
    out = name.replace("\\", "\\\\").replace('"', '\\"')
    out = "".join(c if c.isprintable() and c != "*" else f"\\u{ord(c):04x}" for c in out)
    return f'"{out}"'


class _Printer:
    def __init__(self, show_meta: bool):
        self.show_meta = show_meta
        self.constants: list[Constant] = []
        self.const_index: dict[Constant, int] = {}

    def constant(self, c: Constant) -> str:
        if c.value.size == 1 and c.value.ndim == 0 and c.value.dtype.kind in "biuf":
            return f"{c.value.item()!r}:{c.value.dtype.name}"
        k = self.const_index.setdefault(c, len(self.constants))
        if k == len(self.constants):
            self.constants.append(c)
        return f"meta[Constant][{k}]"

    def attr(self, value: Any, indent: str) -> str:
        if isinstance(value, Function):
            return self.function("fn", value, indent + "  ")
        if isinstance(value, np.ndarray):
            if value.size <= 8:
                return f"tensor({value.tolist()!r}, {value.dtype.name})"
            return f"tensor(<{value.shape}, {value.dtype.name}>)"
        if isinstance(value, str):
            return quote(value) if not _PLAIN.match(value) else f'"{value}"'
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(self.attr(v, indent) for v in value) + "]"
        if isinstance(value, dict):  # DEFAULTS: {parameter name: array}
            return "{" + ", ".join(f"{self.attr(k, indent)}: {self.attr(v, indent)}"
                                   for k, v in value.items()) + "}"
        return repr(value)

    def function(self, name: str, func: Function, indent: str) -> str:
        names: dict[Expr, str] = {}
        for p in func.params:
            names[p] = "%" + quote(p.name)
        params = ", ".join(f"{names[p]}: {p.type}" for p in func.params)
        head = f"{name}({params}) -> {func.ret_type}"
        fattrs = {k: v for k, v in func.attrs.items() if k != "output_names"}
        if fattrs:
            head += " attrs={" + ", ".join(f"{k}={self.attr(v, indent)}" for k, v in fattrs.items()) + "}"
        lines = [head + " {"]
        inner = indent + "  "
        counter = 0

        def ref(e: Expr | None) -> str:
            if e is None:
                return "_"
            if isinstance(e, Constant):
                return self.constant(e)
            if isinstance(e, GlobalVar):
                return "@" + quote(e.name)
            return names.get(e, "%<free>")

        for e in post_order(func.body):
            if isinstance(e, (Var, Constant, GlobalVar)):
                if isinstance(e, Var) and e not in names:
                    names[e] = "%" + quote(e.name)
                continue
            if isinstance(e, Call):
                op = e.op
                opname = ref(op) if isinstance(op, GlobalVar) else (
                    self.function("fn", op, inner) if isinstance(op, Function) else op)
                args = [ref(a) for a in e.args]
                args += [f"{k}={self.attr(v, inner)}" for k, v in e.attrs.items()]
                text = f"{opname}({', '.join(args)})"
                comment = f"ty={e.type}"
                if e.span is not None:
                    comment += f" span={quote(e.span.name)}"
            elif isinstance(e, Tuple):
                text = "(" + ", ".join(ref(f) for f in e.fields) + ("," if len(e.fields) == 1 else "") + ")"
                comment = ""
            else:
                assert isinstance(e, TupleGetItem)
                text = f"{ref(e.tuple_value)}.{e.index}"
                comment = f"ty={e.type}"
            var = f"%{counter}"
            counter += 1
            names[e] = var
            lines.append(f"{inner}{var} = {text}" + (f" /* {comment} */" if comment else "") + ";")
        lines.append(f"{inner}{ref(func.body)}")
        lines.append(indent + "}")
        return "\n".join(lines)


def astext(obj: IRModule | Function | Expr, show_meta: bool = False) -> str:
    """The text form of a module, a function, or an expression (wrapped as a function)."""
    p = _Printer(show_meta)
    if isinstance(obj, IRModule):
        parts = [p.function("def @" + quote(n), f, "") for n, f in obj.functions.items()]
    elif isinstance(obj, Function):
        parts = [p.function("fn", obj, "")]
    else:
        parts = [p.function("fn", Function((), obj), "")]
    text = "\n\n".join(parts)
    if show_meta and p.constants:
        meta = [f"// meta[Constant][{i}] {quote(c.name)}: {c.type}" for i, c in enumerate(p.constants)]
        text += "\n\n" + "\n".join(meta)
    return text
