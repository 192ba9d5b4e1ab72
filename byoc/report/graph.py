"""The graph a report draws: every ONNX node of a partitioned module, where it runs, and the boxes
around them (regions, control-flow nodes and their bodies), as JSON-ready lists.

    view = graph_view(part, dims={"batch": 4})   # part = byoc.partition(mod, backends=[...])
    {"nodes": [{"id", "kind", "name", "op", "where", "box", "attrs", "inputs", "outputs",
                "reason"}],
     "edges": [[from id, to id], ...],
     "boxes": [{"id", "kind", "name", "where", "parent", "size", ...}]}

A region call of main is opened up: its ONNX nodes are drawn, in a box of kind "region". An If,
Loop or Scan is a box of kind "control" holding the node itself (where its inputs enter), one box
of kind "body" per body, and an "end" node where its outputs leave; a viewer that folds the box
draws the node alone. Graph inputs and outputs are nodes of kind "input" and "output". Boxes
come parents first. Edges join producer and consumer nodes (one per pair); every value a body
reads enters through its control-flow node (captured values are arguments of that node too).

Every node and box is visited once, so the view is linear in the size of the module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis import bodies, node_key, value_name
from ..ir import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    IRModule,
    OpaqueType,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Type,
    Var,
    post_order,
)

# What produced a value: the ids of its producer nodes, or one such tuple per field of a tuple.
Prod = tuple[int, ...] | list

_PASS_THROUGH = {"device_copy", "annotation.compiler_begin", "annotation.compiler_end"}


def graph_view(mod: IRModule, reasons: dict[str, str] | None = None,
               dims: dict[str, int] | None = None) -> dict:
    """The drawable graph of ``mod`` (partitioned or not); ``reasons`` says why each host node
    stayed there (``byoc.explain``); ``dims`` gives values to symbolic dims in the shapes shown."""
    return _View(mod, reasons or {}, dims or {}).build()


class _View:
    def __init__(self, mod: IRModule, reasons: dict[str, str], dims: dict[str, int]):
        self.mod, self.reasons, self.dims = mod, reasons, dims
        self.nodes: list[dict] = []
        self.edges: dict[tuple[int, int], None] = {}  # ordered and unique
        self.boxes: list[dict] = []
        self.names: dict[Var, str] = {}  # parameters of inner functions -> the outer value name

    def build(self) -> dict:
        main = self.mod.main
        env: dict[Expr, Prod] = {}
        for p in main.params:
            env[p] = (self._node("input", p.name, "input", None, "host",
                                 outputs=[self._value(p.name, p.type)]),)
        out = self._function(main, env, None, "host")
        body = main.body
        fields = body.fields if isinstance(body, Tuple) and len(
            main.attrs.get("output_names") or ()) == len(body.fields) else (body,)
        prods = out if isinstance(out, list) and len(fields) > 1 else [out]
        out_names = list(main.attrs.get("output_names") or [value_name(body)])
        for k, (field, prod) in enumerate(zip(fields, prods)):
            name = out_names[k] if k < len(out_names) else value_name(field)
            i = self._node("output", name, "output", None, "host",
                           inputs=[self._value(name, field.type)])
            self._edges(prod, i)
        for box in self.boxes:
            box["size"] = 0
        for n in self.nodes:  # op nodes per box, counted in every enclosing box
            if n["kind"] == "op":
                b = n["box"]
                if b is not None and self.boxes[b].get("node") == n["id"]:
                    b = self.boxes[b]["parent"]  # a control-flow node is not in its bodies
                while b is not None:
                    self.boxes[b]["size"] += 1
                    b = self.boxes[b]["parent"]
        return {"nodes": self.nodes, "edges": [list(e) for e in self.edges], "boxes": self.boxes}

    # --- one function: main, a region, a composite or a body --------------------------------

    def _function(self, func: Function, env: dict[Expr, Prod], box: int | None,
                  where: str) -> Prod:
        prods: dict[Expr, Prod] = {}
        for e in post_order(func.body):
            if isinstance(e, Var):
                prods[e] = env.get(e, ())
            elif isinstance(e, Constant):
                prods[e] = ()
            elif isinstance(e, Tuple):
                prods[e] = [prods[f] for f in e.fields]
            elif isinstance(e, TupleGetItem):
                p = prods[e.tuple_value]
                prods[e] = p[e.index] if isinstance(p, list) and e.index < len(p) else p
            elif isinstance(e, Call):
                prods[e] = self._call(e, prods, box, where)
        return prods[func.body]

    def _call(self, call: Call, prods: dict[Expr, Prod], box: int | None, where: str) -> Prod:
        args = [a for a in call.args if a is not None]
        if isinstance(call.op, GlobalVar):
            func = self.mod.functions.get(call.op.name)
            if func is None:
                return ()
            backend = func.attrs.get("Compiler")
            if backend:
                box = self._box("region", call.op.name, box, str(backend))
                where = str(backend)
            return self._enter(func, call.args, prods, box, where)
        if isinstance(call.op, Function):  # a composite: its ONNX nodes, in the same box
            return self._enter(call.op, call.args, prods, box, where)
        if call.op in _PASS_THROUGH:
            return _flat(prods[args[0]]) if args else ()
        found = bodies(call)
        key = node_key(call)
        control = self._box("control", key, box, where) if found else None
        i = self._node("op", key, call.op_name, box if control is None else control, where,
                       call=call)
        for a in args:
            self._edges(prods[a], i)
        if control is None:
            return (i,)
        self.boxes[control]["node"] = i
        end = self._node("end", key, "end", control, where)
        self.boxes[control]["end"] = end
        self._edges((i,), end)
        for attr, body in found:
            inner = self._box("body", attr, control, where)
            # Every value enters the body through the node, captured ones too: the node's
            # arguments include them, and the box stays closed to edges from outside.
            n_caps = int(body.attrs.get("captures", 0))
            env: dict[Expr, Prod] = {p: (i,) for p in body.params}
            for p, a in zip(body.params[len(body.params) - n_caps:],
                            call.args[len(call.args) - n_caps:]):
                if a is not None:
                    self.names[p] = self._name(a)
            self._edges(self._function(body, env, inner, where), end)
        return (end,)

    def _enter(self, func: Function, args: tuple, prods: dict[Expr, Prod], box: int | None,
               where: str) -> Prod:
        """``func`` called with ``args``: its params stand for the caller's values and names."""
        env: dict[Expr, Prod] = {}
        for p, a in zip(func.params, [a for a in args if a is not None]):
            env[p] = prods[a]
            self.names[p] = self._name(a)
        return self._function(func, env, box, where)

    # --- records ----------------------------------------------------------------------------

    def _node(self, kind: str, name: str, op: str, box: int | None, where: str,
              call: Call | None = None, inputs: list | None = None, outputs: list | None = None) -> int:
        node: dict[str, Any] = {"id": len(self.nodes), "kind": kind, "name": name, "op": op,
                                "where": where, "box": box}
        if call is not None:
            node["attrs"] = [[k, short_attr(v)] for k, v in call.attrs.items()]
            node["inputs"] = [self._value("", None) if a is None else
                              self._value(self._name(a), a.type, isinstance(a, Constant))
                              for a in call.args]
            outs = call.span.outputs if call.span is not None else ()
            types = call.type.fields if isinstance(call.type, TupleType) else (call.type,)
            node["outputs"] = [self._value(outs[k] if k < len(outs) else "", t)
                               for k, t in enumerate(types)]
            if where == "host" and name in self.reasons:
                node["reason"] = self.reasons[name]
        else:
            node["attrs"] = []
            node["inputs"] = inputs or []
            node["outputs"] = outputs or []
        self.nodes.append(node)
        return node["id"]

    def _box(self, kind: str, name: str, parent: int | None, where: str) -> int:
        self.boxes.append({"id": len(self.boxes), "kind": kind, "name": name, "where": where,
                           "parent": parent})
        return len(self.boxes) - 1

    def _edges(self, prod: Prod, to: int) -> None:
        for src in _flat(prod):
            if src != to:
                self.edges[(src, to)] = None

    def _value(self, name: str, t: Type | None, constant: bool = False) -> list:
        """[ONNX value name, "float32[1,3,32,32]", is a constant]."""
        return [name, "" if t is None else type_text(t, self.dims), constant]

    def _name(self, expr: Expr) -> str:
        """The ONNX name of a value; a parameter of a region, composite or body is named as the
        value its caller passed."""
        if isinstance(expr, Var) and expr in self.names:
            return self.names[expr]
        return value_name(expr)


def _flat(prod: Prod) -> tuple[int, ...]:
    if not isinstance(prod, list):
        return prod
    out: list[int] = []
    stack = [prod]
    while stack:
        p = stack.pop()
        if isinstance(p, list):
            stack.extend(reversed(p))
        else:
            out.extend(p)
    return tuple(out)


def type_text(t: Type, dims: dict[str, int] | None = None) -> str:
    """``float32[batch,3,32,32]`` (a symbolic dim by its value in ``dims`` if given there)."""
    if isinstance(t, TupleType):
        return "(" + ", ".join(type_text(f, dims) for f in t.fields) + ")"
    if isinstance(t, OpaqueType):
        return t.name
    if not isinstance(t, TensorType):
        return str(t)
    dtype = t.dtype or "?"
    if t.shape is None:
        return f"{dtype}[?]"
    dims = dims or {}
    shown = ["?" if d is None else str(dims.get(d, d)) if isinstance(d, str) else str(d)
             for d in t.shape]
    return f"{dtype}[{','.join(shown)}]"


def short_attr(value: Any, width: int = 60) -> str:
    """An attribute value in a few characters: ``[1,1,1,1]``, ``'NOTSET'``, ``float32[64]``."""
    if isinstance(value, Function):
        n = sum(1 for e in post_order(value.body) if isinstance(e, Call))
        return f"body of {n} node(s)"
    if isinstance(value, np.ndarray):
        text = f"{value.dtype.name}[{','.join(map(str, value.shape))}]"
        if value.size <= 4:
            text += " " + np.array2string(value.reshape(-1), separator=",", threshold=4)
    elif isinstance(value, bytes):
        text = repr(value)
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, (list, tuple)):
        text = "[" + ",".join(short_attr(v, width) for v in value[:16]) + \
            (f",... ({len(value)})" if len(value) > 16 else "") + "]"
    elif isinstance(value, str):
        text = repr(value)
    else:
        text = str(value)
    return text if len(text) <= width else text[:width - 3] + "..."
