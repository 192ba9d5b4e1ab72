"""Measuring a candidate: a (part of a) model, partitioned some way, built and timed on the real
tensors that cross its boundary, each measurement cached.

    m = Measurer(tensors)                  # tensors: every value of one host run, by ONNX name
    m.measure(part)                        # Measurement(seconds=0.0012, runs=9) or why not

The module measured is what the executor would run: main on the host, its regions on their
backends, a device copy wherever a tensor crosses devices. So the time includes moving the
boundary tensors in and out, the executor's own overhead and the backend's per-call cost.

A candidate that cannot be built, fails its first run, or whose outputs are not those of the
host run within the project's tolerance is measured as impossible (``seconds=None``, ``why``):
the search never picks it.

Timing: one warm-up run (a C backend compiles its specialization there), then runs until at
least ``min_runs`` and ``min_time`` seconds (at most ``max_runs`` or ``max_time``); the run a
quarter of the way up from the fastest counts (on a shared machine the slow runs are other
programs' doing, and comparing candidates measured minutes apart needs what is theirs alone).
Whole-model comparisons (``compare``) alternate the candidates, in rounds of shuffled order,
so drift and a cold cache after another engine's run hit each alike. The garbage collector is paused while timing.

The cache key is a sha256 of: the module's content (ops, attributes, weights, each region's
backend and version; no names), the boundary tensors' shapes and dtypes (and values, for small
integer tensors: shapes computed in the graph), the thread setting, the machine, byoc's and
numpy's versions (``environment.py``).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..ir import IRModule
from ..runtime.threads import settle, warm_up
from .cache import MeasurementCache
from .digest import Digests
from .environment import backend_version, byoc_source_digest, machine, thread_setting

KEY_VERSION = "5"  # bump when what a measurement means changes


@dataclass(frozen=True)
class Measurement:
    seconds: float | None  # the median run, None if the candidate cannot run
    why: str = ""  # why it cannot
    runs: int = 0
    cached: bool = False
    key: str = ""  # the cache key: equal keys, the same work placed the same way


@dataclass
class MeasureStats:
    measured: int = 0
    cached: int = 0
    seconds: float = 0.0  # spent measuring (building included)


def _signature(name: str, value) -> str:
    a = np.asarray(value)
    text = f"{a.dtype.str}{a.shape}"
    if a.dtype.kind in "iub" and a.size <= 64:
        text += repr(a.tolist())  # shape values: what they hold decides the work
    return text


class Measurer:
    """Times candidates on the tensors of one host run."""

    def __init__(self, tensors: Mapping[str, np.ndarray], cache: MeasurementCache | None = None,
                 digests: Digests | None = None, *, min_runs: int = 5, min_time: float = 0.05,
                 max_runs: int = 50, max_time: float = 1.0, check: bool = True,
                 threads: int | None = None):
        self.tensors = tensors
        self.cache = cache if cache is not None else MeasurementCache()
        self.digests = digests or Digests(backend_version)
        self.min_runs, self.min_time = min_runs, min_time
        self.max_runs, self.max_time = max_runs, max_time
        self.check = check
        from ..runtime.threads import resolve

        self.threads = resolve(threads)  # every build measured uses this count
        self.stats = MeasureStats()
        self.memo: dict[str, dict] = {}  # this session's measurements (the cache may be off)
        self.environment = json.dumps({"machine": machine(), "threads": thread_setting(self.threads),
                                       "byoc": byoc_source_digest(), "numpy": np.__version__,
                                       "key": KEY_VERSION}, sort_keys=True)

    def key(self, part: IRModule, inputs: list[str]) -> str:
        h = hashlib.sha256(self.environment.encode())
        h.update(self.digests.module(part).encode())
        for name in inputs:
            h.update(_signature(name, self.tensors[name]).encode())
        return h.hexdigest()

    def measure(self, part: IRModule, inputs: list[str] | None = None) -> Measurement:
        """Time ``part`` (its main's parameters named as the tensors they take, or given by
        ``inputs``, the tensor name of each parameter in order)."""
        params = [p.name for p in part.main.params]
        inputs = inputs or params
        key = self.key(part, inputs)
        hit = self.memo.get(key)  # measured already in this session: not counted again
        if hit is None:
            hit = self.cache.get(key)
            if hit is not None and "seconds" in hit:
                self.memo[key] = hit
                self.stats.cached += 1
        if hit is not None and "seconds" in hit:
            return Measurement(hit["seconds"], hit.get("why", ""), hit.get("runs", 0), True, key)
        started = time.perf_counter()
        result = self._measure(part, dict(zip(params, (self.tensors[n] for n in inputs))))
        self.stats.seconds += time.perf_counter() - started
        self.stats.measured += 1
        payload = {"seconds": result.seconds, "why": result.why, "runs": result.runs}
        self.memo[key] = payload
        self.cache.put(key, payload)
        return Measurement(result.seconds, result.why, result.runs, False, key)

    def _measure(self, part: IRModule, feeds: dict) -> Measurement:
        import byoc

        try:
            exe = byoc.build(part, threads=self.threads)
            outputs = exe.run(feeds)
        except Exception as exc:  # any failure: this candidate cannot run here
            return Measurement(None, _why(exc))
        if self.check:
            wrong = self._wrong(outputs)
            if wrong:
                return Measurement(None, wrong)
        times: list[float] = []
        clock = time.perf_counter
        enabled = gc.isenabled()
        gc.disable()
        try:
            settle()
            start = clock()
            while True:
                t0 = clock()
                exe.run(feeds)
                times.append(clock() - t0)
                spent = clock() - start
                if len(times) >= self.max_runs or spent >= self.max_time or (
                        len(times) >= self.min_runs and spent >= self.min_time):
                    break
        except Exception as exc:
            return Measurement(None, _why(exc))
        finally:
            if enabled:
                gc.enable()
        return Measurement(low_quartile(times), "", len(times))

    def compare(self, parts: list[tuple[IRModule, list[str]]]) -> list[Measurement]:
        """Time several modules in alternating runs (drift on the machine hits each alike),
        cached as one measurement: for choosing between whole-model placements."""
        keys = [self.key(p, inputs) for p, inputs in parts]
        key = hashlib.sha256(("compare:" + ",".join(keys)).encode()).hexdigest()
        hit = self.cache.get(key)
        if hit is not None and isinstance(hit.get("seconds"), list) \
                and len(hit["seconds"]) == len(parts):
            self.stats.cached += 1
            return [Measurement(s, w, hit.get("runs", 0), True)
                    for s, w in zip(hit["seconds"], hit.get("why", [""] * len(parts)))]
        import byoc

        started = time.perf_counter()
        runners, out = [], []
        for part, inputs in parts:
            feeds = dict(zip([p.name for p in part.main.params],
                             (self.tensors[n] for n in inputs)))
            try:
                exe = byoc.build(part, threads=self.threads)
                exe.run(feeds)
                runners.append((exe, feeds))
                out.append(None)
            except Exception as exc:
                runners.append(None)
                out.append(Measurement(None, _why(exc)))
        times: list[list[float]] = [[] for _ in parts]
        clock = time.perf_counter
        enabled = gc.isenabled()
        gc.disable()
        try:
            start = clock()
            rounds = 0
            live = [k for k, r in enumerate(runners) if r is not None]
            shuffle = random.Random(0).shuffle  # the same orders every time: deterministic
            while True:
                # Each round in another order: a run right after another engine's finds the
                # caches cold, so no candidate may always follow the same one.
                shuffle(live)
                rounds += 1
                for k in live:
                    exe, feeds = runners[k]
                    settle()  # another engine's threads may still spin on a core
                    # untimed: the caches are the engine before's, an idle core comes back slow
                    warm_up(functools.partial(exe.run, feeds))
                    for _ in range(COMPARE_BLOCK):
                        t0 = clock()
                        exe.run(feeds)
                        times[k].append(clock() - t0)
                spent = clock() - start
                if rounds >= self.max_runs or spent >= 2 * self.max_time or (
                        rounds >= max(self.min_runs, 7) and spent >= 2 * self.min_time):
                    break
        finally:
            if enabled:
                gc.enable()
        result = [m if m is not None else Measurement(low_quartile(t), "", len(t))
                  for m, t in zip(out, times)]
        self.stats.seconds += time.perf_counter() - started
        self.stats.measured += 1
        self.cache.put(key, {"seconds": [m.seconds for m in result],
                             "why": [m.why for m in result], "runs": rounds})
        return result

    def _wrong(self, outputs: Mapping) -> str:
        from ..compare import compare_output

        for name, got in outputs.items():
            want = self.tensors.get(name)
            if want is None or not isinstance(got, np.ndarray) or not isinstance(want, np.ndarray):
                continue
            c = compare_output(name, got, want)
            if not c.ok:
                return (f"wrong results: output {name!r} differs from the host run by "
                        f"{c.max_abs_err:.3g} (relative {c.rel_err:.3g}) {c.note}").strip()
        return ""


# Each candidate of a comparison runs once untimed, then this many times timed, in each round:
# onnxruntime's intra-op threads spin on after a run, and a 2-thread native run right after one
# waited for its second core (ppocr_v4_rec at 2 threads: native alone measured slower than
# onnxruntime in strictly alternating runs, 1.16x faster in blocks).
COMPARE_BLOCK = 3


def low_quartile(times: list[float]) -> float:
    """The run a quarter of the way up from the fastest: what the work costs, with the runs a
    busy machine stretched (preempted, evicted from cache) left out, but not only the one
    luckiest run."""
    ordered = sorted(times)
    return ordered[(len(ordered) - 1) // 4]


def _why(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
