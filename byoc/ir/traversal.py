"""Iterative graph walks. Nothing here recurses, so a 100,000-node chain is fine."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .expr import Expr, children, with_children


def post_order(roots: Expr | Iterable[Expr]) -> list[Expr]:
    """Every expression reachable from ``roots``, each after all it reads, once each.

    Children are visited in argument order, so the order is deterministic for a given structure.
    """
    if isinstance(roots, Expr):
        roots = [roots]
    order: list[Expr] = []
    # Keyed by the nodes themselves (identity hash): an id() would be a new int object per
    # lookup, compared by value in the table, a cache miss each on a big graph.
    seen: set[Expr] = set()
    visit, emit = seen.add, order.append  # bound once: this loop runs for every node
    for root in roots:
        if root in seen:
            continue
        visit(root)
        stack = [(root, iter(children(root)))]
        while stack:
            node, it = stack[-1]
            for child in it:
                if child not in seen:
                    visit(child)
                    kids = children(child)
                    if kids:
                        stack.append((child, iter(kids)))
                        break
                    emit(child)  # a leaf: emitted at once, as pushing and popping it would
            else:
                stack.pop()
                emit(node)
    return order


def users(order: list[Expr]) -> dict[Expr, list[Expr]]:
    """For a post-order, map each expression to those that read it (with repeats)."""
    out: dict[Expr, list[Expr]] = {e: [] for e in order}
    for e in order:
        for c in children(e):
            out[c].append(e)
    return out


def rewrite(
    roots: list[Expr], fn: Callable[[Expr, Expr], Expr] | None = None
) -> tuple[list[Expr], dict[Expr, Expr]]:
    """Rebuild the graph bottom-up.

    For each node (post-order) the node is first rebuilt with its children's replacements,
    then ``fn(original, rebuilt)`` may return a different replacement. Returns the new roots
    and the memo (original -> replacement).
    """
    memo: dict[Expr, Expr] = {}
    for e in post_order(roots):
        rebuilt = with_children(e, [memo[c] for c in children(e)]) if children(e) else e
        memo[e] = fn(e, rebuilt) if fn is not None else rebuilt
    return [memo[r] for r in roots], memo
