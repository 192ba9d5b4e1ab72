"""``byoc bench``: byoc and onnxruntime timed side by side."""

from __future__ import annotations

import json
import os
import statistics
import time

from .common import (
    backend_list,
    build_exe,
    fallback_arg,
    input_args,
    late_fallbacks,
    load_model,
    model_arg,
    model_inputs,
    plan_arg,
    prepare,
    settled,
    show,
    threads_of,
    warn_fallbacks,
    whole,
)


def cmd_bench(args) -> int:

    from ..compare import onnxruntime_session
    from ..runtime.ort_sessions import run_options
    from ..runtime.threads import settle, warm_up

    path, mod = load_model(args)
    inputs = model_inputs(args, mod)
    backends = backend_list(args.backend)
    threads = threads_of(args)  # both sides alike: byoc's every engine and onnxruntime's session
    prepared = prepare(mod, backends, args)
    exe = build_exe(prepared, args)
    session = onnxruntime_session(path, threads=threads)
    quiet = run_options()  # no onnxruntime log line reaches the terminal raw
    for _ in range(args.warmup):
        exe.run(inputs)
        session.run(None, inputs, quiet)
    exe = settled(exe, prepared, args)  # timed: no region that failed to build in warmup
    ours: list[float] = []
    theirs: list[float] = []
    turns = ((lambda: exe.run(inputs), ours), (lambda: session.run(None, inputs, quiet), theirs))
    for _ in range(args.repeat):  # interleaved, so drift on the machine hits both alike
        for run, times in turns:
            # onnxruntime's threads spin on ~45 ms after its run: without the wait byoc's next
            # run at 2 threads found a core taken (squeezenet 5.8 ms against 2.2-2.5 alone);
            # then untimed runs for a few ms, for a core that slept while waiting comes back
            # slowly (threads.warm_up)
            settle()
            warm_up(run)
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
    warn_fallbacks(late_fallbacks(exe))  # with --warmup 0, the timed runs met them
    result = {"model": path, "backends": backends or ["host"], "threads": threads,
              "repeat": args.repeat, "byoc_median_s": statistics.median(ours),
              "onnxruntime_median_s": statistics.median(theirs)}
    result["ratio"] = result["byoc_median_s"] / result["onnxruntime_median_s"]
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{show(os.path.basename(path))}  ({', '.join(result['backends'])}, {threads} thread"
              f"{'s' if threads > 1 else ''} each side, median of {args.repeat})")
        print(f"  byoc         {result['byoc_median_s'] * 1000:9.2f} ms")
        print(f"  onnxruntime  {result['onnxruntime_median_s'] * 1000:9.2f} ms")
        print(f"  ratio        {result['ratio']:9.2f}x")
    return 0


def register(sub) -> None:
    p = sub.add_parser("bench", help="median latency of byoc and onnxruntime, interleaved")
    model_arg(p, optional=True)
    input_args(p)
    p.add_argument("--repeat", type=whole(1), default=20, help="timed runs (default 20)")
    p.add_argument("--warmup", type=whole(0), default=2, help="untimed runs first (default 2)")
    fallback_arg(p)
    plan_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_bench)
