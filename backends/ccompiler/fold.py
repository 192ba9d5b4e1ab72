"""Constant folding: calls of a region that read only constants are computed once, on the host.

    %0 = ConstantOfShape(meta[Constant][0], value=[0.02])     ->   (a Constant holding it)
    %1 = Conv(%x, %0)                                              %1 = Conv(%x, meta[...])

Models carry weights built by ops (ConstantOfShape fills, shape arithmetic on constants); without
folding, the generated code would rebuild them on every run. A folded value becomes a constant
passed to the C by pointer, like any weight. Values over ``LIMIT_BYTES`` (1 GiB) stay computed: a
weight a graph fills is kept as an initializer of its size would be (zfnet512's 302 MB FC weight,
refilled on every run, was 45 ms of native's 103; onnxruntime folds it too).
"""

from __future__ import annotations

from byoc.analysis import value_name
from byoc.ir import (Call, Constant, Expr, Function, IRModule, TensorType, Tuple, TupleGetItem,
                     children, post_order, rewrite)
from byoc.runtime import Executable

LIMIT_BYTES = 1 << 30


def fold_constants(func: Function) -> Function:
    """``func`` with its constant-only calls replaced by their values (``func`` if none)."""
    order = post_order(func.body)
    constant: set[Expr] = {e for e in order if isinstance(e, Constant)}
    for e in order:
        if isinstance(e, Call) and isinstance(e.op, str) and children(e) and \
                all(a in constant for a in children(e)):
            constant.add(e)
        elif isinstance(e, TupleGetItem) and e.tuple_value in constant:
            constant.add(e)
    wanted = _frontier(func, order, constant)
    if not wanted:
        return func
    names = [f"v{k}" for k in range(len(wanted))]
    probe = Function((), Tuple(tuple(wanted)), {"output_names": names})
    values = Executable(IRModule({"main": probe})).run_function(probe, [])
    folded = {e: Constant(v, value_name(e)) for e, v in zip(wanted, values)
              if getattr(v, "nbytes", LIMIT_BYTES + 1) <= LIMIT_BYTES}
    (body,), _ = rewrite([func.body], lambda old, new: folded.get(old, new))
    return Function(func.params, body, func.attrs)


def _frontier(func: Function, order: list[Expr], constant: set[Expr]) -> list[Expr]:
    """Constant values that something non-constant reads, or that the region returns."""
    body = func.body
    results = set(body.fields if isinstance(body, Tuple) else (body,))
    read: set[Expr] = set()
    for e in order:
        if e not in constant:
            read.update(children(e))
    return [e for e in order if e in constant and not isinstance(e, Constant)
            and (e in read or e in results) and isinstance(e.type, TensorType)]
