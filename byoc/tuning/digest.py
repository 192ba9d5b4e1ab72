"""Content digests: what a function computes, blind to names, so equal work has equal keys.

    d = Digests()
    d.function(func)       # sha256 hex of ops, attributes, edges, parameter types and weights
    d.constant(const)      # dtype, shape and bytes of one tensor (memoized per Constant object)
    d.module(part)         # main with each external function by its backend and content

Names (spans, ONNX value names, region names) are left out: a measurement made for one model is
reused by another holding the same work. A function's nodes are numbered in post-order, which is
deterministic for a given structure, so two functions with the same structure digest alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    IRModule,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    post_order,
)


def _type_text(t: Any) -> str:
    if isinstance(t, TensorType):
        return f"T{t.shape}{t.dtype}"
    if isinstance(t, TupleType):
        return "(" + ",".join(_type_text(f) for f in t.fields) + ")"
    return str(t)


def array_digest(value: Any) -> str:
    """sha256 of a tensor's dtype, shape and bytes."""
    v = np.ascontiguousarray(value)
    h = hashlib.sha256(f"{v.dtype.str}{v.shape}".encode())
    h.update(v.tobytes() if v.dtype != object else repr(v.tolist()).encode())
    return h.hexdigest()


class Digests:
    """Digests memoized for the objects of one session (weights are hashed once each).

    ``global_text(name)`` says how a call of an external function is written into the digest;
    ``module`` sets it to the function's backend, that backend's version and its content.
    """

    def __init__(self, backend_version: Callable[[str], str] | None = None):
        self._constants: dict[Constant, str] = {}
        self._functions: dict[Function, str] = {}
        self.backend_version = backend_version or (lambda name: "")

    def constant(self, c: Constant) -> str:
        found = self._constants.get(c)
        if found is None:
            found = self._constants[c] = array_digest(c.value)
        return found

    def value(self, v: Any, global_text: Callable[[str], str] | None = None) -> str:
        """An attribute value as text: arrays by content, bodies by digest."""
        if isinstance(v, Function):
            return "F" + self.function(v, global_text)
        if isinstance(v, np.ndarray):
            return "A" + array_digest(v)
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(self.value(x, global_text) for x in v) + "]"
        if isinstance(v, float):
            return repr(float(v))
        return repr(v)

    def function(self, func: Function, global_text: Callable[[str], str] | None = None) -> str:
        found = self._functions.get(func) if global_text is None else None
        if found is not None:
            return found
        h = hashlib.sha256()
        index: dict[Expr, int] = {}
        for p in func.params:
            index[p] = len(index)
            h.update(f"P{_type_text(p.type)};".encode())
        for e in post_order(func.body):
            if e in index:
                continue
            index[e] = len(index)
            if isinstance(e, Var):  # a free variable (a body reading outer values)
                h.update(f"V{_type_text(e.type)};".encode())
            elif isinstance(e, Constant):
                h.update(f"C{self.constant(e)};".encode())
            elif isinstance(e, GlobalVar):
                h.update(f"G{global_text(e.name) if global_text else e.name};".encode())
            elif isinstance(e, Call):
                op = e.op
                if isinstance(op, str):
                    head = op
                elif isinstance(op, GlobalVar):
                    head = "@" + (global_text(op.name) if global_text else op.name)
                else:
                    head = "fn" + self.function(op)
                attrs = ",".join(f"{k}={self.value(v, global_text)}"
                                 for k, v in sorted(e.attrs.items()))
                args = ",".join("-" if a is None else str(index[a]) for a in e.args)
                h.update(f"{head}({args}){{{attrs}}}:{_type_text(e.type)};".encode())
            elif isinstance(e, TupleGetItem):
                h.update(f"I{index[e.tuple_value]}[{e.index}];".encode())
            elif isinstance(e, Tuple):
                h.update(f"T({','.join(str(index[f]) for f in e.fields)});".encode())
        h.update(f"R{index[func.body]};".encode())
        kept = {k: v for k, v in func.attrs.items()
                if k in ("Composite", "Compiler", "captures")}
        h.update(repr(sorted(kept.items())).encode())
        out = h.hexdigest()
        if global_text is None:
            self._functions[func] = out
        return out

    def module(self, mod: IRModule) -> str:
        """main with each external function it calls written as its backend, that backend's
        version and its content: two partitions placing the same work alike digest alike."""
        seen: dict[str, str] = {}

        def external(name: str) -> str:
            if name not in seen:
                func = mod[name]
                backend = func.attrs.get("Compiler") or ""
                seen[name] = (f"{backend}:{self.backend_version(backend) if backend else ''}:"
                              f"{self.function(func, external)}")
            return seen[name]

        return self.function(mod.main, external)
