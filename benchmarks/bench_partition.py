"""How long import and partition take on synthetic ONNX graphs of 1k, 10k and 100k nodes.

    python benchmarks/bench_partition.py [--sizes 1000,10000,100000] [--repeat 5] [--min-time 2]

Two shapes: a chain, and a branchy residual net (blocks of two branches joined by an Add).
Op types cycle so that about half the nodes are supported by the benchmark's backend, in runs
of one to three: a partition with tens of thousands of regions, the hard case. Next to ours,
onnxruntime's session creation on the same model (graph optimizations disabled above 10k nodes,
where its optimizer alone takes minutes; noted in the table). Prints the best of ``--repeat``
runs per step, and the ratio of each time to the time at the previous size: linear scaling
means a ratio near the size ratio (10).

Each step runs at least ``--repeat`` times and for at least ``--min-time`` seconds, so a small
graph gets as many chances as a big one to be timed while the machine is quiet (on a shared
machine a run's time mostly errs upward; the best of several is the steady one). The last line
says how far the median run was from the best, a measure of that noise.

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


NOISE: list[float] = []  # median / best of each step, for the last line


def _best(fn, repeat: int, clock, min_time: float) -> tuple[float, object]:
    times: list[float] = []
    result = None
    while len(times) < repeat or sum(times) < min_time:
        result = None  # the previous run's result is freed now, not on the clock of the next
        gc.collect()
        start = clock()
        result = fn()
        times.append(clock() - start)
    NOISE.append(statistics.median(times) / max(min(times), 1e-9))
    return min(times), result


def _ort_session(data: bytes, optimize: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def measure(shape: str, n: int, repeat: int, clock, min_time: float) -> dict:
    model = {"chain": chain, "residual": residual}[shape](n)
    data = model.SerializeToString()
    t_import, mod = _best(lambda: byoc.load_onnx(model), repeat, clock, min_time)
    t_part, part = _best(lambda: byoc.partition(mod, backends=["bench_half"]), repeat, clock,
                         min_time)
    optimize = n <= ORT_OPTIMIZE_UP_TO
    t_ort, _ = _best(lambda: _ort_session(data, optimize), repeat, clock, min_time)
    regions = len(part.functions) - 1  # type: ignore[attr-defined]
    return {"shape": shape, "nodes": n, "import": t_import, "partition": t_part,
            "ort": t_ort, "ort_optimized": optimize, "regions": regions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=5, help="runs per step, at least")
    parser.add_argument("--min-time", type=float, default=2.0,
                        help="seconds per step, at least (more runs of the small graphs)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    byoc.register_backend("bench_half", supports=SUPPORTED,
                          compile=byoc.get_backend("reference").compile)
    print(f"{args.clock} seconds, best of at least {args.repeat} runs and {args.min_time:g} s "
          "per step; x = time / time at the previous size")
    print(f"{'graph':9} {'nodes':>7} {'regions':>7} {'import s':>9} {'x':>5} {'partition s':>11} "
          f"{'x':>5} {'both s':>7} {'ort session s':>13} {'x':>5}")
    # The goal is about the biggest step (10k -> 100k by default); a small graph's time is
    # mostly fixed costs and cache-resident, so the step into it says little about scaling.
    worst = {"import": 0.0, "partition": 0.0}
    top = sizes[-1]
    for shape in ("chain", "residual"):
        prev = None
        for n in sizes:
            r = measure(shape, n, args.repeat, CLOCKS[args.clock], args.min_time)
            both = r["import"] + r["partition"]
            ratios = [(r[k] / prev[k] if prev else float("nan")) for k in ("import", "partition",
                                                                            "ort")]
            if prev and n == top and n == 10 * prev["nodes"]:
                worst = {"import": max(worst["import"], ratios[0]),
                         "partition": max(worst["partition"], ratios[1])}
            note = "" if r["ort_optimized"] else " (no graph opt)"
            print(f"{shape:9} {n:>7} {r['regions']:>7} {r['import']:>9.3f} {ratios[0]:>5.1f} "
                  f"{r['partition']:>11.3f} {ratios[1]:>5.1f} {both:>7.2f} {r['ort']:>13.3f} "
                  f"{ratios[2]:>5.1f}{note}")
            prev = r
    if worst["import"]:
        print(f"worst time ratio from {top // 10} to {top} nodes: import {worst['import']:.1f}, "
              f"partition {worst['partition']:.1f} (linear: about 10; the goal: at most 12)")
    print(f"noise: the median run was at most {max(NOISE) - 1:.0%} slower than the best "
          f"(typical {statistics.median(NOISE) - 1:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
