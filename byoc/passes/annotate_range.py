"""annotate_range: one region for a backend over a range of nodes, named by hand (for debugging).

The range is ``start`` to ``end`` in main's topological order (the order ``node_order`` lists),
each given as an ONNX node name or an index into that order; or every node whose name a regular
expression finds (``re.search``). Every input coming from outside the range gets its compiler_begin, not
only those of the first node (the mistake in the seed thread's hand-written annotator).

Rules:
1. An interval of a topological order is always convex. A regex may pick a set a path leaves and
   re-enters: it is refused, naming the nodes that would have to join.
2. Each node of the range must be taken by the backend; the error lists those it refuses.
3. Calls with no inputs stay on the host (no region can begin at them), and every node outside
   the range is recorded as such for ``byoc.explain``.
"""

from __future__ import annotations

import re

from ..analysis import IndexGraph, Regions, hull_gap, is_annotation, node_key
from ..analysis.convexity import names
from ..backend import Backend
from ..errors import ModelError
from ..ir import Call, Expr, Function, TupleGetItem

Bound = str | int | re.Pattern | None


def node_order(order: list[Expr]) -> list[Call]:
    """The calls of a function in topological order: what range indices count."""
    return [e for e in order if isinstance(e, Call)]


def range_regions(func: Function, order: list[Expr], backend: Backend, start: Bound,
                  end: Bound = None) -> tuple[Regions, dict[str, str]]:
    """One region of ``backend`` over the range, and why each other call stays on the host."""
    calls = node_order(order)
    if any(is_annotation(c) for c in calls):
        raise ModelError("main is already annotated; annotate_range wants a plain module")
    if isinstance(start, re.Pattern):
        if end is not None:
            raise ModelError("a regex range takes no end")
        picked = [c for c in calls if start.search(node_key(c))]
        if not picked:
            raise ModelError(f"no node name matches {start.pattern!r}")
        where = f"matching {start.pattern!r}"
    else:
        i = _index(calls, start, 0)
        j = _index(calls, end if end is not None else start, len(calls) - 1)
        if i > j:
            raise ModelError(f"the range starts at node {node_key(calls[i])!r} (index {i}), after "
                             f"its end {node_key(calls[j])!r} (index {j}) in topological order")
        picked = calls[i:j + 1]
        where = f"{node_key(calls[i])!r}..{node_key(calls[j])!r}"
    picked = [c for c in picked if any(a is not None for a in c.args)]
    if not picked:
        raise ModelError(f"the range {where} holds no node with inputs to offload")
    refused = [(c, v) for c in picked if (v := backend.check(c)) is not True]
    if refused:
        listed = "; ".join(f"{node_key(c)!r} ({c.op_name}): {v}" for c, v in refused[:5])
        more = f" and {len(refused) - 5} more" if len(refused) > 5 else ""
        raise ModelError(f"backend {backend.name!r} does not take {len(refused)} node(s) of the "
                         f"range: {listed}{more}")
    graph = IndexGraph.of(order)
    chosen = {c for c in picked}
    region = [0 if e in chosen else -1 for e in order]
    for i, e in enumerate(order):
        if isinstance(e, TupleGetItem) and region[graph.kids[i][0]] == 0:
            region[i] = 0
    gap = hull_gap(graph, {i for i, r in enumerate(region) if r == 0})
    if gap:
        raise ModelError(f"the range {where} is not convex: a path leaves it and comes back, so "
                         f"these would have to join it: {names([order[i] for i in gap], 20)}")
    reasons = {node_key(c): f"outside the range {where}" for c in calls if c not in chosen}
    return Regions(func, order, region, [backend.name], graph), reasons


def _index(calls: list[Call], bound: Bound, default: int) -> int:
    """The position of a range bound: a node name, an index (negative from the end), or None or
    "" for the first/last node. A name no node has, made of digits, is taken as an index."""
    if bound is None or bound == "":
        return default
    if isinstance(bound, str):
        for k, c in enumerate(calls):
            if node_key(c) == bound:
                return k
        if not bound.lstrip("-").isdigit():
            raise ModelError(f"no node named {bound!r}")
        bound = int(bound)
    if isinstance(bound, bool) or not isinstance(bound, int):
        raise ModelError(f"a range bound is a node name or an index, not {bound!r}")
    if not -len(calls) <= bound < len(calls):
        raise ModelError(f"node index {bound} is out of range: main has {len(calls)} nodes")
    return bound % len(calls)
