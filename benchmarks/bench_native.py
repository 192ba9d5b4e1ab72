"""native vs onnxruntime, 1 thread, side by side; an 8-op elementwise chain vs numpy vs copy;
GEMM GFLOP/s of native's C vs numpy's OpenBLAS vs onnxruntime; and each model's memory plan.

    python benchmarks/bench_native.py [model ...]
"""

from __future__ import annotations

import sys
import time

import numpy as np
import onnxruntime as ort
from threadpoolctl import threadpool_limits

import byoc
from byoc import op
from byoc.ir import Function, IRModule
from byoc.runtime.memory_plan import plan_main
from tests.models import zoo

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


def chain() -> None:
    n = 16 << 20
    x = op.var("x", (n,))
    y = x
    for k in range(8):  # Mul, Relu, Mul, Neg, Mul, Abs, Mul, Sigmoid
        y = [op.Relu, op.Neg, op.Abs, op.Sigmoid][k // 2](y) if k % 2 else \
            op.Mul(y, op.const(np.float32(1.0001)))
    func = Function((x,), y, {"output_names": ["y"]})
    exe = byoc.build(byoc.partition(IRModule({"main": func}), backends=["native"]))
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = np.empty_like(a)

    unary = [lambda z: np.maximum(z, 0), np.negative, np.abs, lambda z: 1 / (1 + np.exp(-z))]

    def numpy_chain():
        z = a
        for k in range(8):
            z = unary[k // 2](z) if k % 2 else z * np.float32(1.0001)
        return z

    t_fused, t_copy, t_new = _best_of(lambda: exe.run({"x": a}), lambda: np.copyto(out, a),
                                      a.copy, repeat=7)
    t_numpy = _best(numpy_chain, 3)
    gbs = lambda t: 2 * a.nbytes / t / 1e9  # noqa: E731 (read + write of 64 MB)
    print(f"8-op chain on 16M floats: fused {t_fused * 1e3:.1f} ms ({gbs(t_fused):.1f} GB/s), "
          f"numpy op by op {t_numpy * 1e3:.1f} ms, copy {t_copy * 1e3:.1f} ms "
          f"({gbs(t_copy):.1f} GB/s): fused at {t_copy / t_fused:.0%} of copy bandwidth")
    # run() returns a new array, whose first touch (the kernel zeroing 64 MB) a copy into an
    # existing one does not pay: the same comparison against a copy into a new array
    print(f"  copy into a new array (a.copy()) {t_new * 1e3:.1f} ms: fused at "
          f"{t_new / t_fused:.0%} of it")


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
