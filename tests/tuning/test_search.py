"""The search alone, on cost tables with known optima: it must find what brute force finds."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from byoc.tuning.search import Estimates, best_path, search


def brute_force(n_atoms: int, n_options: int, cost) -> float:
    """Every way to cut the atoms into segments, every option for each segment."""
    best = math.inf
    for mask in range(1 << (n_atoms - 1)):
        cuts = [0] + [k + 1 for k in range(n_atoms - 1) if mask >> k & 1] + [n_atoms]
        segs = list(zip(cuts, cuts[1:]))
        for opts in itertools.product(range(n_options), repeat=len(segs)):
            best = min(best, sum(cost(i, j, o) for (i, j), o in zip(segs, opts)))
    return best


def node_cost_model(n_atoms: int, n_options: int, seed: int):
    """Known costs as a backend has them: each atom's work on each option, a fixed cost per
    segment (a call, moving its tensors in and out), some atoms an option cannot run."""
    r = random.Random(seed)
    work = [[r.uniform(1, 10) for _ in range(n_options)] for _ in range(n_atoms)]
    overhead = [r.uniform(0, 6) for _ in range(n_options)]
    for _ in range(n_atoms // 3):
        work[r.randrange(n_atoms)][r.randrange(1, n_options)] = math.inf  # unsupported
    overhead[0] = 0.5  # the host always runs everything

    def cost(i, j, o):
        return sum(work[a][o] for a in range(i, j)) + overhead[o]

    return cost


def lazily(n_atoms, n_options, cost, out_of_time=lambda: False):
    costs: dict = {}
    asked: list = []

    def measure(cands):
        for c in cands:
            if out_of_time():
                return
            asked.append(c)
            costs[c] = cost(*c)

    return search(n_atoms, n_options, costs, measure, out_of_time, exhaustive=0,
                  min_gain=0.0), costs, asked


@pytest.mark.parametrize("seed", range(40))
def test_search_finds_the_brute_force_optimum(seed):
    n_atoms, n_options = 2 + seed % 6, 2 + seed % 3
    cost = node_cost_model(n_atoms, n_options, seed)
    want = brute_force(n_atoms, n_options, cost)
    result, costs, asked = lazily(n_atoms, n_options, cost)
    assert result.complete
    assert result.predicted == pytest.approx(want)
    assert sum(cost(*c) for c in result.path) == pytest.approx(want)
    # segments cover the atoms in order
    assert [c[0] for c in result.path][0] == 0 and result.path[-1][1] == n_atoms
    assert all(a[1] == b[0] for a, b in zip(result.path, result.path[1:]))
    assert len(asked) == len(set(asked)), "a candidate was measured twice"


def test_search_measures_far_fewer_than_every_segment():
    n_atoms, n_options = 16, 3
    cost = node_cost_model(n_atoms, n_options, 7)
    result, costs, asked = lazily(n_atoms, n_options, cost)
    every = n_atoms * (n_atoms + 1) // 2 * n_options
    assert result.predicted == pytest.approx(best_path(n_atoms, n_options, cost)[0])
    assert len(asked) < every / 2, (len(asked), every)


def test_exact_dynamic_program_matches_brute_force_on_arbitrary_costs():
    r = random.Random(3)
    for _ in range(30):
        n_atoms, n_options = r.randint(1, 6), r.randint(1, 3)
        table = {(i, j, o): r.uniform(0, 10) for i in range(n_atoms)
                 for j in range(i + 1, n_atoms + 1) for o in range(n_options)}
        got, path = best_path(n_atoms, n_options, lambda i, j, o: table[(i, j, o)])
        assert got == pytest.approx(brute_force(n_atoms, n_options,
                                                lambda i, j, o: table[(i, j, o)]))
        assert sum(table[c] for c in path) == pytest.approx(got)


def test_budget_stops_with_the_best_measured_placement():
    n_atoms, n_options = 10, 3
    cost = node_cost_model(n_atoms, n_options, 11)
    calls = {"n": 0}

    def out_of_time():
        calls["n"] += 1
        return calls["n"] > 12  # a few measurements, then the budget is gone

    result, costs, asked = lazily(n_atoms, n_options, cost, out_of_time)
    assert not result.complete
    assert result.path, "some placement is always returned once a whole-model option ran"
    assert all(c in costs for c in result.path), "the plan uses measured candidates only"
    assert result.predicted == pytest.approx(sum(costs[c] for c in result.path))


def test_ties_are_broken_the_same_way_every_time():
    cost = lambda i, j, o: float(j - i)  # noqa: E731 - every placement costs the same
    paths = {tuple(lazily(5, 3, cost)[0].path) for _ in range(3)}
    assert len(paths) == 1
    (path,) = paths
    assert path == ((0, 5, 0),), "ties go to the longest segment and the first option"


def test_estimates_take_off_what_merging_saved_at_each_boundary():
    costs = {(0, 1, 0): 3.0, (1, 2, 0): 3.0, (2, 3, 0): 3.0, (3, 4, 0): 3.0,
             (0, 2, 0): 5.0, (1, 3, 0): 6.0, (2, 4, 0): 4.0}
    e = Estimates(4, 1, costs)
    # boundaries 1, 2, 3 saved 1, 0 and 2
    assert e.cost(0, 3, 0) == pytest.approx((9.0 - 1.0 - 0.0) * 0.9)
    assert e.cost(0, 4, 0) == pytest.approx((12.0 - 3.0) * 0.9)
    assert e.cost(0, 2, 0) == 5.0  # measured wins
    assert Estimates(2, 1, {(0, 1, 0): math.inf, (1, 2, 0): 1.0}).cost(0, 2, 0) == math.inf
    # a boundary whose pair is not measured: the most any other saved
    e = Estimates(3, 1, {(0, 1, 0): 3.0, (1, 2, 0): 3.0, (2, 3, 0): 3.0, (0, 2, 0): 4.0})
    assert e.cost(1, 3, 0) == pytest.approx((6.0 - 2.0) * 0.9)


def test_the_minimum_gain_trims_the_search_and_stays_close():
    for seed in range(20):
        n_atoms, n_options = 10, 3
        cost = node_cost_model(n_atoms, n_options, seed)
        exact, _, asked_exact = lazily(n_atoms, n_options, cost)
        costs: dict = {}
        asked: list = []

        def measure(cands):
            for c in cands:
                asked.append(c)
                costs[c] = cost(*c)

        trimmed = search(n_atoms, n_options, costs, measure, lambda: False, exhaustive=0)
        assert trimmed.complete
        assert trimmed.predicted <= exact.predicted * 1.02 + 1e-12
        assert len(asked) <= len(asked_exact)
