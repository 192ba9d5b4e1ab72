"""Convexity: can each region become one function call without a cycle?

The graph with every region contracted to one unit (each host node a unit of its own) must stay
acyclic: a path that leaves a region and comes back would make the region's call wait for its
own output. ``contract`` builds that unit graph in one pass, ``unit_order`` sorts it (Kahn) or
says which nodes would have to join a region, and ``hull_gap`` finds those nodes for any set.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelError
from ..ir import Call, Expr
from .names import node_key
from .regions import IndexGraph, Regions


@dataclass
class Units:
    """The unit graph. Units ``0 .. n_regions-1`` are the regions; unit ``n_regions + k`` is the
    host node at position ``host[k]`` of the order. ``succ`` has one edge per data edge."""

    unit_of: list[int]  # unit of each node by position, -1 for leaves
    succ: list[list[int]]
    indeg: list[int]
    n_regions: int
    host: list[int]


def contract(regions: Regions) -> Units:
    """Every region as one unit, every host node as one unit, and the edges between them."""
    graph = regions.index_graph()
    kids, leaf = graph.kids, graph.leaf
    n_regions = len(regions.targets)
    unit_of = list(regions.region)
    host: list[int] = []
    succ: list[list[int]] = [[] for _ in range(n_regions)]
    indeg = [0] * n_regions
    for i, u in enumerate(unit_of):
        if leaf[i]:
            continue
        if u < 0:
            u = unit_of[i] = n_regions + len(host)
            host.append(i)
            succ.append([])
            indeg.append(0)
        for k in kids[i]:
            uk = unit_of[k]
            if uk >= 0 and uk != u:
                succ[uk].append(u)
                indeg[u] += 1
    return Units(unit_of, succ, indeg, n_regions, host)


def unit_order(units: Units, regions: Regions) -> list[int]:
    """The units in an order where each comes after those it reads; an error if regions and the
    host nodes between them form a cycle, naming the nodes that would have to join."""
    indeg = list(units.indeg)
    succ = units.succ
    ready = [u for u, d in enumerate(indeg) if d == 0]
    order: list[int] = []
    while ready:
        u = ready.pop()
        order.append(u)
        for s in succ[u]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if len(order) < len(indeg):
        stuck = [u for u in range(units.n_regions) if indeg[u] > 0]
        raise _cycle_error(regions, stuck)
    return order


def _cycle_error(regions: Regions, stuck: list[int]) -> ModelError:
    members = regions.members()
    order = regions.order
    for r in stuck:
        gap = hull_gap(regions.index_graph(), set(members[r]))
        if gap:
            return ModelError(f"the region of {regions.targets[r]!r} is not convex: a path leaves "
                              f"it and comes back through {names([order[i] for i in gap])}, "
                              "which would have to join it", _first_call(order, members[r]))
    firsts = ", ".join(f"{regions.targets[r]!r} at {_first_call(order, members[r])!r}"
                       for r in stuck[:4])
    return ModelError(f"regions ({firsts}) depend on each other in a cycle: annotate them as one "
                      "region or split one of them")


def hull_gap(graph: IndexGraph, members: set[int]) -> list[int]:
    """The nodes outside ``members`` on a path between two members: those that would have to
    join for the set to be convex. Positions in the graph's producers-first order."""
    kids = graph.kids
    below = bytearray(len(kids))  # reads a member, directly or not
    for i, ks in enumerate(kids):
        if i not in members and any(k in members or below[k] for k in ks):
            below[i] = 1
    above = bytearray(len(kids))  # feeds a member, directly or not
    for i in range(len(kids) - 1, -1, -1):
        if i in members or above[i]:
            for k in kids[i]:
                above[k] = 1
    return [i for i in range(len(kids)) if below[i] and above[i]]


def _first_call(order: list[Expr], positions: list[int]) -> str | None:
    calls = (order[i] for i in positions if isinstance(order[i], Call))
    return next((node_key(c) for c in calls), None)  # type: ignore[arg-type]


def names(nodes: list[Expr], most: int = 8) -> str:
    """"node(s) 'a', 'b' and 3 more": the calls among ``nodes``, for an error."""
    keys = [repr(node_key(e)) for e in nodes if isinstance(e, Call)]
    more = f" and {len(keys) - most} more" if len(keys) > most else ""
    return "node(s) " + ", ".join(keys[:most]) + more
