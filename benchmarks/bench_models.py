"""Real models on byoc's host executor and on onnxruntime, side by side, 1 thread each.

    python benchmarks/bench_models.py [--repeat 10] [--only bert_tiny,gru] [--json out.json]

Prints per-model medians (interleaved runs, so machine drift hits both alike) and the ratio
byoc / onnxruntime; then what spans cost at import (import with spans vs without).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import byoc  # noqa: E402
from byoc.compare import onnxruntime_session  # noqa: E402
from byoc.runtime.threads import settle, warm_up  # noqa: E402
from tests.models.zoo import MODELS, ModelUnavailable, light_models  # noqa: E402

STATS = {"median": statistics.median, "min": min}


def add_stat_option(parser) -> None:
    """``--stat``: what each callable's time over the rounds is (the benchmarks share it)."""
    parser.add_argument("--stat", choices=list(STATS), default="median",
                        help="per callable over the rounds (min: steadier on a loaded machine)")


def interleaved(fns, repeat: int, budget_s: float, stat=statistics.median,
                clock=time.perf_counter, block: int = 1) -> list[float]:
    """Median (or ``stat``) seconds of each fn, alternating calls (``block`` timed calls in a
    row, after one untimed, if more than one); stops early past the time budget.
    ``clock=time.thread_time`` counts only this thread's CPU time: for one-thread runs on a
    loaded machine, where wall time also counts the waits for a core."""
    return [stat(t) for t in interleaved_times(fns, repeat, budget_s, clock, block)]


def interleaved_times(fns, repeat: int, budget_s: float, clock=time.perf_counter,
                      block: int = 1, shuffle=None, min_rounds: int = 3) -> list[list[float]]:
    """Every timed call of each fn, in rounds. Before each fn's turn the process's other
    threads are let go quiet (``settle``): onnxruntime's intra-op threads spin on ~40 ms after
    a run with its default settings, and whatever ran next at 2 threads waited for its second
    core (native squeezenet: 2.3-2.8 ms alone, 4.4-7.4 ms right after onnxruntime). With
    ``block`` > 1 each fn runs untimed for a few ms (``threads.warm_up``), then ``block`` timed
    calls, before the next fn.
    ``shuffle`` (a seeded ``random.Random(...).shuffle``) orders each round anew, so no fn
    always follows the same one."""
    times: list[list[float]] = [[] for _ in fns]
    order = list(range(len(fns)))
    start = time.perf_counter()
    for k in range(repeat):
        if shuffle is not None:
            shuffle(order)
        for i in order:
            settle()
            if block > 1:
                warm_up(fns[i])
            for _ in range(block):
                t0 = clock()
                fns[i]()
                times[i].append(clock() - t0)
        if k >= min_rounds - 1 and time.perf_counter() - start > budget_s:
            break
    return times


def fastest(fns, repeat: int) -> list[float]:
    """Minimum seconds of each fn over interleaved calls: for small differences (what spans
    cost), the minimum is far less noisy than the median on a shared machine."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def bench_model(entry, repeat: int, budget_s: float) -> dict:
    proto = entry.load()
    feeds = entry.make_inputs(np.random.default_rng(0))
    t0 = time.perf_counter()
    mod = byoc.load_onnx(proto)
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    mod_nospan = byoc.load_onnx(proto, spans=False)
    t_import_nospan = time.perf_counter() - t0
    del mod_nospan
    exe = byoc.build(mod)
    session = onnxruntime_session(proto, threads=1)
    exe.run(feeds)
    session.run(None, feeds)
    ours, theirs = interleaved([lambda: exe.run(feeds), lambda: session.run(None, feeds)],
                               repeat, budget_s)
    imports = fastest([lambda: byoc.load_onnx(proto), lambda: byoc.load_onnx(proto, spans=False)], 9)
    return {"model": entry.name, "byoc_ms": ours * 1e3, "onnxruntime_ms": theirs * 1e3,
            "ratio": ours / theirs, "import_ms": imports[0] * 1e3,
            "import_nospan_ms": imports[1] * 1e3, "first_import_ms": t_import * 1e3,
            "first_import_nospan_ms": t_import_nospan * 1e3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds per model at most")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    entries = [m for m in (*MODELS, *light_models())]
    if args.only:
        wanted = set(args.only.split(","))
        entries = [m for m in entries if m.name in wanted]
    rows = []
    with threadpool_limits(1):
        for k, entry in enumerate(entries, 1):
            print(f"[{k}/{len(entries)}] {entry.name}...", file=sys.stderr, flush=True)
            try:
                rows.append(bench_model(entry, args.repeat, args.budget))
            except ModelUnavailable as exc:
                print(f"  skipped: {exc}", file=sys.stderr)
    print(f"\n{'model':<24}{'byoc ms':>10}{'ort ms':>10}{'ratio':>8}   {'import ms':>10}"
          f"{'no spans':>10}{'span cost':>10}")
    for r in rows:
        cost = r["import_ms"] / r["import_nospan_ms"] - 1
        print(f"{r['model']:<24}{r['byoc_ms']:>10.2f}{r['onnxruntime_ms']:>10.2f}{r['ratio']:>7.2f}x"
              f"   {r['import_ms']:>10.1f}{r['import_nospan_ms']:>10.1f}{cost:>+10.1%}")
    if rows:
        ratios = [r["ratio"] for r in rows]
        geo = float(np.exp(np.mean(np.log(ratios))))
        span_cost = sum(r["import_ms"] for r in rows) / sum(r["import_nospan_ms"] for r in rows) - 1
        print(f"\ngeometric mean ratio byoc/onnxruntime: {geo:.2f}x over {len(rows)} models; "
              f"median {statistics.median(ratios):.2f}x")
        print(f"spans cost {span_cost:+.1%} of import time over all models")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rows, f, indent=2)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
