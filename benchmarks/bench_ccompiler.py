"""ccompiler against the host executor and onnxruntime (one thread each), per op and per model.

    python benchmarks/bench_ccompiler.py            # ops, then the zoo models (not VGG-19)
    python benchmarks/bench_ccompiler.py --ops      # Conv 3x3 64->64 at 56x56, MatMul 512^3, 1M
    python benchmarks/bench_ccompiler.py --models light_resnet50 bert_tiny

Per op: milliseconds (best of --repeat) and ratios to onnxruntime and to the host. Per model:
the cold build (an empty cache: partition, build, first run, in a fresh process), the warm one
(the same again: nothing is compiled), steady run times, and the share of the model's nodes
and of its FLOPs that ccompiler runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import byoc  # noqa: E402
from byoc.compare import onnxruntime_session  # noqa: E402
from byoc.ir import (Call, Constant, Function, IRModule, TensorType, TupleType,  # noqa: E402
                     post_order)
from byoc.op import registry  # noqa: E402


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


# -- ops ------------------------------------------------------------------------------------------


def _one_node(op_type: str, inputs: dict[str, np.ndarray], inits: dict[str, np.ndarray],
              **attrs) -> onnx.ModelProto:
    node = helper.make_node(op_type, [*inputs, *inits], ["y"], **attrs)
    graph = helper.make_graph(
        [node], op_type, [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                          for k, v in inputs.items()],
        [onnx.ValueInfoProto(name="y")], [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)], ir_version=10)


def op_cases() -> list[tuple[str, onnx.ModelProto]]:
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    n = 1 << 20
    return [
        ("Conv 3x3 64->64 56x56", _one_node("Conv", {"x": f32(1, 64, 56, 56)},
                                            {"w": f32(64, 64, 3, 3)}, pads=[1, 1, 1, 1])),
        ("MatMul 512^3", _one_node("MatMul", {"a": f32(512, 512), "b": f32(512, 512)}, {})),
        ("Add 1M", _one_node("Add", {"a": f32(n), "b": f32(n)}, {})),
        ("Relu 1M", _one_node("Relu", {"a": f32(n)}, {})),
        ("Sigmoid 1M", _one_node("Sigmoid", {"a": f32(n)}, {})),
    ]


def bench_ops(repeat: int) -> None:
    from byoc.backends.ccompiler import compile_region

    print(f"{'op':24} {'ccompiler':>10} {'host':>10} {'ort':>10} {'c/ort':>7} {'c/host':>7}")
    for label, model in op_cases():
        rng = np.random.default_rng(1)
        feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
                 .astype(np.float32) for i in model.graph.input}
        mod = byoc.load_onnx(model)
        run = compile_region(mod.main)
        args = [feeds[p.name] for p in mod.main.params]
        host = byoc.build(mod)
        session = onnxruntime_session(model)
        c = best_ms(lambda: run(*args), repeat)
        h = best_ms(lambda: host.run(feeds), repeat)
        o = best_ms(lambda: session.run(None, feeds), repeat)
        print(f"{label:24} {c:9.3f}ms {h:9.3f}ms {o:9.3f}ms {c / o:7.2f} {c / h:7.2f}")


# -- models ---------------------------------------------------------------------------------------


def _flops(call: Call, types: dict[int, TensorType]) -> float:
    """Floating-point operations of a node (a multiply-add counts two)."""
    def shape(e) -> tuple[int, ...]:
        t = types.get(id(e))
        return tuple(t.shape) if t is not None and t.is_static else ()

    out = shape(call)
    size = float(np.prod(out)) if out else 0.0
    args = [a for a in call.args if a is not None]
    if call.op == "Conv" and len(args) > 1:
        w = shape(args[1])
        return 2 * size * float(np.prod(w[1:])) if w else size
    if call.op == "ConvTranspose" and len(args) > 1:
        w, x = shape(args[1]), shape(args[0])
        return 2 * float(np.prod(x)) * float(np.prod(w[1:])) if w and x else size
    if call.op in ("MatMul", "Gemm") and args:
        a = shape(args[0])
        k = (a[0] if call.attrs.get("transA") else a[-1]) if a else 0
        return 2 * size * k
    if call.op in ("LSTM", "GRU", "RNN") and args:
        x, w, r = shape(args[0]), shape(args[1]), shape(args[2])
        return 2 * x[0] * x[1] * (float(np.prod(w)) + float(np.prod(r))) if x and w and r else 0
    inputs = max((float(np.prod(shape(a))) for a in args if shape(a)), default=0.0)
    return max(size, inputs)


def _concrete(func: Function, feeds: dict[str, np.ndarray]) -> dict[int, TensorType]:
    """Every node's type for these inputs (where the op's type rule can say)."""
    types: dict[int, TensorType] = {id(p): TensorType(feeds[p.name].shape, feeds[p.name].dtype.name)
                                    for p in func.params if p.name in feeds}
    for e in post_order(func.body):
        if isinstance(e, Constant):
            types[id(e)] = e.type
        elif isinstance(e, Call) and isinstance(e.op, str) and registry.lookup(e.op):
            n = len(e.type.fields) if isinstance(e.type, TupleType) else 1
            try:
                out = registry.get(e.op).type_rule(
                    e.attrs, [types.get(id(a), getattr(a, "type", None)) for a in e.args], n,
                    [a.value if isinstance(a, Constant) else None for a in e.args])
                types[id(e)] = out[0]
            except Exception:
                types[id(e)] = e.type if isinstance(e.type, TensorType) else None
    return types


def offload_share(mod: IRModule, part: IRModule, feeds: dict[str, np.ndarray]
                  ) -> tuple[float, float]:
    """(share of nodes, share of FLOPs) that ccompiler regions run."""
    types = _concrete(mod.main, feeds)
    flops = {c.span.name: _flops(c, types) for c in post_order(mod.main.body)
             if isinstance(c, Call) and c.span is not None}
    inside = {c.span.name for name, f in part.functions.items()
              if f.attrs.get("Compiler") == "ccompiler" for c in post_order(f.body)
              if isinstance(c, Call) and c.span is not None}
    nodes = len(flops) or 1
    total = sum(flops.values()) or 1.0
    return (len(inside & set(flops)) / nodes,
            sum(v for k, v in flops.items() if k in inside) / total)


def _zoo(names: list[str], everything: bool):
    from tests.models import zoo

    for model in (*zoo.MODELS, *zoo.light_models()):
        if names and model.name not in names:
            continue
        if not names and not everything and model.name == "light_vgg19":
            continue
        try:
            model.locate()
        except zoo.ModelUnavailable:
            continue
        yield model


def build_once(name: str) -> None:
    """In a fresh process: partition, build and run once; print seconds and what was built."""
    from byoc.codegen import STATS

    model = next(_zoo([name], True))
    feeds = model.make_inputs(np.random.default_rng(0))
    proto = model.load()
    start = time.perf_counter()
    exe = byoc.build(byoc.partition(byoc.load_onnx(proto), backends=["ccompiler"]))
    built = time.perf_counter()
    exe.run(feeds)
    done = time.perf_counter()
    print(json.dumps({"build_s": built - start, "first_run_s": done - built,
                      "compiled": STATS.compiled, "cached": STATS.cached}))


def _timed_build(name: str, cache: str) -> dict:
    env = {**os.environ, "BYOC_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, __file__, "--build-once", name], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"building {name} failed: {last[:200]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_models(names: list[str], everything: bool, repeat: int) -> None:
    print(f"{'model':22} {'cold s':>7} {'(built)':>7} {'warm s':>7} {'(built)':>7} "
          f"{'ccomp ms':>9} {'host ms':>9} {'ort ms':>8} {'c/ort':>6} {'c/host':>6} "
          f"{'nodes':>6} {'flops':>6}")
    for model in _zoo(names, everything):
        try:
            _bench_model(model, repeat)
        except Exception as exc:  # one broken model must not hide the others' figures
            print(f"{model.name:22} failed: {type(exc).__name__}: {str(exc)[:150]}")


def _bench_model(model, repeat: int) -> None:
    """One row: cold and warm builds in fresh processes, then steady runs here."""
    with tempfile.TemporaryDirectory(prefix="byoc-bench-") as cache:
        cold = _timed_build(model.name, cache)
        warm = _timed_build(model.name, cache)
        os.environ["BYOC_CACHE_DIR"] = cache
        proto = model.load()
        feeds = model.make_inputs(np.random.default_rng(0))
        mod = byoc.load_onnx(proto)
        part = byoc.partition(mod, backends=["ccompiler"])
        exe, host = byoc.build(part), byoc.build(mod)
        session = onnxruntime_session(proto)
        c = best_ms(lambda: exe.run(feeds), repeat)
        h = best_ms(lambda: host.run(feeds), repeat)
        o = best_ms(lambda: session.run(None, feeds), repeat)
        nodes, flops = offload_share(mod, part, feeds)
    print(f"{model.name:22} {cold['build_s'] + cold['first_run_s']:7.2f} "
          f"{cold['compiled']:7d} {warm['build_s'] + warm['first_run_s']:7.2f} "
          f"{warm['compiled']:7d} {c:9.2f} {h:9.2f} {o:8.2f} {c / o:6.2f} {c / h:6.2f} "
          f"{nodes:6.0%} {flops:6.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", action="store_true", help="only the per-op table")
    parser.add_argument("--models", nargs="*", help="only these zoo models (none: all)")
    parser.add_argument("--all", action="store_true", help="include VGG-19")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--build-once", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    threadpool_limits(1)  # numpy's BLAS on one thread, as onnxruntime and ccompiler
    if args.build_once:
        build_once(args.build_once)
        return
    if args.models is None or args.ops:
        bench_ops(args.repeat)
    if not args.ops:
        print()
        bench_models(args.models or [], args.all, max(3, args.repeat // 4))


if __name__ == "__main__":
    main()
