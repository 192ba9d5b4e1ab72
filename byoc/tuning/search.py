"""The search: which run of atoms goes where, by dynamic programming over measured costs.

A placement cuts the atoms ``0..S-1`` (consecutive runs of main's nodes in one topological order)
into segments and gives each segment an option (the host, or one backend with the nodes it does
not take on the host). Its predicted latency is the sum of its
segments' measured times, each measured with its boundary tensors moved in and out. The best
placement for atoms ``0..j-1`` is the best, over the last segment ``i..j-1`` and its option, of
the best placement for ``0..i-1`` plus that segment: O(S^2 x options) per pass, exact over
every such placement once the costs it compares are measured.

A space of at most 240 candidates (9 atoms and 5 options) is measured whole, and the result is
the exact optimum. Past that, measuring every segment would take O(S^2 x options) builds, so
costs are measured lazily:

1. the whole model on each option (the single-backend baselines), then each atom on each
   option, then each pair of neighbouring atoms on each option;
2. a segment not measured yet is estimated from its atoms: their sum, less what merging saved
   at each boundary inside it (measured on the pair of atoms around that boundary: a call, the
   tensors moved between two regions of a device), times 0.9 to stay optimistic;
3. the best placement under measured-or-estimated costs is found; if it promises less than 2%
   over the best placement of measured costs alone, that one is taken instead (noise in the
   measurements makes some estimates too low; chasing them costs builds and gains nothing);
   the placement's unmeasured segments are measured; once all of them are, every other option
   of each of its segments is measured too (the plan shows them, and the runner-up); repeat
   until a pass measures nothing new. The 2% is below the estimates' 10% optimism, so where
   the estimates are optimistic no better placement is given up.

Each pass measures at least one new candidate, so the search ends after at most that many
passes; a budget stops it earlier, with the best placement among measured costs alone. Ties go
to the longer last segment, then to the option listed first: the same measurements always give
the same placement.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

Candidate = tuple[int, int, int]  # (first atom, stop atom, option)
OPTIMISM = 0.9
EXHAUSTIVE = 240  # a space this small is measured whole: the placement is then exact
MIN_GAIN = 0.02  # an unmeasured placement must promise this much over the best measured one


@dataclass
class SearchResult:
    path: list[Candidate]  # the chosen segments, in order
    predicted: float  # the sum of their measured times
    complete: bool  # the search ended by itself, not by the budget
    passes: int


def best_path(n_atoms: int, n_options: int, cost: Callable[[int, int, int], float]
              ) -> tuple[float, list[Candidate]]:
    """The cheapest cover of atoms ``0..n_atoms-1`` by segments, and its cost (inf if none)."""
    best = [0.0] + [math.inf] * n_atoms
    back: list[Candidate | None] = [None] * (n_atoms + 1)
    for j in range(1, n_atoms + 1):
        for i in range(j):
            if best[i] == math.inf:
                continue
            for o in range(n_options):
                c = best[i] + cost(i, j, o)
                if c < best[j]:
                    best[j], back[j] = c, (i, j, o)
    if best[n_atoms] == math.inf:
        return math.inf, []
    path: list[Candidate] = []
    j = n_atoms
    while j > 0:
        step = back[j]
        assert step is not None
        path.append(step)
        j = step[0]
    return best[n_atoms], path[::-1]


class Estimates:
    """Measured costs, and optimistic guesses for the rest: a segment's atoms, less what
    merging saved at each boundary inside it, as measured on the pair of atoms around it."""

    def __init__(self, n_atoms: int, n_options: int, costs: dict[Candidate, float]):
        self.n_atoms, self.n_options, self.costs = n_atoms, n_options, costs
        self.prefix: list[list[float]] = []  # sums of the finite atoms' costs
        self.missing: list[list[int]] = []  # counts of the atoms that cannot run (or unknown)
        self.saved: list[list[float]] = []  # sums of the savings at boundaries 1..b
        for o in range(n_options):
            atom = [costs.get((a, a + 1, o), math.inf) for a in range(n_atoms)]
            acc, row, bad, count = 0.0, [0.0], 0, [0]
            for t in atom:
                if math.isfinite(t):
                    acc += t
                else:
                    bad += 1
                row.append(acc)
                count.append(bad)
            self.prefix.append(row)
            self.missing.append(count)
            pairs: dict[int, float] = {}
            for b in range(1, n_atoms):
                pair = costs.get((b - 1, b + 1, o), math.inf)
                if math.isfinite(pair) and math.isfinite(atom[b - 1]) and math.isfinite(atom[b]):
                    # never more than the smaller atom: noise must not make a segment free
                    pairs[b] = min(atom[b - 1] + atom[b] - pair, atom[b - 1], atom[b])
            finite = [t for t in atom if math.isfinite(t)]
            # A boundary whose pair is not measured: the most any measured one saved (before
            # any: a whole atom), so the guess stays optimistic.
            default = max(pairs.values()) if pairs else (min(finite) if finite else 0.0)
            acc, row = 0.0, [0.0, 0.0]
            for b in range(1, n_atoms):
                acc += max(0.0, pairs.get(b, default))
                row.append(acc)
            self.saved.append(row)

    def cost(self, i: int, j: int, o: int) -> float:
        found = self.costs.get((i, j, o))
        if found is not None:
            return found
        if self.missing[o][j] != self.missing[o][i]:
            return math.inf
        parts = self.prefix[o][j] - self.prefix[o][i]
        saved = self.saved[o][j] - self.saved[o][i + 1]  # boundaries i+1 .. j-1
        return max(parts - saved, 0.0) * OPTIMISM


def search(n_atoms: int, n_options: int, costs: dict[Candidate, float],
           measure: Callable[[list[Candidate]], None], out_of_time: Callable[[], bool],
           progress: Callable[[str, float], None] | None = None,
           exhaustive: int = EXHAUSTIVE, min_gain: float = MIN_GAIN) -> SearchResult:
    """The best placement. ``measure(candidates)`` fills ``costs`` (math.inf: impossible) for as
    many of them as time allows, in order; ``costs`` may hold measurements already. With at
    most ``exhaustive`` candidates in all, every one is measured (shortest first)."""

    def ask(cands: list[Candidate]) -> None:
        missing = [c for c in dict.fromkeys(cands) if c not in costs]
        if missing and not out_of_time():
            measure(missing)

    ask([(0, n_atoms, o) for o in range(n_options)])
    every = [(i, i + n, o) for n in range(1, n_atoms + 1) for i in range(n_atoms - n + 1)
             for o in range(n_options)]
    if len(every) <= exhaustive:
        ask(every)
    if n_atoms > 1:
        ask([(a, a + 1, o) for a in range(n_atoms) for o in range(n_options)])
    if n_atoms > 2:
        ask([(a, a + 2, o) for a in range(n_atoms - 1) for o in range(n_options)])
    def known(i: int, j: int, o: int) -> float:
        return costs.get((i, j, o), math.inf)

    passes, complete = 0, False
    while not out_of_time():
        passes += 1
        measured, best = best_path(n_atoms, n_options, known)
        predicted, path = best_path(n_atoms, n_options, Estimates(n_atoms, n_options, costs).cost)
        if progress is not None:
            progress(f"pass {passes}: {len(path)} segment(s), {_short(predicted)} estimated",
                     measured)
        if predicted >= (1 - min_gain) * measured:  # nothing unmeasured promises enough
            path = best
        todo = [c for c in path if c not in costs]
        if not todo:
            todo = [(i, j, o) for i, j, _ in path for o in range(n_options)
                    if (i, j, o) not in costs]
        if not todo:
            complete = True
            break
        before = len(costs)
        ask(todo)
        if len(costs) == before:  # nothing could be measured (out of time)
            break
    predicted, path = best_path(n_atoms, n_options, known)
    return SearchResult(path, predicted, complete, passes)


def _short(t: float) -> str:
    return f"{t * 1e3:.3f} ms" if math.isfinite(t) else "nothing"
