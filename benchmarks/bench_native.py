"""native vs onnxruntime, 1 thread, side by side; an 8-op elementwise chain vs numpy vs copy;
and each model's memory plan.

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
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


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
        tn = _best(lambda: exe.run(feeds))
        to = _best(lambda: sess.run(None, feeds))
        p = plan_main(mod, feeds)
        print(f"{name:22} {tn * 1e3:10.2f} {to * 1e3:8.2f} {tn / to:6.2f}  "
              f"{p.peak_bytes / 2**20:.2f} / {p.lower_bound / 2**20:.2f} / "
              f"{p.naive_bytes / 2**20:.2f}", flush=True)


def chain() -> None:
    n = 16 << 20
    x = op.var("x", (n,))
    y = x
    for k in range(8):
        y = [op.Relu, op.Neg, op.Abs, op.Sigmoid][k % 4](y) if k % 2 else \
            op.Mul(y, op.const(np.float32(1.0001)))
    func = Function((x,), y, {"output_names": ["y"]})
    exe = byoc.build(byoc.partition(IRModule({"main": func}), backends=["native"]))
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = np.empty_like(a)

    def numpy_chain():
        z = a
        for k in range(8):
            z = (np.maximum(z, 0), -z, np.abs(z), 1 / (1 + np.exp(-z)))[k // 2 % 4] if k % 2 \
                else z * np.float32(1.0001)
        return z

    t_fused = _best(lambda: exe.run({"x": a}), 5)
    t_numpy = _best(numpy_chain, 3)
    t_copy = _best(lambda: np.copyto(out, a), 5)
    gbs = lambda t: 2 * a.nbytes / t / 1e9  # noqa: E731 (read + write of 64 MB)
    print(f"8-op chain on 16M floats: fused {t_fused * 1e3:.1f} ms ({gbs(t_fused):.1f} GB/s), "
          f"numpy op by op {t_numpy * 1e3:.1f} ms, copy {t_copy * 1e3:.1f} ms "
          f"({gbs(t_copy):.1f} GB/s): fused at {t_copy / t_fused:.0%} of copy bandwidth")


if __name__ == "__main__":
    with threadpool_limits(1):
        chain()
        models(sys.argv[1:] or MODELS)
