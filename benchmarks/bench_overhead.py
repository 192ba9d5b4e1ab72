"""The executor's cost per node: a chain of 10,000 tiny Adds, byoc and onnxruntime side by side.

    python benchmarks/bench_overhead.py [--nodes 10000]

Prints microseconds per node for byoc (compiled straight-line plan), byoc's interpreter loop,
onnxruntime (1 thread), and one bare np.add call, with the ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import byoc  # noqa: E402
from byoc.compare import onnxruntime_session  # noqa: E402


def chain(n: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"t{i - 1}", "one"], [f"t{i}"], name=f"add{i}")
             for i in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info(f"t{n - 1}", TensorProto.FLOAT, [1])],
                              [numpy_helper.from_array(np.ones(1, np.float32), "one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)])


def best(fn, repeat: int = 9) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    n = parser.parse_args().nodes
    model = chain(n)
    exe = byoc.build(byoc.load_onnx(model))
    session = onnxruntime_session(model, threads=1)
    feeds = {"x": np.zeros(1, np.float32)}
    exe.run(feeds)
    compiled = best(lambda: exe.run(feeds)) / n * 1e6
    plan = exe.main_plan
    slots = [None] * plan.n_slots

    def interpreted():
        slots[plan.param_slots[0]] = feeds["x"]
        for s, v in plan.constants:
            slots[s] = v
        exe._loop(plan, slots)  # the interpreter, for comparison

    loop = best(interpreted) / n * 1e6
    ort = best(lambda: session.run(None, feeds)) / n * 1e6
    a = np.zeros(1, np.float32)
    bare = best(lambda: [np.add(a, a) for _ in range(n)]) / n * 1e6
    print(f"{n} Add nodes, microseconds per node (best of 9)")
    print(f"  byoc, compiled plan   {compiled:6.2f}   {compiled / ort:5.2f}x onnxruntime")
    print(f"  byoc, interpreter     {loop:6.2f}   {loop / ort:5.2f}x onnxruntime")
    print(f"  onnxruntime           {ort:6.2f}")
    print(f"  bare np.add call      {bare:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
