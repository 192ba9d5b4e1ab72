"""How long import and partition take on synthetic ONNX graphs of 1k, 10k and 100k nodes.

    python benchmarks/bench_partition.py [--sizes 1000,10000,100000] [--rounds 9] [--min-time 0.5]

Two shapes: a chain, and a branchy residual net (blocks of two branches joined by an Add).
Op types cycle so that about half the nodes are supported by the benchmark's backend, in runs
of one to three: a partition with tens of thousands of regions, the hard case. Next to ours,
onnxruntime's session creation on the same model (graph optimizations disabled above 10k nodes,
where its optimizer alone takes minutes; noted in the table).

Scaling is a ratio of two times, and on a shared machine the speed drifts by tens of percent
from one minute to the next. So each round times every size back to back (a step runs again
until it has taken ``--min-time`` seconds), the ratio of two sizes is taken round by round, and
the table shows the median of those ratios (``x``) next to the best time of each step over all
rounds. Within a round a step's time is the median of its runs, not the best: a small graph
runs many times to a big one's once, and the best of many draws of the same noise is lower
than one draw, which would inflate the ratio (by 10-30% here, measured). Linear scaling means
a ratio near the size ratio (10). The last line gives the ratios into the biggest size and how
far single rounds ranged.

Times are CPU seconds of this process (``--clock wall`` for wall-clock): on a shared machine
other work then does not count, and on an idle one the two agree for byoc's single-threaded
import and partition.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import byoc

CHAIN_OPS = ("Relu", "Abs", "Neg", "Sigmoid", "Add", "Mul", "Tanh", "Sub")
SUPPORTED = frozenset({"Relu", "Neg", "Add", "Mul"})  # runs of 1, 1 and 2 in CHAIN_OPS
ORT_OPTIMIZE_UP_TO = 10_000
WIDTH = 8


def _model(nodes: list[onnx.NodeProto], out: str, name: str) -> onnx.ModelProto:
    const = numpy_helper.from_array(np.full((1, WIDTH), 0.5, np.float32), "c")
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, WIDTH])], [const])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)], ir_version=10)


def _node(op: str, x: str, out: str) -> onnx.NodeProto:
    inputs = [x, "c"] if op in ("Add", "Mul", "Sub") else [x]
    return helper.make_node(op, inputs, [out], name=out)


def chain(n: int) -> onnx.ModelProto:
    """x -> op -> op -> ... (n nodes, op types cycling through CHAIN_OPS)."""
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(_node(CHAIN_OPS[i % len(CHAIN_OPS)], prev, f"n{i}"))
        prev = f"n{i}"
    return _model(nodes, prev, "chain")


def residual(n: int) -> onnx.ModelProto:
    """Blocks of eight nodes: two branches of three ops each, their Add, and a Relu.

        x -> a1 -> a2 -> a3 --.
          \\-> b1 -> b2 -> b3 -> Add -> Relu -> next block
    """
    nodes, prev, i = [], "x", 0
    while len(nodes) + 8 <= n:
        tails = []
        for branch, offset in (("a", 0), ("b", 3)):
            x = prev
            for k in range(3):
                out = f"{branch}{i}_{k}"
                nodes.append(_node(CHAIN_OPS[(offset + k + i) % len(CHAIN_OPS)], x, out))
                x = out
            tails.append(x)
        nodes.append(helper.make_node("Add", tails, [f"sum{i}"], name=f"sum{i}"))
        nodes.append(helper.make_node("Relu", [f"sum{i}"], [f"block{i}"], name=f"block{i}"))
        prev, i = f"block{i}", i + 1
    while len(nodes) < n:
        nodes.append(_node("Abs", prev, f"tail{len(nodes)}"))
        prev = nodes[-1].output[0]
    return _model(nodes, prev, "residual")


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def _timed(fn, clock, min_time: float) -> tuple[list[float], object]:
    """The times of runs of ``fn`` adding up to at least ``min_time`` (one at least)."""
    times: list[float] = []
    result = None
    while not times or sum(times) < min_time:
        result = None  # the previous run's result is freed now, not on the clock of the next
        gc.collect()
        start = clock()
        result = fn()
        times.append(clock() - start)
    return times, result


def _ort_session(data: bytes, optimize: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def measure(shape: str, sizes: list[int], rounds: int, clock, min_time: float) -> list[dict]:
    """Import and partition times of every size, each size once per round, so that the runs a
    ratio compares are never far apart in time; onnxruntime's session creation after them."""
    models = {n: {"chain": chain, "residual": residual}[shape](n) for n in sizes}
    # Per size and step: the median of each round's runs, and the best run of all rounds.
    steps: dict[int, dict[str, list[float]]] = {
        n: {"import": [], "partition": [], "import_best": [], "partition_best": []} for n in sizes}
    regions: dict[int, int] = {}
    # One-time costs (the op registry is built at the first import) stay out of the rounds.
    byoc.partition(byoc.load_onnx(models[sizes[0]]), backends=["bench_half"])
    for _ in range(rounds):
        for n in sizes:
            times, mod = _timed(lambda: byoc.load_onnx(models[n]), clock, min_time)
            _record(steps[n], "import", times)
            times, part = _timed(lambda: byoc.partition(mod, backends=["bench_half"]), clock,
                                 min_time)
            _record(steps[n], "partition", times)
            regions[n] = len(part.functions) - 1  # type: ignore[attr-defined]
            del mod, part
    out = []
    for n in sizes:
        data = models[n].SerializeToString()
        optimize = n <= ORT_OPTIMIZE_UP_TO
        t_ort = min(min(_timed(lambda: _ort_session(data, optimize), clock, 0.0)[0])
                    for _ in range(rounds))
        out.append({"nodes": n, "regions": regions[n], "ort": [t_ort], "ort_best": [t_ort],
                    "ort_optimized": optimize, **steps[n]})
    return out


def _record(step: dict[str, list[float]], key: str, times: list[float]) -> None:
    step[key].append(statistics.median(times))
    step[key + "_best"].append(min(times))


def _ratios(r: dict, prev: dict, key: str) -> list[float]:
    """Round by round, this size's time over the previous size's."""
    return [a / b for a, b in zip(r[key], prev[key])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=9,
                        help="rounds, each timing every size (ratios are their medians; 9: ~4 min)")
    parser.add_argument("--min-time", type=float, default=0.5,
                        help="seconds per step and round, at least (more runs of small graphs)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    byoc.register_backend("bench_half", supports=SUPPORTED,
                          compile=byoc.get_backend("reference").compile)
    print(f"{args.clock} seconds, best run of {args.rounds} rounds of at least {args.min_time:g} s "
          "per step; x = median over rounds of the round's median run / that at the previous size")
    print(f"{'graph':9} {'nodes':>7} {'regions':>7} {'import s':>9} {'x':>5} {'partition s':>11} "
          f"{'x':>5} {'both s':>7} {'ort session s':>13} {'x':>5}")
    # The goal is about the biggest step (10k -> 100k by default); a small graph's time is
    # mostly fixed costs and cache-resident, so the step into it says little about scaling.
    top, worst = sizes[-1], {}
    spread: dict[str, list[float]] = {"import": [], "partition": []}
    for shape in ("chain", "residual"):
        prev = None
        for r in measure(shape, sizes, args.rounds, CLOCKS[args.clock], args.min_time):
            best = {k: min(r[k + "_best"]) for k in ("import", "partition", "ort")}
            ratios = {k: _ratios(r, prev, k) if prev else [] for k in ("import", "partition", "ort")}
            x = {k: statistics.median(v) if v else float("nan") for k, v in ratios.items()}
            if prev and r["nodes"] == top and top == 10 * prev["nodes"]:
                for k in ("import", "partition"):
                    worst[k] = max(worst.get(k, 0.0), x[k])
                    spread[k].extend(ratios[k])
            note = "" if r["ort_optimized"] else " (no graph opt)"
            print(f"{shape:9} {r['nodes']:>7} {r['regions']:>7} {best['import']:>9.3f} "
                  f"{x['import']:>5.1f} {best['partition']:>11.3f} {x['partition']:>5.1f} "
                  f"{best['import'] + best['partition']:>7.2f} {best['ort']:>13.3f} "
                  f"{x['ort']:>5.1f}{note}")
            prev = r
    if worst:
        ranged = {k: f"{min(v):.1f}-{max(v):.1f}" for k, v in spread.items()}
        print(f"worst time ratio from {top // 10} to {top} nodes: import {worst['import']:.1f}, "
              f"partition {worst['partition']:.1f} (linear: about 10; the goal: at most 12); "
              f"single rounds ranged {ranged['import']} and {ranged['partition']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
