"""``byoc.tune``: measure where each part of a model runs fastest, and write it as a plan.

    plan = byoc.tune(mod, ["native", "onnxruntime"], inputs, budget=300)
    plan.save("plan.json")
    part = byoc.partition(mod, plan=plan)      # the same placement, nothing measured

1. One host run of the whole model captures every tensor (``exe.run(inputs, capture="all")``).
2. main's nodes are cut into atoms (``candidates.cut_atoms``); a segment is any run of atoms.
3. The options for a segment: the host; each backend alone (what it does not take stays on the
   host); the backends in each priority order (every order of up to three backends, else the
   listed one), where what one does not take goes to the next. Options that place a segment's
   nodes the same way are one candidate, measured once.
4. The search (``search.py``) asks for segments; each is lifted into a module of its own,
   partitioned for the option, built and timed on its real boundary tensors (``measure.py``,
   cached).
5. The chosen placement is built whole and timed against every whole-model option within 1.5x
   of the best, in alternating runs; whichever is fastest end to end is the plan.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..analysis import HOST_REASONS, is_control_flow, node_key
from ..backend import Backend, resolve
from ..errors import ByocError, ByocWarning
from ..ir import Call, Function, GlobalVar, IRModule, post_order
from .cache import MeasurementCache
from .candidates import cut_atoms, segment_function
from .digest import Digests
from .environment import backend_version, machine, thread_setting, versions
from .journal import BudgetClock
from .measure import Measurer
from .plan import FORMAT, HOST, VERSION, Plan, seconds
from .search import EXHAUSTIVE, MIN_GAIN, Candidate, search
from .view import ModelView, model_view

DEFAULT_ATOMS = 24
RIVALS = 1.5  # whole-model options within this factor of the best are timed against the plan
# Where the budget left no time to time the plan whole, a placement of several segments is kept
# only if the sum of its segments beats the best whole-model option by this much: the sums
# read 10-20% low (a segment timed alone runs with warm caches; predicted / measured 0.80-0.89)
UNVERIFIED_GAIN = 0.85


@dataclass
class Progress:
    """What the tuner reports as it goes (to ``progress``)."""

    message: str
    measured: int
    cached: int
    best_s: float | None
    elapsed_s: float


def tune(mod: IRModule, backends: str | Backend | Iterable[str | Backend],
         inputs: Mapping[str, np.ndarray] | None = None, *, budget: float | None = None,
         atoms: int = DEFAULT_ATOMS, progress: Callable[[Progress], None] | None = None,
         cache: MeasurementCache | None = None, name: str = "", seed: int = 0,
         measurer: Callable[[Mapping[str, np.ndarray]], Measurer] | None = None,
         fallback: str | None = None, threads: int | None = None,
         exhaustive: int = EXHAUSTIVE, min_gain: float = MIN_GAIN) -> Plan:
    """A measured placement of ``mod`` over ``backends`` (and the host), as a Plan.

    ``inputs`` by ONNX name (made up from ``seed`` where missing); ``budget`` in seconds stops
    the search with the best placement measured so far; ``atoms`` is how finely main is cut
    (more: finer placements, more to measure). ``progress`` gets a Progress now and then.
    ``measurer`` makes the Measurer from the captured tensors (a cost model instead of the
    clock, say). ``fallback="next"`` (or ``"host"``) builds and runs the chosen plan once that
    way, and writes any region that had to move into the plan (``moves``). ``threads``: the
    count every build measured uses (default: ``byoc.set_threads``, ``$BYOC_THREADS``, cores).
    ``exhaustive`` and ``min_gain`` tune the search (``search.py``): a space of at most that
    many candidates is measured whole; an unmeasured placement must promise that share over
    the best measured one to be measured (0: search until the estimates promise nothing).
    """
    import byoc

    from ..inputs import random_inputs
    from ..runtime.fallback import check_fallback
    from ..runtime.threads import resolve as resolve_threads

    check_fallback(fallback)
    threads = resolve_threads(threads)
    started = time.perf_counter()
    chosen = resolve(backends)
    if not chosen:
        raise ByocError("tune needs at least one backend")
    names = [b.name for b in chosen]
    feeds = random_inputs(mod.main, seed=seed, given=dict(inputs or {}))
    digests = Digests(backend_version)
    view = model_view(mod, chosen, digests)
    run = byoc.build(mod, threads=threads).run(feeds, capture="all")
    tensors = {**{k: np.asarray(v) for k, v in feeds.items()}, **run.tensors}
    custom = measurer is not None
    measurer = measurer(tensors) if measurer else Measurer(tensors, cache, digests,
                                                           threads=threads)
    cuts = cut_atoms(view, tensors, atoms)
    options = option_lists(names)
    labels = [",".join(o) or HOST for o in options]
    tuner = _Tuner(mod, view, cuts, options, labels, measurer, tensors)
    # A budget's stop is replayed by the same tune (journal.py): the same plan, nothing new
    # measured. Not for a measurer of the caller's own (its costs need not be cached).
    clock = BudgetClock(budget, started, None if custom else measurer.cache,
                        None if custom else _journal_key(measurer, mod, labels, atoms,
                                                         exhaustive, min_gain, budget))
    out_of_time = clock.out_of_time

    def report(message: str, best: float | None = None) -> None:
        if progress is not None:
            progress(Progress(message, measurer.stats.measured, measurer.stats.cached,
                              best if best is None or math.isfinite(best) else None,
                              time.perf_counter() - started))

    def measure(cands: list[Candidate]) -> None:
        for c in cands:
            if out_of_time():
                return
            tuner.measure(c)
            report(tuner.describe(c))

    n_atoms = len(cuts) - 1
    report(f"{len(view.calls)} nodes in {n_atoms} atoms, options: {', '.join(labels)}")
    tuner.measure((0, n_atoms, 0))  # the host alone: always measured, whatever the budget
    result = search(n_atoms, len(options), tuner.costs, measure, out_of_time,
                    lambda msg, best: report(msg, best), exhaustive, min_gain)
    path = result.path or [(0, n_atoms, 0)]
    _warn_if_no_backend_matches(tuner, n_atoms, labels)
    data = tuner.plan_data(path, result.predicted, name)
    # The chosen placement built whole, timed against every whole-model option that measured
    # near the best, in alternating runs: the plan is whichever is fastest end to end.
    whole = [(0, n_atoms, o) for o in range(len(options))]
    best_whole = min(tuner.costs.get(c, math.inf) for c in whole)
    chosen_key = tuner.keys.get(path[0]) if len(path) == 1 else None
    rivals = [c for c in whole if tuner.costs.get(c, math.inf) <= RIVALS * best_whole
              and (chosen_key is None or tuner.keys.get(c) != chosen_key)]
    rivals = [c for k, c in enumerate(rivals)  # each placement once
              if tuner.keys.get(c) not in {tuner.keys.get(r) for r in rivals[:k]}]
    measured = tuner.costs.get(path[0]) if len(path) == 1 else None
    if rivals and not clock.may_compare():
        best = min(rivals, key=tuner.costs.__getitem__)  # ties: the option listed first
        if len(path) > 1 and result.predicted > UNVERIFIED_GAIN * tuner.costs[best]:
            data = tuner.plan_data([best], tuner.costs[best], name,
                                   why=f"the budget left no time to time the plan whole: its "
                                       f"segments summed {_ms(result.predicted)}, within "
                                       f"{round((1 - UNVERIFIED_GAIN) * 100)}% of "
                                       f"{labels[best[2]]} alone ({_ms(tuner.costs[best])}), "
                                       f"and such sums read low")
            measured = tuner.costs[best]
    elif rivals:
        report(f"timing the plan against {len(rivals)} whole-model option(s), interleaved")
        from .apply import apply_plan

        tuned = apply_plan(mod, Plan(data))
        times = measurer.compare([_fed_by_name(tuned)] + [
            _fed_by_name(tuner.partitioned(*c)) for c in rivals])
        measured = times[0].seconds
        ranked = sorted((t.seconds, k) for k, t in enumerate(times) if t.seconds is not None)
        if ranked and ranked[0][1] != 0:
            winner = rivals[ranked[0][1] - 1]
            data = tuner.plan_data([winner], tuner.costs[winner], name,
                                   why=f"{labels[winner[2]]} alone measured "
                                       f"{_ms(ranked[0][0])} end to end, the segments "
                                       f"{_ms(measured)}")
            measured = ranked[0][0]
        data["latency"]["compared"] = {
            "tuned" if k == 0 else labels[rivals[k - 1][2]]: seconds(t.seconds)
            for k, t in enumerate(times)}
    clock.record()
    data["latency"]["measured_s"] = seconds(measured)
    data["search"]["complete"] = result.complete
    if fallback is not None:
        _record_moves(mod, data, feeds, fallback, threads)
    report(f"done: {len(data['regions'])} region(s), predicted {_ms(data['latency']['predicted_s'])}"
           f", measured {_ms(measured)}", measured)
    return Plan(data)


def _warn_if_no_backend_matches(tuner: _Tuner, n_atoms: int, labels: list[str]) -> None:
    """A warning when no backend's whole-model outputs matched the host run's: the plan then
    holds only segments whose own outputs matched, and may be slower than a backend alone (an
    ill-conditioned output, as a softmax of logits near 1e7, differs from run to run)."""
    if len(labels) > 1 and all(tuner.why.get((0, n_atoms, o), "").startswith("wrong results")
                               for o in range(1, len(labels))):
        warnings.warn(f"no backend's outputs of the whole model match the host run's within "
                      f"the tolerance ({tuner.why[(0, n_atoms, 1)]}); the plan keeps only "
                      f"segments whose outputs matched, and may be slower than "
                      f"{labels[1]} alone", ByocWarning, stacklevel=3)


def _journal_key(measurer: Measurer, mod: IRModule, labels: list[str], atoms: int,
                 exhaustive: int, min_gain: float, budget: float | None) -> str | None:
    """What decides where a budget stops this tune's search, as a journal key: the whole
    model's measurement key (machine, threads, versions, its work and input tensors) and the
    search's settings."""
    import hashlib
    import json

    if budget is None:
        return None
    text = json.dumps({"journal": 1, "model": measurer.key(*_fed_by_name(mod)),
                       "options": labels, "atoms": atoms, "exhaustive": exhaustive,
                       "min_gain": min_gain, "budget": budget, "rivals": RIVALS},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _record_moves(mod: IRModule, data: dict, feeds: Mapping, fallback: str, threads: int
                  ) -> None:
    """Build and run the plan once with ``fallback``; a region that moved changes backend in
    the plan, and ``moves`` says from where, to where and why."""
    import byoc

    from .apply import apply_plan

    exe = byoc.build(apply_plan(mod, Plan(data)), fallback=fallback, threads=threads)
    exe.run(dict(feeds))
    if not exe.moves and not exe.fallbacks:
        return
    by_nodes = {frozenset(r["nodes"]): r for r in data["regions"]}
    part = apply_plan(mod, Plan(data))
    for name, why in sorted({**exe.fallbacks, **exe.moves}.items()):
        region = by_nodes.get(frozenset(_region_nodes(part[name])))
        if region is None:
            continue
        runner = exe.external.get(name)
        to = getattr(runner, "now", None) or (
            exe.mod[name].attrs.get("Compiler") if name in exe.mod.functions else HOST)
        if name in exe.fallbacks:
            to = HOST
        data["moves"].append({"region": region["id"], "from": region["backend"], "to": to,
                              "why": why})
        region["backend"] = to


def option_lists(names: list[str]) -> list[list[str]]:
    """The host, each backend alone, then the priority orders: every order of all of them when
    there are two or three, else the listed one."""
    import itertools

    orders = [list(p) for p in itertools.permutations(names)] if len(names) in (2, 3) else (
        [names] if len(names) > 3 else [])
    return [[], *[[n] for n in names], *orders]


def _fed_by_name(part: IRModule) -> tuple[IRModule, list[str]]:
    """A whole-model module and the tensor each parameter takes (the input of that name)."""
    return part, [p.name for p in part.main.params]


def _ms(t: float | None) -> str:
    return "-" if t is None or not math.isfinite(t) else f"{t * 1e3:.3f} ms"


class _Tuner:
    """The candidates of one tune: their modules, measurements and what the plan says of them."""

    def __init__(self, mod: IRModule, view: ModelView, cuts: list[int], options: list[list[str]],
                 labels: list[str], measurer: Measurer, tensors: Mapping[str, np.ndarray]):
        self.mod, self.view, self.cuts = mod, view, cuts
        self.options, self.labels = options, labels
        self.measurer, self.tensors = measurer, tensors
        self.costs: dict[Candidate, float] = {}
        self.why: dict[Candidate, str] = {}
        self.regions: dict[Candidate, int] = {}  # regions the option's partition made
        self.keys: dict[Candidate, str] = {}  # equal keys: the same placement of the same work
        self.alike_done: set[tuple[int, int]] = set()
        self._segments: dict[tuple[int, int], tuple[Function, list[str]]] = {}
        self._parts: dict[Candidate, IRModule] = {}
        self.attrs = {k: v for k, v in mod.attrs.items() if k != HOST_REASONS}

    def segment(self, i: int, j: int) -> tuple[Function, list[str]]:
        if (i, j) not in self._segments:
            self._segments[(i, j)] = segment_function(self.view, self.cuts[i], self.cuts[j])
        return self._segments[(i, j)]

    def partitioned(self, i: int, j: int, o: int) -> IRModule:
        """Atoms i..j-1 as a module partitioned for option o (made once)."""
        from ..partition import partition

        found = self._parts.get((i, j, o))
        if found is None:
            func, _ = self.segment(i, j)
            sub = IRModule({"main": func}, dict(self.attrs))
            # control flow on the host, its bodies placed node by node, as a plan says
            found = self._parts[(i, j, o)] = (partition(sub, self.options[o],
                                                        whole_control_flow=False)
                                              if self.options[o] else sub)
        return found

    def measure(self, c: Candidate) -> None:
        """Measure candidate ``c``, and fill in every option placing its segment alike."""
        i, j, o = c
        try:
            func, inputs = self.segment(i, j)
            part = self.partitioned(i, j, o)
        except ByocError as exc:
            self.costs[c], self.why[c] = math.inf, f"cannot partition: {exc}"
            return
        self.regions[c] = sum(1 for n, f in part.functions.items() if f.attrs.get("Compiler"))
        m = self.measurer.measure(part, inputs)
        self.keys[c] = m.key
        self.costs[c] = m.seconds if m.seconds is not None else math.inf
        self.why[c] = m.why
        if (i, j) not in self.alike_done:
            self.alike_done.add((i, j))
            self._key_alike(i, j, inputs)
        for oo in range(len(self.options)):
            other = (i, j, oo)
            if other != c and other not in self.costs and self.keys.get(other) == m.key:
                self.costs[other], self.why[other] = self.costs[c], self.why[c]
                self.regions[other] = self.regions[c]

    def _key_alike(self, i: int, j: int, inputs: list[str]) -> None:
        """The key of every option for atoms i..j-1, so that options placing them alike share
        one measurement. A priority order whose first backend takes every node places them as
        that backend alone does: its key is that one's, without partitioning again."""
        single = {o[0]: k for k, o in enumerate(self.options) if len(o) == 1}
        whole: dict[str, bool] = {}  # backend -> it takes every node of the segment
        for oo, option in enumerate(self.options):
            other = (i, j, oo)
            if other in self.keys:
                if len(option) == 1:
                    whole[option[0]] = self._takes_all(other)
                continue
            first = (i, j, single[option[0]]) if option else None
            if len(option) > 1 and whole.get(option[0]) and first in self.keys:
                self.keys[other] = self.keys[first]
                continue
            try:
                self.keys[other] = self.measurer.key(self.partitioned(i, j, oo), inputs)
            except ByocError:
                continue
            if len(option) == 1:
                whole[option[0]] = self._takes_all(other)

    def _takes_all(self, c: Candidate) -> bool:
        """True if candidate c's partition left no node of the segment on the host."""
        from ..analysis import host_calls

        part = self._parts.get(c)
        return part is not None and not any(
            not isinstance(e.op, GlobalVar) for e in host_calls(post_order(part.main.body)))

    def describe(self, c: Candidate) -> str:
        i, j, o = c
        first, last = self.view.names[self.cuts[i]], self.view.names[self.cuts[j] - 1]
        t = self.costs.get(c, math.inf)
        return f"{self.labels[o]} on atoms {i}..{j - 1} ({first}..{last}): " + (
            _ms(t) if math.isfinite(t) else f"cannot run: {self.why.get(c, '')}")

    # -- the plan --------------------------------------------------------------------------------
    def plan_data(self, path: list[Candidate], predicted: float, name: str, why: str = "") -> dict:
        view, labels = self.view, self.labels
        node_segment: dict[int, str] = {}
        node_region: dict[int, str] = {}
        bodies: dict[str, list[str]] = {}
        index = view.index()
        segments, regions = [], []
        for s, (i, j, o) in enumerate(path):
            sid = f"s{s}"
            lo, hi = self.cuts[i], self.cuts[j]
            for k in range(lo, hi):
                node_segment[k] = sid
                if is_control_flow(view.call(k)) and self.options[o]:
                    bodies[view.names[k]] = list(self.options[o])
            part = self.partitioned(i, j, o)
            from ..extract import regions as lifted

            for region in lifted(part, bodies=False):
                rid = f"r{len(regions)}"
                nodes = _region_nodes(region.func)
                for n in nodes:
                    node_region[index[n]] = rid
                regions.append({
                    "id": rid, "backend": region.func.attrs["Compiler"], "segment": sid,
                    "nodes": nodes,
                    "inputs": [self._tensor(n) for n in region.input_names],
                    "outputs": [self._tensor(n) for n in region.output_names]})
            segments.append(self._segment(sid, i, j, o, why))
        nodes = [{"node": view.names[k], "op": view.call(k).op_name,
                  "fingerprint": view.fingerprints[k], "segment": node_segment[k],
                  "region": node_region.get(k, HOST)} for k in range(len(view.calls))]
        n_atoms = len(self.cuts) - 1
        baselines = {self.labels[o]: seconds(_finite(self.costs.get((0, n_atoms, o))))
                     for o in range(len(self.options))}
        graph_name = self.mod.attrs.get("graph_name", "")
        latency = {"predicted_s": seconds(_finite(predicted)), "measured_s": None,
                   "baselines": baselines, "atom_mix_ratio": self.atom_mix_ratio()}
        return {
            "format": FORMAT, "version": VERSION,
            "model": {"name": name or graph_name, "digest": view.digest,
                      "nodes": len(view.calls),
                      "inputs": [self._tensor(p.name) for p in self.mod.main.params]},
            "backends": [o[0] for o in self.options if len(o) == 1],
            "machine": machine(), "threads": thread_setting(self.measurer.threads),
            "versions": versions([o[0] for o in self.options if len(o) == 1]),
            "search": {"method": "segments-dp", "atoms": n_atoms,
                       "cuts": [view.names[c] for c in self.cuts[1:-1]],
                       "options": labels, "measured": len(self.costs), "complete": True},
            "latency": latency,
            "segments": segments, "regions": regions, "nodes": nodes, "bodies": bodies,
            "moves": []}

    def atom_mix_ratio(self) -> float | None:
        """What mixing engines could gain at most, by the atoms' own times: the sum over the
        atoms of each one's fastest option, over the sum of the best single option's (each
        atom timed alone on each: the per-call costs of both sums alike). 0.95: even an atom
        by atom placement with free crossings is 5% faster than one engine. None until every
        atom is measured on every option."""
        n_atoms = len(self.cuts) - 1
        rows = [[_finite(self.costs.get((i, i + 1, o))) for o in range(len(self.options))]
                for i in range(n_atoms)]
        if not rows or any(t is None for row in rows for t in row):
            return None
        single = min(sum(row[o] for row in rows) for o in range(len(self.options)))
        return round(sum(min(row) for row in rows) / single, 4) if single > 0 else None

    def _tensor(self, name: str) -> dict:
        v = self.tensors.get(name)
        if isinstance(v, np.ndarray):
            return {"name": name, "shape": list(v.shape), "dtype": v.dtype.name}
        return {"name": name, "shape": None, "dtype": None}

    def _segment(self, sid: str, i: int, j: int, o: int, why: str) -> dict:
        lo, hi = self.cuts[i], self.cuts[j]
        times, errors = {}, {}
        for oo, label in enumerate(self.labels):
            c = (i, j, oo)
            t = self.costs.get(c)
            times[label] = seconds(_finite(t))
            if c not in self.costs:
                errors[label] = "not measured (the search stopped first)"
            elif self.why.get(c):
                errors[label] = self.why[c]
        chosen = self.labels[o]
        mine_key = self.keys.get((i, j, o))
        for k, label in enumerate(self.labels):
            if label in times and label != chosen and self.keys.get((i, j, k)) == mine_key \
                    and mine_key is not None:
                errors[label] = f"places these nodes as {chosen} does"
        ranked = sorted((t, k) for k, label in enumerate(self.labels)
                        if (t := times.get(label)) is not None and label != chosen
                        and self.keys.get((i, j, k)) != mine_key)
        runner = self.labels[ranked[0][1]] if ranked else None
        if not why:
            mine = times[chosen]
            if runner is None:
                why = f"{chosen} is the only option measured to run here"
            else:
                other = ranked[0][0]
                gain = (other - mine) / other if other and mine is not None else 0.0
                why = (f"{chosen} {_ms(mine)}, {gain:.0%} faster than {runner} ({_ms(other)})"
                       if gain > 0 else f"{chosen} {_ms(mine)}, as fast as {runner}")
        return {"id": sid, "first": self.view.names[lo], "last": self.view.names[hi - 1],
                "nodes": hi - lo, "time_s": times, "errors": errors, "chosen": chosen,
                "runner_up": runner, "why": why}


def _finite(t: float | None) -> float | None:
    return t if t is not None and math.isfinite(t) else None


def _region_nodes(func: Function) -> list[str]:
    """The nodes of a lifted region (a composite counts as the node it stands for)."""
    return [node_key(e) for e in post_order(func.body)
            if isinstance(e, Call) and not isinstance(e.op, GlobalVar)]

