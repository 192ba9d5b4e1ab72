"""reject_regions: a backend's ``reject_region`` hook sends lifted regions back to the host.

    def @main(%x) { @ref_reshape_1_9a0b(%x) }        def @main(%x) { Reshape(%x, ...) }
    def @ref_reshape_1_9a0b(%x) { Reshape(%x, ...) }   ->    (the function is gone)

Rules (TVM's post-partition pruning, as a hook):
1. Each external function is offered to its backend's ``reject_region(function)``; True or a
   reason string rejects it.
2. A rejected region is inlined back where it was called, main or an If, Loop or Scan body at
   any depth (its composites too, as the ops they were made of), and its function removed;
   every node of it gets the reason for ``byoc.explain``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..analysis import HOST_REASONS, Scope, map_bodies, node_key
from ..backend import get_backend
from ..ir import (Call, Expr, Function, GlobalVar, IRModule, Tuple, TupleGetItem, children,
                  post_order, rewrite, with_children)


def reject_regions(mod: IRModule) -> IRModule:
    """The module with every region its backend rejects inlined back into main."""
    rejected: dict[str, str] = {}
    hooks: dict[str, Callable[[Function], bool | str | None] | None] = {}  # asked once each
    for name, func in mod.functions.items():
        target = func.attrs.get("Compiler")
        if name == "main" or not target:
            continue
        if target not in hooks:
            hooks[target] = get_backend(target).reject_region
        hook = hooks[target]
        verdict = hook(func) if hook is not None else None
        if verdict:
            why = verdict if isinstance(verdict, str) else "its backend rejects it"
            rejected[name] = f"region {name} was sent back to the host: {why}"
    return inline_regions(mod, rejected)


def inline_regions(mod: IRModule, why: dict[str, str]) -> IRModule:
    """``mod`` with the regions named in ``why`` inlined where they are called (main or an If,
    Loop or Scan body at any depth), their functions removed and each of their nodes given its
    region's reason (``why[name]``) for ``byoc.explain``."""
    if not why:
        return mod
    reasons = dict(mod.attrs.get(HOST_REASONS, {}))

    def inline(old: Expr, e: Expr) -> Expr:
        if isinstance(e, Call) and isinstance(e.op, GlobalVar) and e.op.name in why:
            return inline_call(mod[e.op.name], list(e.args), reasons, why[e.op.name])
        if isinstance(e, TupleGetItem) and isinstance(e.tuple_value, Tuple):
            return e.tuple_value.fields[e.index]  # a region's result tuple, opened up
        return e

    def host_function(func: Function, scope: Scope = ()) -> Function:
        """``func`` with its bodies done first (deepest first), then its own inlined calls."""
        func = map_bodies(func, host_function, scope)
        (body,), _ = rewrite([func.body], inline)
        return func if body is func.body else Function(func.params, body, func.attrs)

    functions = {n: f for n, f in mod.functions.items() if n not in why}
    functions["main"] = host_function(mod.main)
    return IRModule(functions, {**mod.attrs, HOST_REASONS: reasons})


def inline_call(func: Function, args: list[Expr], reasons: dict[str, str], why: str) -> Expr:
    """``func``'s body over ``args``, composites opened up; each call's reason set to ``why``."""
    new: dict[Expr, Expr] = dict(zip(func.params, args))
    for e in post_order(func.body):
        if e in new:
            continue
        kids = [new[k] for k in children(e)]
        if isinstance(e, Call) and isinstance(e.op, Function):
            new[e] = inline_call(e.op, kids, reasons, why)  # composites are one level deep
            continue
        new[e] = with_children(e, kids) if kids else e
        if isinstance(e, Call):
            reasons[node_key(e)] = why
    return new[func.body]
