"""C for one region: one entry function calling one function per op, buffers planned in one
workspace.

    void byoc_region(const float *in_x, float *out_y, const void *const *consts, char *ws)

takes the region's inputs, then its outputs (which it fills), then a table of pointers to the
constants it reads (weights stay out of the source and its hash), then a workspace of
``workspace`` bytes: the planned intermediates (``plan.py``) followed by scratch shared by all
ops. A big region's entry is cut into parts and takes many inputs and outputs in one array
(``entry.py``). Every model string reaches the source only as a sanitized identifier or an
escaped comment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from byoc.analysis import value_name
from byoc.codegen import CSource, Names, c_type, comment, shorten
from byoc.errors import ByocError
from byoc.ir import Call, Constant, Expr, Function, TensorType, TupleGetItem, post_order

from . import runtime_c
from .emitter import Emit, Tensor, Unsupported
from .entry import Arg, write_entry
from .ops import EMITTERS, VIEW_OPS
from .plan import Plan, plan_storage
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
    # Built for --profile: each kernel's label and ONNX nodes, and the byte offset in the
    # workspace of the clock read before the first kernel and after each (-1: not profiled).
    kernels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    stamps: int = -1
    arg_table: bool = False  # inputs and outputs passed in one array (entry.MAX_ARGS)


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


def prepared(func: Function) -> Function:
    """``func`` as the backend generates C for it: constant calls folded, variadic ops of many
    inputs made trees (``wide.py``)."""
    from .fold import fold_constants
    from .wide import split_wide_ops

    return split_wide_ops(fold_constants(func))


def emit_c(func: Function, arg_types: Sequence[TensorType] | None = None) -> str:
    """The C source of a region for ``arg_types`` (default: its parameters' static types),
    as the backend compiles it."""
    return generate(prepared(func), arg_types).source


class Stamps:
    """``--profile``: the clock read (``byoc_rt->now()``) before a region's first kernel and
    after each, into slots at the end of its workspace; the runtime reads them after the call.
    Code built without profiling has none of it."""

    def __init__(self, on: bool):
        self.on = on
        self.kernels: list[tuple[str, tuple[str, ...]]] = []

    def after(self, body: CSource, label: str, nodes: Sequence[str]) -> None:
        """A kernel's call was just written into ``body``."""
        if self.on:
            self.kernels.append((label, tuple(nodes)))
            body.line(f"byoc_stamps[{len(self.kernels)}] = byoc_rt->now();")

    def place(self, workspace: int) -> tuple[int, int]:
        """(the workspace's size with the slots, their byte offset or -1)."""
        if not self.on:
            return workspace, -1
        offset = (workspace + 63) // 64 * 64
        return offset + 8 * (len(self.kernels) + 1), offset

    def locals(self, offset: int) -> dict[str, str]:
        """The entry's local for the slots (``entry.write_entry``'s ``locals_``)."""
        if not self.on:
            return {}
        return {"byoc_stamps": f"long long *const byoc_stamps = (long long *)(ws + {offset});"}

    def first(self) -> list[str]:
        """The entry's first statements."""
        return ["byoc_stamps[0] = byoc_rt->now();"] if self.on else []


def generate(func: Function, arg_types: Sequence[TensorType] | None = None,
             profile: bool = False) -> Generated:
    """Specialize ``func`` to ``arg_types`` and write its C (``profile``: with ``Stamps``)."""
    if arg_types is None:
        arg_types = static_arg_types(func)
    types = concrete_types(func, arg_types)
    order = post_order(func.body)
    plan = plan_storage(func.params, func.body, order, types, _is_view, is_static_input, _label)
    names = _c_names(plan)
    ctx = Emit(CSource(), scratch_base=plan.arena_bytes, const_base=len(plan.constants))
    ops = [e for e in order if isinstance(e, Call)]
    stamps = Stamps(profile)
    functions: dict[tuple[str, str], str] = {}
    body = CSource()
    for index, call in enumerate(ops):
        line = _emit_op(ctx, index, call, plan, types, names, functions)
        if line:
            body.line(line)
        stamps.after(body, *kernel_names([call]))
    for slot, k in plan.copies:
        body.line(f"memcpy({names[id(plan.outputs[slot])]}, {names[id(plan.storage[k])]}, "
                  f"{plan.outputs[slot].nbytes});")
    workspace, at = stamps.place(max(64, plan.arena_bytes + ctx.scratch_bytes))
    src = CSource()
    _header(src, func, ops, plan, names, arg_types, types)
    src.lines(runtime_c.render(ctx.needed))
    src.line("#define BYOC_NOINLINE __attribute__((noinline))")
    src.lines(ctx.protos.text())  # the ops' parallel tasks, written after the ops
    src.line()
    src.lines(ctx.src.text())
    src.lines(ctx.tasks.text())
    src.line()
    locals_ = stamps.locals(at)
    for s, _ in plan.constants:
        ct = c_type(s.dtype)
        locals_[names[id(s)]] = f"const {ct} *const {names[id(s)]} = (const {ct} *)consts[{s.index}];"
    for s in sorted(plan.work, key=lambda s: s.index):
        ct = c_type(s.dtype)
        locals_[names[id(s)]] = f"{ct} *const {names[id(s)]} = ({ct} *)(ws + {s.offset});"
    args = [Arg(f"const {c_type(s.dtype)} *", names[id(s)]) for s in plan.inputs]
    args += [Arg(f"{c_type(s.dtype)} *", names[id(s)]) for s in plan.outputs]
    lines = [*stamps.first(), *body.text().strip("\n").splitlines()]
    cdef, table = write_entry(src, SYMBOL, args, locals_, lines)
    outs = tuple(types[k] for k in plan.output_keys)
    constants = (*(c.value for _, c in plan.constants), *ctx.extra_constants)
    return Generated(region_name(func), src.text(), cdef, tuple(constants), outs, workspace,
                     runtime_c.links_library(ctx.needed), tuple(stamps.kernels), at, table)


def _is_view(call: Call) -> bool:
    return call.op in VIEW_OPS


def _label(expr: Expr, index: int) -> str:
    """The ONNX name of a value, for the C identifier made from it."""
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


def _header(src: CSource, func: Function, ops: list[Call], plan: Plan, names: dict[int, str],
            arg_types: Sequence[TensorType], types: dict[Key, TensorType]) -> None:
    src.comment(f"byoc ccompiler: region {shorten(region_name(func))}")
    node_list(src, func, ops)
    for s, t in zip(plan.inputs, arg_types):
        src.comment(f"input {names[id(s)]} = {shorten(s.label)}: {_fmt(t)}")
    for s, k in zip(plan.outputs, plan.output_keys):
        src.comment(f"output {names[id(s)]} = {shorten(s.label)}: {_fmt(types[k])}")


def node_list(src: CSource, func: Function, ops: Sequence[Call]) -> None:
    """The header lines naming the ONNX nodes a region's C came from (escaped comments): all
    of the region's, as ``onnx_nodes`` recorded them before folding (``node_labels``), those
    missing from ``ops`` (the calls the C computes) marked as folded: a reader looking for a
    node's code learns it has none."""
    computed = _labels(ops)
    labels = func.attrs.get("onnx_nodes") or computed
    generated = set(_computed_labels(ops))
    folded = sum(label not in generated for label in labels)
    src.comment(f"ONNX nodes ({len(labels)}" + (
        f"; {folded} folded before code generation: constant for these shapes, or merged "
        "into another node's weights" if folded else "") + "):")
    for label in labels:
        src.comment(f"  {label}" + ("  [folded]" if label not in generated else ""))


def kernel_names(calls: Sequence[Call]) -> tuple[str, list[str]]:
    """A kernel's label (its ops joined by "+") and the names of the ONNX nodes it holds, in
    run order: the nodes a call holds folded (``Span.folded``: a Conv in a BatchNormalization
    folded into its weights) before its own, labelled by their ONNX op types ("Conv+
    BatchNormalization+Relu"); a node written as several calls (a BatchNormalization as Mul
    and Add) named once, by its ONNX op type."""
    ops: list[str] = []
    nodes: list[str] = []
    last = None
    for call in calls:
        span = call.span
        if span is None:
            ops.append(call.op_name)
        elif span == last:  # another call of the same ONNX node
            ops[-1] = span.op_type or ops[-1]
        else:
            for f in span.folded:
                ops.append(f.op_type or "?")
                nodes.append(f.name)
            ops.append(span.op_type if span.folded and span.op_type else call.op_name)
            nodes.append(span.name)
        last = span
    return "+".join(ops), nodes


def node_labels(func: Function) -> list[str]:
    """``name (Op)`` of every ONNX node of a region, in run order (composites opened)."""
    return _labels(e for e in post_order(func.body) if isinstance(e, Call))


def _labels(calls: Iterable[Call]) -> list[str]:
    out = []
    for call in calls:
        out.extend(node_labels(call.op) if isinstance(call.op, Function) else [_node_label(call)])
    return out


def _node_label(call: Call) -> str:
    return f"{shorten(call.span.name)} ({call.op})" if call.span is not None else f"({call.op})"


def _computed_labels(calls: Sequence[Call]) -> list[str]:
    """``_labels``, with the ONNX nodes the calls compute under other ops: a node written as
    other ops (a BatchNormalization as Mul and Add), and the nodes a call holds folded
    (``Span.folded``: a Conv that took a BatchNormalization into its weights computes the
    Conv, the BatchNormalization has no code of its own)."""
    more = []
    for call in calls:
        span = call.span
        if span is not None and span.folded:
            more += [f"{shorten(f.name)} ({f.op_type})" for f in span.folded]
        elif span is not None and span.op_type and span.op_type != call.op:
            more.append(f"{shorten(span.name)} ({span.op_type})")
    return _labels(calls) + more


def _fmt(t: TensorType) -> str:
    return f"{t.dtype}[{', '.join(str(d) for d in t.shape or ())}]"


def _emit_op(ctx: Emit, index: int, call: Call, plan: Plan, types: dict[Key, TensorType],
             names: dict[int, str], functions: dict[tuple[str, str], str]) -> str:
    """The op's code as a function of its tensors (in ``ctx.src``); its call, for the entry.

    One function per op rather than one block each in a single function: compilers take time
    superlinear in a function's size, and a region can hold a thousand ops. An op whose
    function would be the same as an earlier one's (the same op on the same shapes: a model's
    repeated layers) calls that one (``functions``: signature and body -> name).
    """
    n_out = len(call.type.fields) if not isinstance(call.type, TensorType) else 1
    out_storage = [plan.storage[(call, k)] for k in range(n_out)]
    source = call.args[0]
    aliased = (_is_view(call) and source is not None
               and out_storage[0] is plan.storage[key_of(source)])
    if aliased and n_out == 1:
        return comment(f"{_node_label(call)}: a view of its input, no code")
    emit = EMITTERS.get(call.op)  # type: ignore[arg-type]
    if emit is None:
        raise Unsupported(f"no emitter for {call.op_name}")
    params, args = [], []
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
        params.append(f"const {c_type(t.dtype)} *restrict a{j}")
        args.append(names[id(plan.storage[key_of(a)])])
        ins.append(Tensor(f"a{j}", tuple(t.shape), t.dtype, value))  # type: ignore[arg-type]
    outs = []
    for k, s in enumerate(out_storage):
        t = types[(call, k)]
        if k == 0 and aliased:  # a view that shares its input (Dropout, with its mask to fill)
            outs.append(Tensor("a0", tuple(t.shape), t.dtype))  # type: ignore[arg-type]
            continue
        params.append(f"{c_type(t.dtype)} *restrict o{k}")
        args.append(names[id(s)])
        outs.append(Tensor(f"o{k}", tuple(t.shape), t.dtype))  # type: ignore[arg-type]
    label = comment(_node_label(call))
    fn = f"byoc_op{index}"
    params += ["const void *const *consts", "char *ws"]
    outer, ctx.src = ctx.src, CSource()
    try:
        with ctx.src.block():
            ctx.begin_op(fn, params)
            emit(ctx, call, ins, outs)
        body = ctx.src.text()
    finally:
        ctx.src = outer
    signature = ", ".join(params)
    if (signature, body) in functions:  # the same C as an earlier op's (its parallel tasks,
        fn = functions[(signature, body)]  # named after it, would make the body differ)
    else:
        functions[(signature, body)] = fn
        outer.line(label)
        outer.line(f"static BYOC_NOINLINE void {fn}({signature})")
        outer.lines(body)
        outer.line()
    return f"{fn}({', '.join([*args, 'consts', 'ws'])});  {label}"
