"""C for one native region: one function per fused kernel, buffers in one planned workspace.

    void byoc_region(const float *in_x, float *out_y, const void *const *consts, char *ws)

the same entry ccompiler's regions have (so its runtime calls it), but the body calls one
function per kernel (``kernels.py``) rather than per op, and the values passed between kernels
live at offsets ``byoc.runtime.memory_plan`` gives them (an elementwise kernel may write over
an input read for the last time). Scratch for the GEMMs follows the planned buffers. Model
strings reach the C only through ``byoc.codegen``'s sanitized names and escaped comments.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from byoc.backends.ccompiler import runtime_c
from byoc.backends.ccompiler.codegen import SYMBOL, Generated, region_name, static_arg_types
from byoc.backends.ccompiler.emitter import Emit, Tensor, Unsupported
from byoc.backends.ccompiler.loops import broadcast_strides, loop_nest
from byoc.backends.ccompiler.ops import EMITTERS, VIEW_OPS
from byoc.backends.ccompiler.ops.elementwise import _expression
from byoc.backends.ccompiler.shapes import Key, concrete_types, key_of
from byoc.backends.ccompiler.support import is_static_input
from byoc.codegen import CSource, Names, c_type, comment, shorten
from byoc.ir import Call, Constant, Expr, Function, TensorType, Tuple, Var, post_order
from byoc.passes.fuse_ops import fuse_ops
from byoc.runtime.memory_plan import MemoryPlan, Step, Value, plan_steps

from .kernels import Kernel, split_groups


def _nbytes(t: TensorType) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize


class _Region:
    """Where every value of the region is, as a C expression of the entry function."""

    def __init__(self, func: Function, types: dict[Key, TensorType]):
        self.types = types
        self.names = Names("v_")
        self.ptr: dict[Key, str] = {}
        self.constants: list[np.ndarray] = []
        self.params: list[str] = []
        self.results: list[Key] = []
        self.copies: list[tuple[str, Key]] = []  # (output pointer, value) copied at the end
        for p in func.params:
            t = types[(id(p), 0)]
            name = self.names.unique("in_" + p.name)
            self.ptr[(id(p), 0)] = name
            self.params.append(f"const {c_type(t.dtype)} *{name}")
        body = func.body
        for k, f in enumerate(body.fields if isinstance(body, Tuple) else (body,)):
            t = types[key_of(f)]
            name = self.names.unique(f"out{k}")
            self.params.append(f"{c_type(t.dtype)} *{name}")
            if key_of(f) in self.ptr or key_of(f) in self.results or isinstance(f, Constant):
                self.copies.append((name, key_of(f)))
            else:
                self.ptr[key_of(f)] = name
                self.results.append(key_of(f))

    def constant(self, c: Constant) -> str:
        key = (id(c), 0)
        if key not in self.ptr:
            self.ptr[key] = f"(({c_type(c.value.dtype.name)} *)consts[{len(self.constants)}])"
            self.constants.append(c.value)
        return self.ptr[key]


def generate(func: Function, arg_types: Sequence[TensorType] | None = None) -> Generated:
    """Specialize ``func`` (constants and BatchNormalization already folded) to ``arg_types``."""
    if arg_types is None:
        arg_types = static_arg_types(func)
    types = concrete_types(func, arg_types)
    region = _Region(func, types)
    read_outside = _read_outside(func)
    kernels = split_groups(fuse_ops(func), types, read_outside)
    plan = _plan(kernels, types, region)
    for k, off in plan.offsets.items():
        region.ptr[k] = f"(({c_type(types[k].dtype)} *)(ws + {off}))"
    for kernel in kernels:  # the region's constants first: emitters add theirs after them
        for a in kernel.inputs:
            if isinstance(a, Constant) and _by_pointer(kernel, a):
                region.constant(a)
    for _, k in region.copies:
        if k not in region.ptr:
            region.constant(_const_of(func, k))
    ctx = Emit(CSource(), scratch_base=plan.arena_bytes, const_base=len(region.constants))
    body = CSource()
    for index, kernel in enumerate(kernels):
        _emit_kernel(ctx, index, kernel, region, plan, body)
    for name, k in region.copies:
        body.line(f"memcpy({name}, {region.ptr[k]}, {_nbytes(types[k])});")
    src = CSource()
    src.comment(f"byoc native: region {shorten(region_name(func))}, {len(kernels)} kernels")
    src.lines(runtime_c.render(ctx.needed | {"math"}))
    src.line("#define BYOC_NOINLINE __attribute__((noinline))")
    src.lines(ctx.src.text())
    signature = ", ".join([*region.params, "const void *const *consts", "char *ws"])
    with src.block(f"void {SYMBOL}({signature})"):
        src.lines(body.text())
    outs = func.body.fields if isinstance(func.body, Tuple) else (func.body,)
    return Generated(region_name(func), src.text(), f"void {SYMBOL}({signature});",
                     (*region.constants, *ctx.extra_constants), tuple(types[key_of(f)] for f in outs),
                     max(64, plan.arena_bytes + ctx.scratch_bytes),
                     runtime_c.links_library(ctx.needed))


def _const_of(func: Function, key: Key) -> Constant:
    return next(e for e in post_order(func.body) if id(e) == key[0])  # type: ignore[return-value]


def _read_outside(func: Function) -> set[Key]:
    """Every value some call reads or the region returns (FuseOps decides which stay inside)."""
    out: set[Key] = set()
    body = func.body
    for f in body.fields if isinstance(body, Tuple) else (body,):
        out.add(key_of(f))
    groups_of: dict[int, int] = {}
    for g, group in enumerate(fuse_ops(func)):
        for n in group.nodes:
            groups_of[id(n)] = g
    for e in post_order(func.body):
        if isinstance(e, Call):
            for a in e.args:
                if a is None or isinstance(a, (Var, Constant)):
                    continue
                producer = key_of(a)[0]
                if groups_of.get(producer) != groups_of.get(id(e)):
                    out.add(key_of(a))
    return out


def _plan(kernels: list[Kernel], types: dict[Key, TensorType], region: _Region) -> MemoryPlan:
    """The memory plan of the values kernels pass each other (results go to the outputs)."""
    steps = []
    for kern in kernels:
        writes = tuple(Value(k, _nbytes(types[k]), types[k].dtype) for k in kern.outputs
                       if k not in region.ptr)
        reads = tuple(key_of(a) for a in kern.inputs if not isinstance(a, Constant))
        # in place only for one-loop kernels whose root is planned (it is written first)
        first = bool(writes) and writes[0].key == kern.outputs[0]
        view = first and kern.kind == "op" and kern.nodes[0].op in VIEW_OPS
        steps.append(Step(reads, writes, inplace=first and kern.kind == "ewise", view=view))
    copies = [k for _, k in region.copies]
    return plan_steps(steps, copies)


def _emit_kernel(ctx: Emit, index: int, kern: Kernel, region: _Region, plan: MemoryPlan,
                 body: CSource) -> None:
    """The kernel's function (in ``ctx.src``) and its call (in ``body``)."""
    types = region.types
    params: list[str] = []
    args: list[str] = []
    tensors: dict[Key, Tensor] = {}
    aliased = _aliased(kern, plan)
    restrict = "" if aliased else " restrict"
    for j, a in enumerate(kern.inputs):
        t = types[key_of(a)]
        value = a.value if isinstance(a, Constant) else None
        if not _by_pointer(kern, a):
            tensors[key_of(a)] = Tensor("", tuple(t.shape), t.dtype, value)
            continue
        ptr = region.constant(a) if isinstance(a, Constant) else region.ptr[key_of(a)]
        params.append(f"const {c_type(t.dtype)} *{restrict} a{j}")
        args.append(ptr)
        tensors[key_of(a)] = Tensor(f"a{j}", tuple(t.shape), t.dtype, value)
    outs = []
    for j, k in enumerate(kern.outputs):
        t = types[k]
        params.append(f"{c_type(t.dtype)} *{restrict} o{j}")
        args.append(region.ptr[k])
        outs.append(Tensor(f"o{j}", tuple(t.shape), t.dtype))
    labels = ", ".join(shorten(n.span.name if n.span else n.op_name, 40) for n in kern.nodes[:6])
    label = comment(f"{kern.kind}: {labels}{' ...' if len(kern.nodes) > 6 else ''}")
    fn = f"byoc_k{index}"
    ctx.src.line(label)
    with ctx.src.block(f"static BYOC_NOINLINE void {fn}({', '.join(params)}, "
                       "const void *const *consts, char *ws)"):
        ctx.begin_op()
        if kern.kind == "op":
            _emit_op(ctx, kern.nodes[0], tensors, outs)
        else:
            _emit_fused(ctx, kern, tensors, outs, types)
    ctx.src.line()
    body.line(f"{fn}({', '.join([*args, 'consts', 'ws'])});")


def _aliased(kern: Kernel, plan: MemoryPlan) -> bool:
    outs = {plan.offsets.get(k) for k in kern.outputs} - {None}
    ins = {plan.offsets.get(key_of(a)) for a in kern.inputs} - {None}
    return bool(outs & ins)


def _by_pointer(kern: Kernel, a: Expr) -> bool:
    """Whether the kernel reads ``a`` through a pointer: not a shape-deciding input read at
    code generation, nor a one-element constant a fused loop writes as a literal."""
    if kern.kind == "op":
        call = kern.nodes[0]
        return not any(b is a and is_static_input(call, j) for j, b in enumerate(call.args))
    if kern.kind == "epilogue" and any(b is a for b in kern.nodes[0].args):
        return True  # the master's emitter wants a pointer (a conv's bias of one channel)
    return not (isinstance(a, Constant) and a.value.size == 1)


def _emit_op(ctx: Emit, call: Call, tensors: dict[Key, Tensor], outs: list[Tensor]) -> None:
    emit = EMITTERS.get(call.op)  # type: ignore[arg-type]
    if emit is None:
        raise Unsupported(f"no emitter for {call.op_name}")
    ins = [None if a is None else tensors[key_of(a)] for a in call.args]
    emit(ctx, call, ins, outs)


def _emit_fused(ctx: Emit, kern: Kernel, tensors: dict[Key, Tensor], outs: list[Tensor],
                types: dict[Key, TensorType]) -> None:
    """One loop over the root's shape computing the chain; an epilogue first runs its master
    into the root's buffer and reads it back element by element."""
    root = outs[0]
    nodes = kern.nodes
    value: dict[Key, str] = {}
    if kern.kind == "epilogue":
        master = nodes[0]
        _emit_op(ctx, master, tensors, [root])
        tensors = {**tensors, key_of(master): Tensor(root.ptr, root.shape, root.dtype)}
        nodes = nodes[1:]
    inside = {key_of(n) for n in nodes}
    loaded = list(dict.fromkeys(key_of(a) for n in nodes for a in n.args if a is not None
                                and key_of(a) not in inside and tensors[key_of(a)].ptr))
    views = [(0, o.strides) for o in outs]
    views += [(0, broadcast_strides(tensors[k].shape, root.shape)) for k in loaded]
    src = ctx.src
    with loop_nest(src, root.shape, views) as index:
        for j, k in enumerate(loaded):
            t = tensors[k]
            src.line(f"const {t.ctype} x{j} = {t.ptr}[{index[len(outs) + j]}];")
            value[k] = f"x{j}"
        for k, t in tensors.items():
            if not t.ptr and t.value is not None and t.value.size == 1:
                value[k] = t.scalar()  # type: ignore[assignment]
        for n, call in enumerate(nodes):
            ins = [None if a is None else tensors.get(key_of(a)) or _typed(types, a)
                   for a in call.args]
            out_t = types[key_of(call)]
            expr = _expression(call, ins, Tensor("", tuple(out_t.shape), out_t.dtype))
            xs = ["" if a is None else value[key_of(a)] for a in call.args]
            src.line(f"const {c_type(out_t.dtype)} v{n} = {expr(xs)};")
            value[key_of(call)] = f"v{n}"
        for j, (o, k) in enumerate(zip(outs, kern.outputs)):
            src.line(f"{o.ptr}[{index[j]}] = {value[k]};")


def _typed(types: dict[Key, TensorType], a: Expr) -> Tensor:
    t = types[key_of(a)]
    return Tensor("", tuple(t.shape), t.dtype)
