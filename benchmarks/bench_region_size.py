"""How the C compiler's time grows with the size of one region (ccompiler, native).

    python benchmarks/bench_region_size.py [--sizes 1000,10000,30000] [--backends ccompiler]
                                           [--shapes distinct,repeated,sum,concat]

Shapes, each one region:
- ``distinct``: a chain of n binary elementwise ops, each with a scalar of its own, so that no
  two op functions are the same C (the worst case: nothing is shared);
- ``repeated``: a chain of n ops cycling through eight (a model's repeated layers: identical
  op functions are written once);
- ``sum``, ``concat``: one Sum or Concat of n inputs (were one C function of n parameters).

For each: seconds generating the C (Python), the compiler's CPU seconds (its own, from
``getrusage``: other work on a shared machine does not count) and wall seconds, and the ratio of
CPU seconds to those of the previous size next to the ratio of sizes (linear: equal). The
cache is fresh, and the shared GEMM library is built before anything is timed.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from byoc.backends.ccompiler import runtime_c  # noqa: E402

import byoc  # noqa: E402
from byoc.codegen import build_cache  # noqa: E402

OPS = ("Relu", "Abs", "Neg", "Sigmoid", "Add", "Mul", "Tanh", "Sub")
DISTINCT_OPS = ("Add", "Mul", "Sub", "Max", "Min")  # each with a scalar of its own
WIDTH = 8


def _vi(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inputs, out, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "region", inputs, [_vi(out, None)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def chain(n: int, distinct: bool) -> onnx.ModelProto:
    nodes, inits, x = [], [], "x"
    for i in range(n):
        op = (DISTINCT_OPS if distinct else OPS)[i % len(DISTINCT_OPS if distinct else OPS)]
        ins = [x]
        if op in ("Add", "Mul", "Sub", "Max", "Min"):
            value = 1.0 + (i if distinct else 0) * 1e-5
            inits.append(numpy_helper.from_array(np.array(value, np.float32), f"c{i}"))
            ins.append(f"c{i}")
        nodes.append(helper.make_node(op, ins, [f"v{i}"], name=f"v{i}"))
        x = f"v{i}"
    return _model(nodes, [_vi("x", [1, WIDTH])], x, inits)


def variadic(op: str, n: int) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(n)]
    node = helper.make_node(op, names, ["y"], name="wide", **({"axis": 0} if op == "Concat" else {}))
    return _model([node], [_vi(x, [1, WIDTH]) for x in names], "y")


def make(shape: str, n: int) -> onnx.ModelProto:
    if shape in ("distinct", "repeated"):
        return chain(n, shape == "distinct")
    return variadic({"sum": "Sum", "concat": "Concat"}[shape], n)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(model: onnx.ModelProto, backend: str) -> tuple[float, float, float, int]:
    """(seconds generating, compiler CPU seconds, compiler wall seconds, bytes of C)."""
    from byoc.backends.ccompiler.codegen import prepared

    mod = byoc.load_onnx(model)
    part = byoc.partition(mod, backends=[backend])
    (name,) = [k for k in part.functions if k != "main"]
    func = part.functions[name]
    if backend == "native":
        from byoc.backends.native.codegen import generate
        from byoc.backends.native.fold_bn import fold_batch_norm

        func = fold_batch_norm(func)
    else:
        from byoc.backends.ccompiler.codegen import generate
    start = time.perf_counter()
    gen = generate(prepared(func))
    generating = time.perf_counter() - start
    cpu, wall = _children_cpu(), build_cache.STATS.seconds
    objects = (build_cache.build_object(runtime_c.LIBRARY),) if gen.library else ()
    build_cache.build(gen.source, gen.cdef, region=name, objects=objects)
    return generating, _children_cpu() - cpu, build_cache.STATS.seconds - wall, len(gen.source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,30000")
    parser.add_argument("--backends", default="ccompiler")
    parser.add_argument("--shapes", default="distinct,repeated,sum,concat")
    parser.add_argument("--one-part", action="store_true",
                        help="the entry as one function, as before it was cut into parts "
                             "(to compare; a wide op's table is kept)")
    args = parser.parse_args()
    if args.one_part:
        from byoc.backends.ccompiler import entry

        entry.PART_LINES = 1 << 62
    sizes = [int(s) for s in args.sizes.split(",")]
    os.environ["BYOC_CACHE_DIR"] = tempfile.mkdtemp(prefix="byoc-bench-")
    build_cache.build_object(runtime_c.LIBRARY)  # warm: the library is built once per cache
    print(f"{'backend':10} {'shape':9} {'n':>7} {'gen s':>7} {'cc cpu s':>9} {'cc wall s':>9} "
          f"{'C KB':>8} {'cpu x':>6} {'n x':>5}")
    for backend in args.backends.split(","):
        for shape in args.shapes.split(","):
            prev = None
            for n in sizes:
                generating, cpu, wall, size = measure(make(shape, n), backend)
                ratio = f"{cpu / prev[1]:6.1f} {n / prev[0]:5.1f}" if prev and prev[1] else ""
                print(f"{backend:10} {shape:9} {n:7} {generating:7.2f} {cpu:9.2f} {wall:9.2f} "
                      f"{size / 1024:8.0f} {ratio}", flush=True)
                prev = (n, cpu)


if __name__ == "__main__":
    main()
