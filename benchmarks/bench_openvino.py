"""The openvino backend against onnxruntime and native, per model, at one thread and all cores.

    python benchmarks/bench_openvino.py [--repeat 20] [--only bert_tiny,gru] [--threads 1,2]
                                        [--json out.json]

For each zoo model and thread count, interleaved in one loop so drift on the machine hits all
alike: byoc with ``--backend openvino``, byoc with ``--backend native``, onnxruntime's own
session, and OpenVINO compiling the whole ONNX file itself (what byoc's regions, copies and
Python add to OpenVINO is the gap to that column). Prints medians in ms and ratios to
onnxruntime, then the median ratio over models; also the first partition's and first run's
seconds (OpenVINO's queries and compiles).
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
from bench_models import interleaved  # noqa: E402

import byoc  # noqa: E402
from byoc.compare import onnxruntime_session  # noqa: E402
from byoc.runtime.threads import physical_cores  # noqa: E402
from tests.models.zoo import MODELS, ModelUnavailable, light_models  # noqa: E402

ENGINES = ("openvino", "native", "onnxruntime", "ov_whole")


def _ov_whole(proto, feeds, threads: int):
    """OpenVINO on the whole model, for these input shapes, with the openvino backend's
    settings: what it costs OpenVINO alone, without byoc around it."""
    import openvino as ov
    from byoc.backends.openvino import engine

    model = engine.read(proto.SerializeToString())
    model.reshape({name: ov.PartialShape(list(a.shape)) for name, a in feeds.items()})
    request = engine.compile_model(model, threads).create_infer_request()
    return lambda: request.infer(feeds)


def bench_model(entry, threads: int, repeat: int, budget_s: float) -> dict:
    proto = entry.load()
    feeds = entry.make_inputs(np.random.default_rng(0))
    mod = byoc.load_onnx(proto)
    runs, first = {}, {}
    for backend in ("openvino", "native"):
        t0 = time.perf_counter()
        part = byoc.partition(mod, backends=[backend])
        t1 = time.perf_counter()
        exe = byoc.build(part, threads=threads)
        exe.run(feeds)
        t2 = time.perf_counter()
        first[backend] = {"partition_s": t1 - t0, "build_and_first_run_s": t2 - t1,
                          "regions": len(part.functions) - 1}
        runs[backend] = lambda exe=exe: exe.run(feeds)
    session = onnxruntime_session(proto, threads=threads)
    session.run(None, feeds)
    runs["onnxruntime"] = lambda: session.run(None, feeds)
    try:
        runs["ov_whole"] = _ov_whole(proto, feeds, threads)
        runs["ov_whole"]()
    except RuntimeError as exc:  # OpenVINO cannot read every model whole (silero's If bodies)
        print(f"  OpenVINO alone cannot run it: {str(exc).strip().splitlines()[-1]}",
              file=sys.stderr)
    engines = [e for e in ENGINES if e in runs]
    medians = interleaved([runs[e] for e in engines], repeat, budget_s)
    row = {"model": entry.name, "threads": threads, "first": first, "ov_whole_ms": None}
    for engine_name, seconds in zip(engines, medians):
        row[f"{engine_name}_ms"] = seconds * 1e3
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--budget", type=float, default=15.0, help="seconds per model at most")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--threads", default=f"1,{physical_cores()}",
                        help="thread counts (default: one and the physical cores)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    entries = [m for m in (*MODELS, *light_models())]
    if args.only:
        wanted = set(args.only.split(","))
        entries = [m for m in entries if m.name in wanted]
    counts = sorted({int(t) for t in args.threads.split(",")})
    rows = []
    for threads in counts:
        for k, entry in enumerate(entries, 1):
            print(f"[{threads} thread(s), {k}/{len(entries)}] {entry.name}...", file=sys.stderr,
                  flush=True)
            try:
                rows.append(bench_model(entry, threads, args.repeat, args.budget))
            except ModelUnavailable as exc:
                print(f"  skipped: {exc}", file=sys.stderr)
    for threads in counts:
        mine = [r for r in rows if r["threads"] == threads]
        print(f"\n{threads} thread(s): median ms, and / onnxruntime")
        print(f"{'model':<24}{'openvino':>10}{'native':>10}{'ort':>10}{'ov whole':>10}"
              f"{'ov/ort':>9}{'nat/ort':>9}{'whole/ort':>10}{'regions':>8}")
        for r in mine:
            ort, whole = r["onnxruntime_ms"], r["ov_whole_ms"]
            print(f"{r['model']:<24}{r['openvino_ms']:>10.2f}{r['native_ms']:>10.2f}{ort:>10.2f}"
                  + (f"{whole:>10.2f}" if whole else f"{'-':>10}")
                  + f"{r['openvino_ms'] / ort:>8.2f}x{r['native_ms'] / ort:>8.2f}x"
                  + (f"{whole / ort:>9.2f}x" if whole else f"{'-':>10}")
                  + f"{r['first']['openvino']['regions']:>8}")
        if mine:
            for name in ("openvino", "native", "ov_whole"):
                ratios = [r[f"{name}_ms"] / r["onnxruntime_ms"] for r in mine if r[f"{name}_ms"]]
                print(f"  {name}: median {statistics.median(ratios):.2f}x onnxruntime, "
                      f"range {min(ratios):.2f}-{max(ratios):.2f}x over {len(mine)} models")
    if len(counts) > 1:
        low, high = counts[0], counts[-1]
        print(f"\nspeed-up from {low} to {high} threads (median ms at {low} / at {high})")
        for r in [r for r in rows if r["threads"] == low]:
            other = next((o for o in rows if o["threads"] == high and o["model"] == r["model"]), None)
            if other:
                print(f"{r['model']:<24}" + "".join(
                    f"{name}: {r[f'{name}_ms'] / other[f'{name}_ms']:.2f}x  " for name in ENGINES
                    if r[f"{name}_ms"] and other[f"{name}_ms"]))
    print("\nfirst partition / build + first run, openvino (s):")
    for r in [r for r in rows if r["threads"] == counts[0]]:
        f = r["first"]["openvino"]
        print(f"{r['model']:<24}{f['partition_s']:>8.2f}{f['build_and_first_run_s']:>8.2f}")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rows, f, indent=2)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
