"""infer_types: give every call of main a type, so that region boundaries have typed values.

Rules:
1. A call whose type is known keeps it (the importer and the builder type what they make).
2. An annotation has the type of its argument.
3. A call of an op with an unknown type gets its op's type rule over its argument types; a rule
   that cannot say leaves the type unknown (the run still checks the real shapes).
4. Nothing changes, and the same module comes back, when every type is already known.
"""

from __future__ import annotations

from ..analysis import is_annotation
from ..ir import Call, Constant, Expr, Function, IRModule, TupleType, Type
from ..ir import children, incomplete, post_order, with_children
from ..op import registry


def infer_types(mod: IRModule) -> IRModule:
    """The module with main's calls typed (the same module if they all were)."""
    func = mod.main
    new, _ = infer_function(func, post_order(func.body))
    return mod if new is func else mod.with_function("main", new)


def infer_function(func: Function, order: list[Expr]) -> tuple[Function, list[Expr]]:
    """``func`` typed, and its nodes producers first (``order`` itself if nothing changed)."""
    if all(not incomplete(e.type) for e in order if isinstance(e, Call)):
        return func, order
    new: dict[Expr, Expr] = {}
    out: list[Expr] = []
    for e in order:
        kids = children(e)
        rebuilt = with_children(e, [new[k] for k in kids]) if kids else e
        if isinstance(rebuilt, Call) and incomplete(rebuilt.type):
            t = _infer(rebuilt)
            if t is not rebuilt.type:
                rebuilt = Call(rebuilt.op, rebuilt.args, rebuilt.attrs, t, rebuilt.span)
        new[e] = rebuilt
        out.append(rebuilt)
    return Function(func.params, new[func.body], func.attrs), out


def _infer(call: Call) -> Type:
    if is_annotation(call):
        return call.args[0].type  # type: ignore[union-attr]
    if isinstance(call.op, Function):
        return call.op.ret_type
    entry = registry.lookup(call.op) if isinstance(call.op, str) else None
    if entry is None:
        return call.type
    n = len(call.type.fields) if isinstance(call.type, TupleType) else 1
    try:
        types = entry.type_rule(call.attrs, [None if a is None else a.type for a in call.args], n,
                                [a.value if isinstance(a, Constant) else None for a in call.args])
    except Exception:  # inference is best effort, as in the importer
        return call.type
    return types[0] if n == 1 else TupleType(tuple(types))
