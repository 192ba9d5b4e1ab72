"""merge_composite: each match of a backend's patterns becomes one call of a composite function.

    %0 = Conv(%x, meta[Constant][0])
    %1 = Relu(%0)
      ->
    %1 = fn(%x, %w) attrs={Composite="ref.conv_relu"} {
           %0 = Conv(%x, %w);  Relu(%0)
         }(%x, meta[Constant][0])

Rules (TVM's MergeComposite):
1. Backends in priority order, each one's patterns in its order, nodes producers first: the
   first valid match claims its nodes.
2. A match is valid when none of its nodes is claimed, every node but its root is read only
   inside the match (nothing is computed twice), no earlier backend takes any of its ops (an
   earlier backend keeps what it takes), and the pattern's check says True.
3. The composite's parameters are the values the match reads, in order of first use; its call
   keeps the root's span and type. The annotate pass gives it to the pattern's backend.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..analysis import unique, value_name
from ..backend import Backend, PatternEntry
from ..ir import NO_ATTRS, Call, Expr, Function, IRModule, Var, children, post_order, with_children
from ..pattern import Match


def merge_composite(mod: IRModule, backends: Sequence[Backend]) -> IRModule:
    """main with each valid pattern match wrapped as a composite call."""
    func = mod.main
    new, _ = composite_function(func, post_order(func.body), backends)
    return mod if new is func else mod.with_function("main", new)


def composite_function(func: Function, order: list[Expr], backends: Sequence[Backend]
                       ) -> tuple[Function, list[Expr]]:
    """``func`` with composites, and its nodes producers first."""
    if not any(b.patterns for b in backends):
        return func, order
    uses = _use_counts(func, order)
    claimed: set[Expr] = set()
    chosen: dict[Expr, tuple[PatternEntry, Match]] = {}
    for k, backend in enumerate(backends):
        earlier = backends[:k]
        for entry in backend.patterns:
            for e in order:
                if e in claimed or not isinstance(e, Call):
                    continue
                m = entry.pattern.match(e)
                if m is not None and _valid(m, entry, claimed, uses, earlier):
                    claimed.update(m.nodes)
                    chosen[e] = (entry, m)
    if not chosen:
        return func, order
    new: dict[Expr, Expr] = {}
    for e in order:
        if e in chosen:
            entry, m = chosen[e]
            new[e] = _composite(entry, m, [new[i] for i in m.inputs])
        elif e not in claimed:
            kids = children(e)
            new[e] = with_children(e, [new[k] for k in kids]) if kids else e
    out = Function(func.params, new[func.body], func.attrs)
    return out, post_order(out.body)


def _use_counts(func: Function, order: list[Expr]) -> dict[Expr, int]:
    uses = {func.body: 1}  # the function's result is a use, from outside every match
    for e in order:
        for k in children(e):
            uses[k] = uses.get(k, 0) + 1
    return uses


def _valid(m: Match, entry: PatternEntry, claimed: set[Expr], uses: dict[Expr, int],
           earlier: Sequence[Backend]) -> bool:
    inside = set(m.nodes)
    if any(i in claimed for i in inside):
        return False
    inner_uses: dict[Expr, int] = {}
    for n in m.nodes:
        for k in children(n):
            if k in inside:
                inner_uses[k] = inner_uses.get(k, 0) + 1
    if any(inner_uses.get(n, 0) != uses.get(n, 0) for n in m.nodes[:-1]):
        return False
    calls = [n for n in m.nodes if isinstance(n, Call)]
    if any(b.check(c) is True for b in earlier for c in calls):
        return False
    return entry.check is None or entry.check(m.root) is True  # type: ignore[arg-type]


def _composite(entry: PatternEntry, m: Match, args: list[Expr]) -> Call:
    taken: set[str] = set()
    params = [Var(unique(value_name(i) or f"p{k}", taken), i.type)  # type: ignore[attr-defined]
              for k, i in enumerate(m.inputs)]
    body: dict[Expr, Expr] = {i: p for i, p in zip(m.inputs, params)}
    for n in m.nodes:
        body[n] = with_children(n, [body[k] for k in children(n)])
    root = m.root
    fn = Function(tuple(params), body[root], {"Composite": entry.name})
    return Call(fn, tuple(args), NO_ATTRS, root.type, root.span)  # type: ignore[attr-defined]
