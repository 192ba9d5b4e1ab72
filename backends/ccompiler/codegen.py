"""C for one region: one function, one block per op, buffers planned in one workspace.

    void byoc_region(const float *in_x, const float *k_w, float *out_y, char *ws)

takes the region's inputs, then the constants it reads (by pointer: weights stay out of the
source), then its outputs, which the function fills, then a workspace of ``workspace`` bytes:
the planned intermediates (``plan.py``) followed by scratch shared by all ops. Every model
string reaches the source only as a sanitized identifier or an escaped comment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from byoc.codegen import CSource, Names, comment
from byoc.errors import ByocError
from byoc.ir import Call, Constant, Expr, Function, TensorType, TupleGetItem
from byoc.ir import post_order

from . import runtime_c
from .emitter import Emit, Tensor, Unsupported
from .ops import EMITTERS, VIEW_OPS
from .plan import Plan, Storage, plan_storage
from .shapes import Key, concrete_types, key_of
from .support import is_static_input

SYMBOL = "byoc_region"
_KIND_PREFIX = {"input": "in_", "const": "k_", "output": "out_", "work": "t_"}


@dataclass(frozen=True)
class Generated:
    """A region's C, its declaration for cffi, and what calling it needs."""

    region: str  # the region's name (a model-derived string: for messages, not for C)
    source: str
    cdef: str
    constants: tuple[np.ndarray, ...]
    out_types: tuple[TensorType, ...]
    workspace: int  # bytes
    library: bool  # whether it calls runtime_c.LIBRARY (linked in)


def region_name(func: Function) -> str:
    return str(func.attrs.get("global_symbol") or "region")


def static_arg_types(func: Function) -> list[TensorType]:
    """The parameters' declared types, if all are static; else ByocError."""
    types = []
    for p in func.params:
        t = p.type
        if not isinstance(t, TensorType) or not t.is_static or t.dtype is None:
            raise ByocError(f"region {region_name(func)!r}: parameter {p.name!r} has type {t}; "
                            "its C is specialized to concrete shapes (pass arg_types)")
        types.append(t)
    return types


def emit_c(func: Function, arg_types: Sequence[TensorType] | None = None) -> str:
    """The C source of a region for ``arg_types`` (default: its parameters' static types)."""
    return generate(func, arg_types).source


def generate(func: Function, arg_types: Sequence[TensorType] | None = None) -> Generated:
    """Specialize ``func`` to ``arg_types`` and write its C."""
    if arg_types is None:
        arg_types = static_arg_types(func)
    types = concrete_types(func, arg_types)
    order = post_order(func.body)
    plan = plan_storage(func.params, func.body, order, types, _is_view, is_static_input, _label)
    names = _c_names(plan)
    body = CSource()
    ctx = Emit(body, scratch_base=plan.arena_bytes)
    ops = [e for e in order if isinstance(e, Call)]
    for call in ops:
        _emit_op(ctx, call, plan, types, names)
    for slot, k in plan.copies:
        body.line(f"memcpy({names[id(plan.outputs[slot])]}, {names[id(plan.storage[k])]}, "
                  f"{plan.outputs[slot].nbytes});")
    workspace = max(64, plan.arena_bytes + ctx.scratch_bytes)
    signature = _signature(plan, names)
    src = CSource()
    _header(src, func, ops, plan, names, arg_types, types)
    src.lines(runtime_c.render(ctx.needed))
    src.line()
    with src.block(f"void {SYMBOL}({signature})"):
        for s in sorted(plan.work, key=lambda s: s.index):
            ct = Tensor("", (), s.dtype).ctype
            src.line(f"{ct} *const {names[id(s)]} = ({ct} *)(ws + {s.offset});")
        src.lines(body.text())
    outs = tuple(types[k] for k in plan.output_keys)
    cdef = f"void {SYMBOL}({_signature(plan, names, restrict=False)});"
    return Generated(region_name(func), src.text(), cdef,
                     tuple(c.value for _, c in plan.constants), outs, workspace,
                     runtime_c.links_library(ctx.needed))


def _is_view(call: Call) -> bool:
    return call.op in VIEW_OPS


def _label(expr: Expr, index: int) -> str:
    """The ONNX name of a value, for the C identifier made from it."""
    from byoc.analysis import value_name

    if isinstance(expr, Call) and index:
        return value_name(TupleGetItem(expr, index))
    return value_name(expr) or "value"


def _c_names(plan: Plan) -> dict[int, str]:
    """A C identifier per storage, from its ONNX name, sanitized and unique."""
    spaces = {kind: Names(prefix) for kind, prefix in _KIND_PREFIX.items()}
    out: dict[int, str] = {}
    every = [*plan.inputs, *(s for s, _ in plan.constants), *plan.outputs,
             *sorted(plan.work, key=lambda s: s.index)]
    for s in every:
        if id(s) not in out:
            out[id(s)] = spaces[s.kind].unique(s.label)
    return out


def _signature(plan: Plan, names: dict[int, str], restrict: bool = True) -> str:
    r = " restrict" if restrict else ""
    parts = []
    for s in [*plan.inputs, *(s for s, _ in plan.constants)]:
        parts.append(f"const {Tensor('', (), s.dtype).ctype} *{r} {names[id(s)]}")
    for s in plan.outputs:
        parts.append(f"{Tensor('', (), s.dtype).ctype} *{r} {names[id(s)]}")
    parts.append(f"char *{r} ws")
    return ", ".join(parts)


def _header(src: CSource, func: Function, ops: list[Call], plan: Plan, names: dict[int, str],
            arg_types: Sequence[TensorType], types: dict[Key, TensorType]) -> None:
    src.comment(f"byoc ccompiler: region {region_name(func)}")
    src.comment(f"ONNX nodes ({len(ops)}):")
    for call in ops:
        src.comment(f"  {_node_label(call)}")
    for s, t in zip(plan.inputs, arg_types):
        src.comment(f"input {names[id(s)]} = {s.label}: {_fmt(t)}")
    for s, k in zip(plan.outputs, plan.output_keys):
        src.comment(f"output {names[id(s)]} = {s.label}: {_fmt(types[k])}")


def _node_label(call: Call) -> str:
    return f"{call.span.name} ({call.op})" if call.span is not None else f"({call.op})"


def _fmt(t: TensorType) -> str:
    return f"{t.dtype}[{', '.join(str(d) for d in t.shape or ())}]"


def _emit_op(ctx: Emit, call: Call, plan: Plan, types: dict[Key, TensorType],
             names: dict[int, str]) -> None:
    src = ctx.src
    n_out = len(call.type.fields) if not isinstance(call.type, TensorType) else 1
    out_storage = [plan.storage[(id(call), k)] for k in range(n_out)]
    aliased = _is_view(call) and out_storage[0] is plan.storage[key_of(call.args[0])]  # type: ignore
    if aliased and n_out == 1:
        src.line(comment(f"{_node_label(call)}: a view of its input, no code"))
        return
    emit = EMITTERS.get(call.op)  # type: ignore[arg-type]
    if emit is None:
        raise Unsupported(f"no emitter for {call.op_name}")
    src.line(comment(_node_label(call)))
    with src.block():
        ins: list[Tensor | None] = []
        for j, a in enumerate(call.args):
            if a is None:
                ins.append(None)
                continue
            t = types[key_of(a)]
            value = a.value if isinstance(a, Constant) else None
            if is_static_input(call, j):
                ins.append(Tensor("", tuple(t.shape), t.dtype, value))  # type: ignore[arg-type]
                continue
            local = f"a{j}"
            ct = Tensor("", (), t.dtype).ctype
            src.line(f"const {ct} *restrict {local} = {names[id(plan.storage[key_of(a)])]};")
            ins.append(Tensor(local, tuple(t.shape), t.dtype, value))  # type: ignore[arg-type]
        outs = []
        for k, s in enumerate(out_storage):
            t = types[(id(call), k)]
            ct = Tensor("", (), t.dtype).ctype
            src.line(f"{ct} *restrict o{k} = {names[id(s)]};")
            outs.append(Tensor(f"o{k}", tuple(t.shape), t.dtype))  # type: ignore[arg-type]
        ctx.begin_op()
        emit(ctx, call, ins, outs)

