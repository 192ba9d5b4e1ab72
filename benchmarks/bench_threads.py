"""native against onnxruntime at one thread and at all cores, side by side, on the slow suite's
CNNs, detectors, OCR nets and transformers.

    python benchmarks/bench_threads.py [--threads N] [--repeat 15] [--only light_resnet50,...]
                                       [--json out.json]

For each model four callables run interleaved, round after round (native at 1 thread, native
at N, onnxruntime at 1, onnxruntime at N; N = the physical cores by default), so drift on the
machine hits all four alike; each time is the median over the rounds. Within a round each
runs untimed for a few ms, then ``--block`` timed calls: onnxruntime's intra-op threads spin
on after a run, and a native run right after one at 2 threads waited for its second core.
Printed per model: the ratio native / onnxruntime at 1 and at N threads, and each engine's
speedup from 1 to N threads; then the medians. Targets (issue 19): median ratio <= 1.0 at both counts, no model
above 1.3, a conv-heavy model 1.8x faster on 2 threads than on 1. On a loaded machine the
speedups mean little (a second thread waits for a core): say the load (``uptime``) with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import byoc  # noqa: E402
from benchmarks.bench_models import (  # noqa: E402
    STATS,
    add_stat_option,
    interleaved,
    interleaved_times,
)
from byoc.compare import onnxruntime_session  # noqa: E402
from byoc.runtime.threads import physical_cores  # noqa: E402
from tests.models.zoo import MODELS, ModelUnavailable, light_models  # noqa: E402

KINDS = {  # the slow suite's models the issue names, by kind
    "cnn": ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
            "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19",
            "light_zfnet512"],
    "detector": ["ppocr_v4_det"],
    "ocr": ["ppocr_mobile_v2_cls", "ppocr_v4_rec"],
    "transformer": ["bert_tiny", "gpt2_tiny", "llama_tiny", "vit_tiny"],
}


def bench_model(entry, threads: int, repeat: int, budget_s: float, backend: str,
                stat=statistics.median, cpu_one: bool = False, block: int = 3) -> dict:
    proto = entry.load()
    feeds = entry.make_inputs(np.random.default_rng(0))
    part = byoc.partition(byoc.load_onnx(proto), backends=[backend])
    one, many = byoc.build(part, threads=1), byoc.build(part, threads=threads)
    ort_one = onnxruntime_session(proto, threads=1)
    ort_many = onnxruntime_session(proto, threads=threads)
    fns = [lambda: one.run(feeds), lambda: many.run(feeds),
           lambda: ort_one.run(None, feeds), lambda: ort_many.run(None, feeds)]
    for fn in fns:  # warm-up: builds per shape, caches
        fn()
    if cpu_one:  # one thread each side: its CPU time; all cores: wall time
        b1, o1 = interleaved([fns[0], fns[2]], repeat, budget_s, stat, time.thread_time)
        bn, on = interleaved([fns[1], fns[3]], repeat, budget_s, stat)
    else:
        b1, bn, o1, on = (stat(t) for t in interleaved_times(fns, repeat, budget_s,
                                                            block=block))
    return {"model": entry.name, "threads": threads, "byoc_1_ms": b1 * 1e3,
            "byoc_n_ms": bn * 1e3, "ort_1_ms": o1 * 1e3, "ort_n_ms": on * 1e3,
            "ratio_1": b1 / o1, "ratio_n": bn / on, "speedup_byoc": b1 / bn,
            "speedup_ort": o1 / on}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=physical_cores(),
                        help="the 'all cores' count (default: the physical cores)")
    parser.add_argument("--backend", default="native")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--budget", type=float, default=30.0, help="seconds per model at most")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--block", type=int, default=3,
                        help="timed calls in a row per engine, after untimed ones (1: "
                             "strictly alternating; onnxruntime's spinning threads then slow "
                             "native's next run at more than one thread)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--cpu-one", action="store_true",
                        help="time the one-thread runs by this thread's CPU time (a loaded "
                             "machine's waits for a core left out); all-core runs stay wall")
    add_stat_option(parser)
    args = parser.parse_args()
    stat = STATS[args.stat]
    warnings.simplefilter("ignore")
    wanted = [name for names in KINDS.values() for name in names]
    if args.only:
        wanted = [n for n in args.only.split(",") if n]
    zoo = {m.name: m for m in (*MODELS, *light_models())}
    rows = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for k, name in enumerate(wanted, 1):
        print(f"[{k}/{len(wanted)}] {name}...", file=sys.stderr, flush=True)
        if name not in zoo:
            print("  not in the zoo", file=sys.stderr)
            continue
        try:
            rows.append(bench_model(zoo[name], args.threads, args.repeat, args.budget,
                                    args.backend, stat, args.cpu_one, args.block))
        except ModelUnavailable as exc:
            print(f"  skipped: {exc}", file=sys.stderr)
    n = args.threads
    print(f"\n{args.backend} vs onnxruntime; ratio = {args.backend} / onnxruntime (< 1: faster); "
          f"speedup = time at 1 thread / at {n}; {args.stat} of the rounds"
          f"{' (1 thread: CPU time)' if args.cpu_one else ''}; load average at "
          f"start {load:.1f}")
    print(f"{'model':<22}{'ms 1t':>9}{'ort 1t':>9}{'ratio 1t':>10}{f'ms {n}t':>9}{f'ort {n}t':>9}"
          f"{f'ratio {n}t':>10}{'byoc x':>8}{'ort x':>8}")
    for r in rows:
        print(f"{r['model']:<22}{r['byoc_1_ms']:>9.2f}{r['ort_1_ms']:>9.2f}{r['ratio_1']:>9.2f}x"
              f"{r['byoc_n_ms']:>9.2f}{r['ort_n_ms']:>9.2f}{r['ratio_n']:>9.2f}x"
              f"{r['speedup_byoc']:>7.2f}x{r['speedup_ort']:>7.2f}x")
    if rows:
        med = {k: statistics.median(r[k] for r in rows)
               for k in ("ratio_1", "ratio_n", "speedup_byoc", "speedup_ort")}
        worst = max(rows, key=lambda r: max(r["ratio_1"], r["ratio_n"]))
        print(f"\nmedian ratio: {med['ratio_1']:.2f}x at 1 thread, {med['ratio_n']:.2f}x at {n}; "
              f"worst {worst['model']} ({worst['ratio_1']:.2f}x / {worst['ratio_n']:.2f}x); "
              f"median speedup 1 -> {n} threads: {args.backend} {med['speedup_byoc']:.2f}x, "
              f"onnxruntime {med['speedup_ort']:.2f}x")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"load_average": load, "rows": rows}, f, indent=2)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
