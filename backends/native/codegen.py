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
from byoc.backends.ccompiler.codegen import (
    SYMBOL,
    Generated,
    Stamps,
    kernel_names,
    node_list,
    region_name,
    static_arg_types,
)
from byoc.backends.ccompiler.emitter import Emit, Tensor, Unsupported
from byoc.backends.ccompiler.entry import Arg, write_entry
from byoc.backends.ccompiler.loops import (
    broadcast_strides,
    coalesce,
    contiguous_strides,
    loop_nest,
)
from byoc.backends.ccompiler.ops import EMITTERS, VIEW_OPS
from byoc.backends.ccompiler.ops.elementwise import cost, expression
from byoc.backends.ccompiler.ops.reduce import Prologue, emit_reduce
from byoc.backends.ccompiler.shapes import Key, concrete_types, key_of
from byoc.backends.ccompiler.support import is_static_input

from byoc.codegen import CSource, Names, c_type, comment, shorten
from byoc.ir import Call, Constant, Expr, Function, TensorType, Tuple, Var, post_order
from byoc.passes.fuse_ops import Group, fuse_ops
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
        self.args: list[Arg] = []  # the entry's inputs and outputs
        self.results: list[Key] = []
        self.copies: list[tuple[str, Key]] = []  # (output pointer, value) copied at the end
        for p in func.params:
            t = types[(p, 0)]
            name = self.names.unique("in_" + p.name)
            self.ptr[(p, 0)] = name
            self.args.append(Arg(f"const {c_type(t.dtype)} *", name, restrict=False))
        body = func.body
        for k, f in enumerate(body.fields if isinstance(body, Tuple) else (body,)):
            t = types[key_of(f)]
            name = self.names.unique(f"out{k}")
            self.args.append(Arg(f"{c_type(t.dtype)} *", name, restrict=False))
            if key_of(f) in self.ptr or key_of(f) in self.results or isinstance(f, Constant):
                self.copies.append((name, key_of(f)))
            else:
                self.ptr[key_of(f)] = name
                self.results.append(key_of(f))

    def constant(self, c: Constant) -> str:
        key = (c, 0)
        if key not in self.ptr:
            self.ptr[key] = f"(({c_type(c.value.dtype.name)} *)consts[{len(self.constants)}])"
            self.constants.append(c.value)
        return self.ptr[key]


def generate(func: Function, arg_types: Sequence[TensorType] | None = None,
             profile: bool = False) -> Generated:
    """Specialize ``func`` (constants and BatchNormalization already folded) to ``arg_types``
    (``profile``: each kernel timed, see ccompiler's ``Stamps``)."""
    if arg_types is None:
        arg_types = static_arg_types(func)
    types = concrete_types(func, arg_types)
    region = _Region(func, types)
    groups = fuse_ops(func)
    kernels = split_groups(groups, types, _read_outside(func, groups))
    gathered = _concat_in_place(kernels, types, region)
    plan = _plan(kernels, types, region, gathered)
    for k, off in plan.offsets.items():
        region.ptr[k] = f"(({c_type(types[k].dtype)} *)(ws + {off}))"
    for k, (whole, at) in gathered.items():  # a Concat's input: a slice of its output
        region.ptr[k] = f"({region.ptr[whole]} + {at})"
    for kernel in kernels:  # the region's constants first: emitters add theirs after them
        for a in kernel.inputs:
            if isinstance(a, Constant) and _by_pointer(kernel, a):
                region.constant(a)
    for _, k in region.copies:
        if k not in region.ptr:
            region.constant(k[0])  # type: ignore[arg-type]  # a key holds its node
    ctx = Emit(CSource(), scratch_base=plan.arena_bytes, const_base=len(region.constants))
    body = CSource()
    stamps = Stamps(profile)
    for index, kernel in enumerate(kernels):
        if any(k in gathered for a in kernel.inputs for k in [key_of(a)]) and \
                kernel.nodes[0].op == "Concat":
            body.line(comment(f"{kernel.nodes[0].op_name}: its inputs were written in place"))
            continue
        _emit_kernel(ctx, index, kernel, region, plan, body)
        stamps.after(body, *kernel_names(kernel.nodes))
    for name, k in region.copies:
        body.line(f"memcpy({name}, {region.ptr[k]}, {_nbytes(types[k])});")
    src = CSource()
    src.comment(f"byoc native: region {shorten(region_name(func))}, {len(kernels)} kernels")
    node_list(src, func, [e for e in post_order(func.body) if isinstance(e, Call)])
    src.lines(runtime_c.render(ctx.needed | {"math"}))
    src.line("#define BYOC_NOINLINE __attribute__((noinline))")
    src.lines(ctx.protos.text())  # the kernels' parallel tasks, written after the kernels
    src.lines(ctx.src.text())
    src.lines(ctx.tasks.text())
    workspace, at = stamps.place(max(64, plan.arena_bytes + ctx.scratch_bytes))
    lines = [*stamps.first(), *body.text().strip("\n").splitlines()]
    cdef, table = write_entry(src, SYMBOL, region.args, stamps.locals(at), lines)
    outs = func.body.fields if isinstance(func.body, Tuple) else (func.body,)
    return Generated(region_name(func), src.text(), cdef,
                     (*region.constants, *ctx.extra_constants), tuple(types[key_of(f)] for f in outs),
                     workspace, runtime_c.links_library(ctx.needed), tuple(stamps.kernels), at,
                     table)


def _read_outside(func: Function, groups: list[Group]) -> set[Key]:
    """Every value some call reads or the region returns (FuseOps decides which stay inside)."""
    out: set[Key] = set()
    body = func.body
    for f in body.fields if isinstance(body, Tuple) else (body,):
        out.add(key_of(f))
    groups_of: dict[Expr, int] = {}
    for g, group in enumerate(groups):
        for n in group.nodes:
            groups_of[n] = g
    for e in post_order(func.body):
        if isinstance(e, Call):
            for a in e.args:
                if a is None or isinstance(a, (Var, Constant)):
                    continue
                producer = key_of(a)[0]
                if groups_of.get(producer) != groups_of.get(e):
                    out.add(key_of(a))
    return out


def _concat_in_place(kernels: list[Kernel], types: dict[Key, TensorType], region: _Region
                     ) -> dict[Key, tuple[Key, int]]:
    """Concat inputs their producers can write straight into the Concat's output (a fire
    module's two expands, an inception block's branches): ``{input: (output, element
    offset)}``. Only where the inputs are contiguous slices of the output (nothing outside the
    axis but 1s), each is a kernel's root that only the Concat reads, and none is a view."""
    producer = {kern.outputs[0]: kern for kern in kernels if kern.outputs}
    readers: dict[Key, int] = {}
    for kern in kernels:
        for a in kern.inputs:
            readers[key_of(a)] = readers.get(key_of(a), 0) + 1
    for _, k in region.copies:
        readers[k] = readers.get(k, 0) + 1
    out: dict[Key, tuple[Key, int]] = {}
    for kern in kernels:
        call = kern.nodes[0]
        if kern.kind != "op" or call.op != "Concat":
            continue
        t = types[kern.outputs[0]]
        axis = int(call.attrs.get("axis", 0)) % max(1, len(t.shape))
        keys = [key_of(a) for a in call.args if a is not None]
        if int(np.prod(t.shape[:axis], dtype=np.int64)) != 1 or len(set(keys)) != len(keys):
            continue
        ok = all(k in producer and readers.get(k) == 1 and k not in region.ptr
                 and types[k].dtype == t.dtype and k not in out
                 and not (producer[k].kind == "op" and producer[k].nodes[0].op in VIEW_OPS)
                 and producer[k].nodes[0].op != "Concat"  # itself perhaps written in place
                 for k in keys)
        if ok:
            at = 0
            for k in keys:
                out[k] = (kern.outputs[0], at)
                at += int(np.prod(types[k].shape, dtype=np.int64))
    return out


def _plan(kernels: list[Kernel], types: dict[Key, TensorType], region: _Region,
          gathered: dict[Key, tuple[Key, int]]) -> MemoryPlan:
    """The memory plan of the values kernels pass each other (results go to the outputs).
    A Concat's output written in place (``gathered``) is born at its first producer, which
    writes it; the others read it (so that it stays alive), the Concat itself is nothing."""
    first: dict[Key, int] = {}
    for j, kern in enumerate(kernels):
        for k in kern.outputs:
            if k in gathered:
                first.setdefault(gathered[k][0], j)
    steps = []
    for j, kern in enumerate(kernels):
        if kern.kind == "op" and kern.nodes[0].op == "Concat" and kern.inputs and \
                key_of(kern.inputs[0]) in gathered:
            steps.append(Step((), ()))
            continue
        whole = [gathered[k][0] for k in kern.outputs if k in gathered]
        writes = tuple(Value(k, _nbytes(types[k]), types[k].dtype) for k in kern.outputs
                       if k not in region.ptr and k not in gathered)
        writes += tuple(Value(w, _nbytes(types[w]), types[w].dtype) for w in whole
                        if first[w] == j and w not in region.ptr)
        reads = tuple(key_of(a) for a in kern.inputs if not isinstance(a, Constant))
        reads += tuple(w for w in whole if first[w] != j and w not in region.ptr)
        # in place only for one-loop kernels whose root is planned (it is written first)
        root = bool(writes) and writes[0].key == kern.outputs[0]
        view = root and kern.kind == "op" and kern.nodes[0].op in VIEW_OPS
        steps.append(Step(reads, writes, inplace=root and kern.kind == "ewise", view=view))
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
    if _view_in_place(kern, plan):  # its output is its input's buffer: nothing to copy
        outs[0] = Tensor(tensors[key_of(kern.inputs[0])].ptr, outs[0].shape, outs[0].dtype)
    held = kernel_names(kern.nodes)[1] or [n.op_name for n in kern.nodes]
    labels = ", ".join(shorten(n, 40) for n in held[:6])
    label = comment(f"{kern.kind}: {labels}{' ...' if len(held) > 6 else ''}")
    fn = f"byoc_k{index}"
    tile = _emit_tile_epilogue(ctx.src, fn, kern, tensors, outs, types) \
        if kern.kind == "epilogue" else None
    ctx.src.line(label)
    params += ["const void *const *consts", "char *ws"]
    with ctx.src.block(f"static BYOC_NOINLINE void {fn}({', '.join(params)})"):
        ctx.begin_op(fn, params)
        if kern.kind == "op":
            _emit_op(ctx, kern.nodes[0], tensors, outs)
        else:
            _emit_fused(ctx, kern, tensors, outs, types, tile)
    ctx.src.line()
    body.line(f"{fn}({', '.join([*args, 'consts', 'ws'])});")


def _view_in_place(kern: Kernel, plan: MemoryPlan) -> bool:
    """A view op (Dropout with its mask, say) the plan gave its input's buffer: the emitter
    would otherwise copy the buffer onto itself."""
    if kern.kind != "op" or kern.nodes[0].op not in VIEW_OPS or not kern.inputs:
        return False
    at = plan.offsets.get(kern.outputs[0])
    return at is not None and at == plan.offsets.get(key_of(kern.inputs[0]))


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


def _emit_op(ctx: Emit, call: Call, tensors: dict[Key, Tensor], outs: list[Tensor],
             **epilogue: str) -> bool:
    """The op by its ccompiler emitter; a GEMM's ``epilogue=`` is passed on (True if taken)."""
    emit = EMITTERS.get(call.op)  # type: ignore[arg-type]
    if emit is None:
        raise Unsupported(f"no emitter for {call.op_name}")
    ins = [None if a is None else tensors[key_of(a)] for a in call.args]
    return bool(emit(ctx, call, ins, outs, **epilogue))


def _emit_fused(ctx: Emit, kern: Kernel, tensors: dict[Key, Tensor], outs: list[Tensor],
                types: dict[Key, TensorType], tile: tuple[str, list[str]] | None = None) -> None:
    """One loop over the root's shape computing the chain. An epilogue's master runs into the
    root's buffer first, with ``tile`` (the tile epilogue's function and what it reads) handed
    to its GEMM; when it takes it, nothing is left to do, else the chain reads the root back."""
    root = outs[0]
    nodes = kern.nodes
    if kern.kind == "reduce":
        _emit_reduce(ctx, kern, tensors, outs, types)
        return
    if kern.kind == "epilogue":
        master = nodes[0]
        epilogue = {}
        if tile is not None:
            fn, pointers = tile
            ctx.need("gemm")  # byoc_epi's declaration (a depthwise master alone lacked it)
            ctx.declare(f"const void *const epi_args[] = {{{', '.join(pointers)}}};")
            ctx.declare(f"const byoc_epi epi = {{{fn}, epi_args}};")
            epilogue = {"epilogue": "&epi"}
        if _emit_op(ctx, master, tensors, [root], **epilogue) and tile is not None:
            return
        tensors = {**tensors, key_of(master): Tensor(root.ptr, root.shape, root.dtype)}
        nodes = nodes[1:]
    loaded = _loaded(nodes, tensors)
    views = [(0, o.strides) for o in outs]
    views += [(0, broadcast_strides(tensors[k].shape, root.shape)) for k in loaded]
    src = ctx.src
    work = sum(map(cost, nodes))
    with loop_nest(src, root.shape, views, par=ctx, cost=work) as index:
        value = {k: f"x{j}" for j, k in enumerate(loaded)}
        for j, k in enumerate(loaded):
            src.line(f"const {tensors[k].ctype} x{j} = {tensors[k].ptr}[{index[len(outs) + j]}];")
        _chain(src, nodes, tensors, value, types)
        for j, (o, k) in enumerate(zip(outs, kern.outputs)):
            src.line(f"{o.ptr}[{index[j]}] = {value[k]};")


def _emit_reduce(ctx: Emit, kern: Kernel, tensors: dict[Key, Tensor], outs: list[Tensor],
                 types: dict[Key, TensorType]) -> None:
    """The reduction (the last node) reading its input from the prologue's chain."""
    *prologue, root = kern.nodes
    loaded = _loaded(prologue, tensors)
    data = root.args[0]
    assert data is not None

    def value(src: CSource, xs: list[str]) -> str:
        known = dict(zip(loaded, xs))
        _chain(src, prologue, tensors, known, types)
        return known[key_of(data)]

    ins = [_typed(types, data), *(None if a is None else tensors[key_of(a)]
                                  for a in root.args[1:])]
    emit_reduce(ctx, root, ins, outs, Prologue([tensors[k] for k in loaded], value))


def _loaded(nodes: list[Call], tensors: dict[Key, Tensor]) -> list[Key]:
    """The values the chain reads from memory: from outside it, through a pointer."""
    inside = {key_of(n) for n in nodes}
    return list(dict.fromkeys(key_of(a) for n in nodes for a in n.args if a is not None
                              and key_of(a) not in inside and tensors[key_of(a)].ptr))


def _chain(src: CSource, nodes: list[Call], tensors: dict[Key, Tensor], value: dict[Key, str],
           types: dict[Key, TensorType]) -> None:
    """``const T vN = ...;`` per node, over ``value`` (what is loaded) and scalar constants."""
    for k, t in tensors.items():
        if not t.ptr and t.value is not None and t.value.size == 1:
            value[k] = t.scalar()  # type: ignore[assignment]
    for n, call in enumerate(nodes):
        ins = [None if a is None else tensors.get(key_of(a)) or _typed(types, a)
               for a in call.args]
        out_t = types[key_of(call)]
        expr = expression(call, ins, Tensor("", tuple(out_t.shape), out_t.dtype))
        xs = ["" if a is None else value[key_of(a)] for a in call.args]
        src.line(f"const {c_type(out_t.dtype)} v{n} = {expr(xs)};")
        value[key_of(call)] = f"v{n}"


def _emit_tile_epilogue(src: CSource, fn: str, kern: Kernel, tensors: dict[Key, Tensor],
                        outs: list[Tensor], types: dict[Key, TensorType]
                        ) -> tuple[str, list[str]] | None:
    """The kernel's elementwise ops as a GEMM tile epilogue (``byoc_epi_fn``), applied to each
    finished m x n tile while it is in cache rather than in a second pass over the output.

    The GEMM sees the root as rows of ``ncols`` elements (a conv: an image's channel planes;
    a MatMul: its last dim), so each operand must read along a row either one value (a bias
    per channel, cs 0) or consecutive ones (a residual, cs 1); its offset for a row comes from
    the row's index. None when an operand broadcasts otherwise (the loop pass is kept)."""
    master, nodes = kern.nodes[0], kern.nodes[1:]
    root = outs[0]
    ncols = _gemm_columns(master, root.shape)
    split = next((k for k in range(len(root.shape), -1, -1)
                  if int(np.prod(root.shape[k:], dtype=np.int64)) == ncols), None)
    if split is None or ncols == 0:
        return None
    loaded = _loaded(nodes, {**tensors, key_of(master): Tensor("ci", root.shape, root.dtype)})
    loaded = [k for k in loaded if k != key_of(master)]
    col_strides = contiguous_strides(root.shape[split:])
    reads = []  # (tensor, row strides over root.shape[:split], cs)
    for k in loaded:
        bs = broadcast_strides(tensors[k].shape, root.shape)
        cols = [s for s, d in zip(bs[split:], root.shape[split:]) if d != 1]
        full = [s for s, d in zip(col_strides, root.shape[split:]) if d != 1]
        if cols and cols != full and any(cols):
            return None
        reads.append((tensors[k], bs[:split], 1 if any(cols) else 0))
    name = f"{fn}_epi"
    pointers = [root.ptr, *(t.ptr for t, _, _ in reads), *(o.ptr for o in outs[1:])]
    with src.block(f"static void {name}(float *c, long ldc, long row0, long m, long n, "
                   "const void *ctx)"):
        src.line("const void *const *p = (const void *const *)ctx;")
        src.line(f"float *const {root.ptr} = (float *)p[0];")
        for j, (t, _, _) in enumerate(reads):
            src.line(f"const {t.ctype} *const {t.ptr} = (const {t.ctype} *)p[{j + 1}];")
        for j, o in enumerate(outs[1:]):
            src.line(f"{o.ctype} *const {o.ptr} = ({o.ctype} *)p[{len(reads) + j + 1}];")
        with src.block("for (long i = 0; i < m; i++)"):
            src.line("float *restrict ci = c + i * ldc;")
            if reads or outs[1:]:  # where the row is in the root, for what else is read
                src.line(f"const long lin = ci - {root.ptr}, row = lin / {ncols}, "
                         f"col = lin % {ncols};")
            bases = _row_offsets(src, root.shape[:split], [rs for _, rs, _ in reads])
            with src.block("for (long j = 0; j < n; j++)"):
                value = {key_of(master): "m0"}
                src.line("const float m0 = ci[j];")
                for j, ((t, _, cs), base) in enumerate(zip(reads, bases)):
                    at = f"{base} + col + j" if cs else base
                    src.line(f"const {t.ctype} x{j} = {t.ptr}[{at}];")
                    value[loaded[j]] = f"x{j}"
                _chain(src, nodes, tensors, value, types)
                src.line(f"ci[j] = {value[kern.outputs[0]]};")
                for o, k in zip(outs[1:], kern.outputs[1:]):
                    src.line(f"{o.ptr}[lin + j] = {value[k]};")
    src.line()
    return name, [f"(const void *){p}" for p in pointers]


def _gemm_columns(master: Call, shape: tuple[int, ...]) -> int:
    """How many elements of the output one row of the master's GEMM holds."""
    if master.op == "Conv":
        return int(np.prod(shape[2:], dtype=np.int64))
    b = master.args[1]
    if master.op == "MatMul" and isinstance(b.type, TensorType) and b.type.rank == 1:
        return 1
    return shape[-1] if shape else 1


def _row_offsets(src: CSource, row_shape: tuple[int, ...], strides: list[tuple[int, ...]]
                 ) -> list[str]:
    """C expressions of each operand's offset at GEMM row ``row`` (over ``row_shape``)."""
    dims, st = coalesce(row_shape, [contiguous_strides(row_shape), *strides])
    st = st[1:]
    if not dims or not any(any(s) for s in st):
        return ["0"] * len(strides)
    src.line("long q = row;")
    for d in reversed(range(len(dims))):
        src.line(f"const long r{d} = q % {dims[d]};" + (f" q /= {dims[d]};" if d else ""))
    return [" + ".join(f"r{d} * {s[d]}" for d in range(len(dims)) if s[d]) or "0" for s in st]


def _typed(types: dict[Key, TensorType], a: Expr) -> Tensor:
    t = types[key_of(a)]
    return Tensor("", tuple(t.shape), t.dtype)
