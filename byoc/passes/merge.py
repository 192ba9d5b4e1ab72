"""merge_compiler_regions: join the regions of one backend wherever no cycle results.

    O = taken by the backend, X = host          after:
          O                                      [O]
         / \\                                    / \\
        O   X                                 [O]  X
         \\ /                                    \\ /
          O                                       O
    The top two join; the bottom one cannot (it would both feed X and wait for it).

How (linear in nodes plus edges, once per backend): each region is one unit and each host node
another (``analysis.convexity.contract``). Kahn's algorithm sweeps the units in phases: every
ready unit of the host side runs, then every ready unit of the backend, and the ones that
become ready while they run, as one group; then the host side again, and so on.

- Convex: nothing outside a group runs while the group does, so no path leaves it and comes
  back.
- Maximal: a unit of the backend outside group G became ready only after G closed, because it
  waited for a unit outside G that waited for G. Joining it to G would make a cycle. So no two
  groups of a backend can join, side by side or one after the other.

Backends are swept in priority order, each sweep over the units the previous ones left (their
groups contracted), so every backend's groups stay maximal. Regions the input marks are
never split; regions that form a cycle already are an error naming the nodes at fault.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..analysis import Regions, annotate, contract, find_regions, numbered, unit_order
from ..ir import IRModule


def merge_compiler_regions(mod: IRModule, priority: Sequence[str] | None = None) -> IRModule:
    """main with its annotated regions of each backend merged as far as no cycle results.

    ``priority`` orders the backends (default: as their first regions appear)."""
    merged = merge_regions(find_regions(mod.main), priority)
    return IRModule({**mod.functions, "main": annotate(merged)}, dict(mod.attrs))


def merge_regions(regions: Regions, priority: Sequence[str] | None = None) -> Regions:
    """The same nodes in fewer regions: each backend's regions joined where no cycle results."""
    units = contract(regions)
    color: list[str | None] = [*regions.targets, *([None] * len(units.host))]
    succ, indeg = units.succ, units.indeg
    current = list(range(len(succ)))  # each original unit's unit in the current graph
    swept = False
    for target in _targets(regions.targets, priority):
        inside = [c == target for c in color]
        if sum(inside) < 2:
            continue
        new_id, n_new = _sweep(succ, indeg, inside)
        swept = True
        if n_new < 0:  # the input's regions already form a cycle: say where
            unit_order(units, regions)
        new_color: list[str | None] = [None] * n_new
        for u, c in enumerate(color):
            new_color[new_id[u]] = c
        succ, indeg = _contracted(succ, new_id, n_new)
        color = new_color
        current = [new_id[u] for u in current]
    if not swept:
        unit_order(units, regions)  # nothing to merge, but the input must still be acyclic
    region, keys = numbered([current[r] if r >= 0 else None for r in regions.region])
    return regions.with_regions(region, [color[k] for k in keys])  # type: ignore[misc]


def _targets(targets: list[str], priority: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(targets))
    if priority is None:
        return present
    return [t for t in priority if t in present] + [t for t in present if t not in priority]


def _sweep(succ: list[list[int]], indeg: list[int], inside: list[bool]) -> tuple[list[int], int]:
    """Kahn's algorithm in phases; the new unit of each unit (groups first) and their count, or
    a count of -1 if the units form a cycle."""
    waiting = list(indeg)
    group = [-1] * len(succ)
    ready_out = [u for u, d in enumerate(waiting) if d == 0 and not inside[u]]
    ready_in = [u for u, d in enumerate(waiting) if d == 0 and inside[u]]

    def release(u: int) -> None:
        for s in succ[u]:
            waiting[s] -= 1
            if waiting[s] == 0:
                (ready_in if inside[s] else ready_out).append(s)

    n_groups = done = 0
    while ready_out or ready_in:
        while ready_out:
            release(ready_out.pop())
            done += 1
        if ready_in:
            while ready_in:  # one group: no outside unit runs until it closes
                u = ready_in.pop()
                group[u] = n_groups
                release(u)
                done += 1
            n_groups += 1
    if done < len(succ):
        return group, -1
    new_id, n_new = group, n_groups
    for u, g in enumerate(group):
        if g < 0:
            new_id[u] = n_new
            n_new += 1
    return new_id, n_new


def _contracted(succ: list[list[int]], new_id: list[int], n_new: int
                ) -> tuple[list[list[int]], list[int]]:
    out: list[list[int]] = [[] for _ in range(n_new)]
    indeg = [0] * n_new
    for u, targets in enumerate(succ):
        nu = new_id[u]
        for s in targets:
            ns = new_id[s]
            if ns != nu:
                out[nu].append(ns)
                indeg[ns] += 1
    return out, indeg
