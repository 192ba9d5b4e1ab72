"""native vs onnxruntime, 1 thread, side by side; two 8-op elementwise chains vs numpy vs copy;
GEMM GFLOP/s of native's C vs numpy's OpenBLAS vs onnxruntime; and each model's memory plan.

    python benchmarks/bench_native.py [model ...]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import onnxruntime as ort
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests.models

import byoc  # noqa: E402
from byoc import op  # noqa: E402
from byoc.ir import Function, IRModule  # noqa: E402
from byoc.runtime.memory_plan import plan_main  # noqa: E402
from tests.models import zoo  # noqa: E402

MODELS = ["light_resnet50", "light_squeezenet", "light_shufflenet", "light_inception_v1",
          "light_densenet121", "bert_tiny", "gpt2_tiny", "vit_tiny", "ppocr_v4_det"]


def _best(fn, repeat: int = 10) -> float:
    return _best_of(fn, repeat=repeat)[0]


def _best_of(*fns, repeat: int = 10) -> list[float]:
    """The fastest of ``repeat`` runs of each, run in turn (a busy machine slows all alike)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [min(ts) for ts in times]


def models(names: list[str]) -> None:
    zoo_by_name = {m.name: m for m in (*zoo.MODELS, *zoo.light_models())}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    print(f"{'model':22} {'native ms':>10} {'ort ms':>8} {'ratio':>6}  memory plan (main): "
          "planned / lower bound / no reuse (MB)")
    for name in names:
        m = zoo_by_name[name]
        feeds = m.make_inputs(np.random.default_rng(0))
        mod = byoc.load_onnx(m.load())
        exe = byoc.build(byoc.partition(mod, backends=["native"]))
        sess = ort.InferenceSession(m.load().SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        tn, to = _best_of(lambda: exe.run(feeds), lambda: sess.run(None, feeds), repeat=20)
        p = plan_main(mod, feeds)
        print(f"{name:22} {tn * 1e3:10.2f} {to * 1e3:8.2f} {tn / to:6.2f}  "
              f"{p.peak_bytes / 2**20:.2f} / {p.lower_bound / 2**20:.2f} / "
              f"{p.naive_bytes / 2**20:.2f}", flush=True)


# Two 8-op chains, each as ONNX ops and as numpy ops: one with Sigmoid in it, whose exp and
# division make the fused loop compute-bound, and one of plain arithmetic, which is bound by
# memory bandwidth as a copy is.
_C = np.float32(1.0001)
CHAINS = {
    "with Sigmoid": (
        [lambda y: op.Mul(y, op.const(_C)), op.Relu, lambda y: op.Mul(y, op.const(_C)), op.Neg,
         lambda y: op.Mul(y, op.const(_C)), op.Abs, lambda y: op.Mul(y, op.const(_C)),
         op.Sigmoid],
        [lambda z: z * _C, lambda z: np.maximum(z, 0), lambda z: z * _C, np.negative,
         lambda z: z * _C, np.abs, lambda z: z * _C, lambda z: 1 / (1 + np.exp(-z))]),
    "arithmetic": (
        [lambda y: op.Mul(y, op.const(_C)), lambda y: op.Add(y, op.const(np.float32(0.5))),
         op.Relu, op.Neg, op.Abs, lambda y: op.Sub(y, op.const(np.float32(0.25))),
         lambda y: op.Min(y, op.const(np.float32(3.0))), lambda y: op.Mul(y, op.const(_C))],
        [lambda z: z * _C, lambda z: z + np.float32(0.5), lambda z: np.maximum(z, 0),
         np.negative, np.abs, lambda z: z - np.float32(0.25),
         lambda z: np.minimum(z, np.float32(3.0)), lambda z: z * _C]),
}


def chain() -> None:
    """Each chain on 16M floats: fused end to end, the caller dropping each result (run() then
    reuses its 64 MB output: the region holds the only reference) or keeping it (a fresh array
    each run, whose first touch costs page faults); the fused kernel alone (into an existing
    array); numpy op by op. As shares of a copy of the same bytes into an existing array
    (np.copyto) and, for results kept, into a new one (a.copy(), their counterpart)."""
    from byoc.backends.native import compile_region

    n = 16 << 20
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = np.empty_like(a)
    t_copy, t_new = _best_of(lambda: np.copyto(out, a), a.copy, repeat=7)
    gbs = lambda t: 2 * a.nbytes / t / 1e9  # noqa: E731 (read + write of 64 MB)
    print(f"8-op chains on 16M floats; copy into an existing array {t_copy * 1e3:.1f} ms "
          f"({gbs(t_copy):.1f} GB/s), into a new one (a.copy()) {t_new * 1e3:.1f} ms")
    for name, (onnx_ops, numpy_ops) in CHAINS.items():
        x = op.var("x", (n,))
        y = x
        for f in onnx_ops:
            y = f(y)
        func = Function((x,), y, {"output_names": ["y"]})
        part = byoc.partition(IRModule({"main": func}), backends=["native"])
        exe = byoc.build(part)
        (region,) = (f for name_, f in part.functions.items() if name_ != "main")
        kernel = compile_region(region).variant([a])

        def numpy_chain():
            z = a
            for f in numpy_ops:
                z = f(z)
            return z

        ref = numpy_chain()
        got = exe.run({"x": a})["y"]
        assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max(), f"{name} chain is wrong"
        held: list = [None]

        def kept():
            held[0] = exe.run({"x": a})  # the last result still held while this one runs

        # not interleaved with the others: a result they dropped is one kept() could reuse
        t_kept = _best(kept, 7)
        held[0] = None
        t_fused, t_kernel = _best_of(lambda: exe.run({"x": a}),
                                     lambda: kernel.run_into([a], [out]), repeat=7)
        t_numpy = _best(numpy_chain, 3)
        print(f"  {name:13} end to end {t_fused * 1e3:5.1f} ms ({t_copy / t_fused:4.0%} of copy);"
              f" results kept {t_kept * 1e3:5.1f} ms ({t_copy / t_kept:4.0%} of copy, "
              f"{t_new / t_kept:4.0%} of a.copy()); kernel alone {t_kernel * 1e3:5.1f} ms "
              f"({t_copy / t_kernel:4.0%} of copy); numpy op by op {t_numpy * 1e3:.0f} ms",
              flush=True)


GEMM_SIZES = [(64, 768, 768), (128, 3072, 768), (128, 768, 3072), (512, 512, 512),
              (48, 64, 256), (3136, 576, 64)]  # M x K x N: transformer layers, square, a conv


def gemm() -> None:
    """C[M, N] = A[M, K] @ B[K, N], B a constant (a weight), as each engine runs a MatMul."""
    from onnx import TensorProto, helper, numpy_helper

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    rng = np.random.default_rng(0)
    print(f"{'GEMM M x K x N':18} {'native':>8} {'numpy':>8} {'ort':>8}  GFLOP/s, 1 thread "
          "(numpy: its OpenBLAS)")
    for m, k, n in GEMM_SIZES:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        x = op.var("a", (m, k))
        func = Function((x,), op.MatMul(x, op.const(b)), {"output_names": ["c"]})
        exe = byoc.build(byoc.partition(IRModule({"main": func}), backends=["native"]))
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["c"])], "g",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [m, n])],
            [numpy_helper.from_array(b, "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        ref = a @ b
        got = exe.run({"a": a})["c"]
        assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max(), "native GEMM is wrong"
        flops = 2 * m * k * n / 1e9
        tn, tb, to = _best_of(lambda: exe.run({"a": a}), lambda: a @ b,
                              lambda: sess.run(None, {"a": a}))
        print(f"{m:5} x {k:4} x {n:4}   {flops / tn:8.1f} {flops / tb:8.1f} {flops / to:8.1f}",
              flush=True)


if __name__ == "__main__":
    with threadpool_limits(1):
        chain()
        gemm()
        models(sys.argv[1:] or MODELS)
