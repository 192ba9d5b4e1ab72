"""From FuseOps groups to kernels: what one C function of a native region computes.

A kernel is one of:

- ``ewise``: a chain of elementwise/broadcast ops, one loop over the root's shape, values in
  registers (no intermediate buffer)::

      %a = Mul(%x, 2.0); %b = Add(%a, %y); %c = Relu(%b)    ->   c[i] = relu(x[i] * 2 + y[j])

- ``epilogue``: a Conv, MatMul or Gemm (ccompiler's GEMM) writing straight into the group's
  output, its elementwise epilogue (bias, Relu, Clip, HardSwish, a residual Add) applied to
  each tile of the output as the GEMM finishes it (a second loop over the output only where
  an operand broadcasts in a way the tile cannot follow, or for a depthwise conv);
- ``reduce``: a reduction whose input is computed by its elementwise prologue as it is read::

      %s = ReduceSum(Mul(%x, %x), axes=[1])   ->   acc += x[i] * x[i]

- ``op``: a single op, by ccompiler's emitter (a group none of these fits is split into these).
"""

from __future__ import annotations

from dataclasses import dataclass

from byoc.backends.ccompiler.ops import EMITTERS
from byoc.backends.ccompiler.ops.elementwise import EXPRESSIONS
from byoc.backends.ccompiler.ops.reduce import EMITTERS as REDUCTIONS
from byoc.backends.ccompiler.shapes import Key, key_of, n_outputs
from byoc.ir import Call, Expr, TensorType
from byoc.passes.fuse_ops import Group

EPILOGUE_MASTERS = frozenset({"Conv", "MatMul", "Gemm"})
MAX_KERNEL_ARGS = 64  # inputs and outputs of a fused kernel's C function


@dataclass(eq=False)
class Kernel:
    kind: str  # ewise, epilogue, reduce, op
    nodes: list[Call]  # topological order; for epilogue, the master first; for reduce, last
    outputs: list[Key]  # values read outside the kernel, the root first
    inputs: list[Expr]  # values from outside the kernel, each once (constants included)


def _is_ewise(call: Call) -> bool:
    return isinstance(call.op, str) and call.op in EXPRESSIONS and n_outputs(call) == 1 \
        and not _per_axis(call)


def _per_axis(call: Call) -> bool:
    # A chain broadcasts operands numpy-style; a per-axis scale needs ccompiler's own emitter.
    if call.op not in ("QuantizeLinear", "DequantizeLinear"):
        return False
    shape = getattr(call.args[1].type, "shape", None)
    return shape not in ((), (1,))


def split_groups(groups: list[Group], types: dict[Key, TensorType], read_outside: set[Key]
                 ) -> list[Kernel]:
    """Kernels for ``groups`` (topological order kept); ``read_outside``: values read by later
    ops of other groups or returned."""
    kernels = []
    for g in groups:
        kind = _kind(g, types, read_outside)
        fused = None
        if kind == "epilogue":
            rest = [n for n in g.nodes if n is not g.master]
            fused = _kernel(kind, [g.master, *rest], read_outside, root=g.root)
        elif kind is not None:
            fused = _kernel(kind, g.nodes, read_outside, root=g.root)
        if fused is not None and len(fused.inputs) + len(fused.outputs) <= MAX_KERNEL_ARGS:
            kernels.append(fused)
        else:  # one C function per op (a fused one of thousands of pointers gcc cannot build)
            kernels.extend(_kernel("op", [n], read_outside) for n in g.nodes)
    return kernels


def _kind(g: Group, types: dict[Key, TensorType], read_outside: set[Key]) -> str | None:
    if len(g.nodes) == 1:
        return None
    root_shape = types[key_of(g.root)].shape
    # values leaving the group are written in the root's loop: they need the root's shape
    for n in g.nodes:
        if n is not g.root and key_of(n) in read_outside and types[key_of(n)].shape != root_shape:
            return None
    rest = [n for n in g.nodes if n is not g.master]
    inside = {key_of(n) for n in g.nodes}
    if all(_is_ewise(n) for n in g.nodes):
        return "ewise"
    if g.root.op in REDUCTIONS and all(_is_ewise(n) for n in rest if n is not g.root) \
            and g.master is g.root and not any(key_of(n) in read_outside for n in rest) \
            and g.root.args[0] is not None and key_of(g.root.args[0]) in inside:
        return "reduce"
    if g.master.op in EPILOGUE_MASTERS and g.master.op in EMITTERS and all(map(_is_ewise, rest)) \
            and types[key_of(g.master)].shape == root_shape and key_of(g.master) not in read_outside \
            and types[key_of(g.master)].dtype == types[key_of(g.root)].dtype == "float32":
        return "epilogue"
    return None


def _kernel(kind: str, nodes: list[Call], read_outside: set[Key], root: Call | None = None
            ) -> Kernel:
    inside: set[Expr] = set(nodes)
    outs: list[Key] = [(n, k) for n in nodes for k in range(n_outputs(n))
                       if (n, k) in read_outside or kind == "op"]
    if root is not None:
        outs.sort(key=lambda k: k != key_of(root))
    inputs: list[Expr] = []
    seen: set[Key] = set()
    for n in nodes:
        for a in n.args:
            if a is None:
                continue
            k = key_of(a)  # k[0]: the node that produces the value
            if k[0] in inside or k in seen:
                continue
            seen.add(k)
            inputs.append(a)
    return Kernel(kind, nodes, outs, inputs)
