"""Shapes computed in the graph, made constants when a region is specialized.

Exported models compute their reshapes' targets from their tensors' shapes::

    %s = Shape(%x); %d = Gather(%s, 0); %t = Concat(Unsqueeze(%d), [-1, 64]); Reshape(%y, %t)

ccompiler takes a Reshape only when ``%t`` is a constant, so such graphs leave every Reshape
(and Range, Expand, ConstantOfShape...) on the host, splitting the model into many small
regions. Native takes them when the shape input is *shape-computable*: built from Shape calls
and constants by small integer ops (``computes_shape``). A region's code is specialized per
call signature anyway; at that point (``specialize``) each Shape of a value of known type is
replaced by its value and the shape arithmetic folds into constants. When partitioning cut the
chain so that a shape value reaches the region as an input (``value_params``), that input's
value joins the signature (it depends only on the model's input shapes, so it takes few values).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from byoc.backends.ccompiler.emitter import Unsupported
from byoc.backends.ccompiler.fold import fold_constants
from byoc.backends.ccompiler.shapes import concrete_types, key_of
from byoc.backends.ccompiler.support import static_inputs
from byoc.ir import Call, Constant, Expr, Function, TensorType, Tuple, Var, post_order, rewrite
from byoc.op.kernels.tensor import shape as shape_kernel

# Ops that shape arithmetic is made of (all with host kernels, so that they fold).
SHAPE_OPS = frozenset("""Shape Gather Unsqueeze Squeeze Concat Cast Add Sub Mul Div Slice Reshape
Equal Less Greater Where Identity Range ConstantOfShape Expand ReduceProd Max Min Neg Abs Not
Flatten Transpose""".split())
MAX_SHAPE_VALUES = 64  # elements: a shape value is a handful of dims
_ROUNDS = 16  # Shape -> fold rounds at most (each one can type the next values)


def computes_shape(expr: Expr | None) -> bool:
    """Whether ``expr`` is a small value computed from shapes and constants only."""
    memo: dict[Expr, bool] = {}
    stack = [expr]
    while stack:  # iterative post-order over the cone of expr, stopping at Shape calls
        e = stack[-1]
        if e is None or e in memo:
            stack.pop()
            continue
        if isinstance(e, Constant) or isinstance(e, Call) and e.op == "Shape":
            memo[e] = True
        elif not isinstance(e, Call) or e.op not in SHAPE_OPS or not _small(e.type):
            return False  # one input from elsewhere decides it
        else:
            pending = [a for a in e.args if a is not None and a not in memo]
            if pending:
                stack.extend(pending)
                continue
            memo[e] = True
        stack.pop()
    return True


def _small(t) -> bool:
    """A shape value's type: rank 0 or 1, or at most MAX_SHAPE_VALUES elements."""
    if not isinstance(t, TensorType) or t.shape is None:
        return False
    if len(t.shape) <= 1:
        return True
    return all(isinstance(d, int) for d in t.shape) and \
        int(np.prod(t.shape, dtype=np.int64)) <= MAX_SHAPE_VALUES


def shape_inputs(call: Call) -> list[int]:
    """The inputs of ``call`` read at code generation (ccompiler's static inputs)."""
    return static_inputs(call)


def value_params(func: Function) -> tuple[int, ...]:
    """Indices of the parameters whose values decide shapes in ``func``: the cone of each
    non-constant static input (through SHAPE_OPS) that reaches a parameter."""
    index: dict[Expr, int] = {p: k for k, p in enumerate(func.params)}
    found: set[int] = set()
    seen: set[Expr] = set()
    stack: list[Expr] = []
    for e in post_order(func.body):
        if isinstance(e, Call) and isinstance(e.op, str):
            args = list(range(len(e.args))) if e.op == "Range" else shape_inputs(e)
            stack.extend(e.args[j] for j in args if e.args[j] is not None)
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, Var) and e in index:
            found.add(index[e])
        elif isinstance(e, Call) and e.op in SHAPE_OPS and e.op != "Shape":
            stack.extend(a for a in e.args if a is not None)
    return tuple(sorted(found))


def specialize(func: Function, arg_types: Sequence[TensorType],
               values: dict[int, np.ndarray]) -> Function:
    """``func`` with the parameters in ``values`` read as those constants and every Shape of a
    value whose type is then known replaced by its value, folded (the parameters stay, so the
    calling convention does not change)."""
    if values:
        consts = {func.params[k]: Constant(np.asarray(v), func.params[k].name)
                  for k, v in values.items()}
        func = _replaced(func, consts)
    for _ in range(_ROUNDS):
        shapes = _known_shapes(func, arg_types)
        if not shapes:
            break
        func = _replaced(func, shapes)
    return func


def _replaced(func: Function, by: dict[Expr, Expr]) -> Function:
    (body,), _ = rewrite([func.body], lambda old, new: by.get(old, new))
    return fold_constants(Function(func.params, body, func.attrs))


def _known_shapes(func: Function, arg_types: Sequence[TensorType]) -> dict[Expr, Constant]:
    """Constants for the Shape calls whose input has a concrete type for ``arg_types``."""
    calls = [e for e in post_order(func.body) if isinstance(e, Call) and e.op == "Shape"]
    if not calls:
        return {}
    try:  # all at once when everything types (the common case after a round or two)
        types = concrete_types(func, arg_types)
    except Unsupported:
        types = {}
    out: dict[Expr, Constant] = {}
    for call in calls:
        src = call.args[0]
        t = types.get(key_of(src)) if src is not None else None
        if t is None and src is not None:
            try:
                t = concrete_types(Function(func.params, Tuple((src,))), arg_types)[key_of(src)]
            except Unsupported:
                continue
        if t is not None:
            dummy = np.broadcast_to(np.zeros((), t.dtype or "float32"), t.shape)
            out[call] = Constant(shape_kernel(call.attrs, dummy)[0], "shape")
    return out
