"""Memory and time of one training step (forward + backward) built by byoc.gradient, with and
without recompute="elementwise".

    python benchmarks/bench_autodiff.py [--batch 4096] [--repeat 5]

Two models: the example's spiral MLP (SiLU activations: elementwise chains to mirror) at a
large batch, and byoc's tiny ResNet with an NLL loss (Conv, BN, Relu: little to mirror). For
each: the liveness peak of the executor's plan, the working-set bound, the bytes with no
freeing at all (byoc.autodiff.measure_memory), the instruction count and the median step time
(one BLAS thread, variants interleaved so machine drift hits them alike).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from threadpoolctl import threadpool_limits

import byoc
from byoc.autodiff import measure_memory

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import train_mlp  # noqa: E402


def mlp_case(batch: int):
    model = train_mlp.mlp()
    x, labels = train_mlp.spirals(n_per_class=batch // 3)
    feed = {"x": x, "labels": labels, **train_mlp.initial_weights(model)}
    return model, feed, train_mlp.WEIGHTS


def resnet_case(batch: int):
    """tiny_resnet with loss = NLL(log(probabilities), labels), weights as parameters."""
    model = onnx.load(os.path.join(os.path.dirname(byoc.__file__), "data", "tiny_resnet.onnx"))
    g = model.graph
    out = g.output[0].name
    g.node.extend([helper.make_node("Log", [out], ["logp"], name="log"),
                   helper.make_node("NegativeLogLikelihoodLoss", ["logp", "labels"], ["loss"],
                                    name="nll")])
    g.input.append(helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"]))
    g.output.insert(0, helper.make_tensor_value_info("loss", TensorProto.FLOAT, []))
    rng = np.random.default_rng(0)
    weights = {t.name: numpy_helper.to_array(t) for t in g.initializer
               if t.data_type == TensorProto.FLOAT}
    feed = {"image": rng.normal(size=(batch, 3, 32, 32)).astype(np.float32),
            "labels": rng.integers(0, 10, size=batch), **weights}
    return model, feed, list(weights)


def interleaved_medians(runs: list, feeds: list, repeat: int) -> list[float]:
    """Median seconds of each run on its feed, calls alternating (after one warm-up each)."""
    times: list[list[float]] = [[] for _ in runs]
    for run, feed in zip(runs, feeds):
        run(feed)  # kernels built, caches filled
    for _ in range(repeat):
        for run, feed, acc in zip(runs, feeds, times):
            t0 = time.perf_counter()
            run(feed)
            acc.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def mib(n: int) -> str:
    return f"{n / 2**20:9.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096, help="MLP batch (ResNet: batch/512)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    cases = {"spiral MLP": mlp_case(args.batch),
             "tiny ResNet": resnet_case(max(args.batch // 512, 1))}
    print(f"{'model':12s} {'variant':10s} {'peak MiB':>9s} {'bound':>9s} {'no free':>9s} "
          f"{'instrs':>6s} {'step ms':>8s}")
    for label, (model, feed, weights) in cases.items():
        mod = byoc.load_onnx(model)
        inputs_only = {k: v for k, v in feed.items() if k not in weights}
        variants = {"forward": (mod, inputs_only)}
        for variant, recompute in (("fwd+bwd", None), ("recompute", "elementwise")):
            variants[variant] = (byoc.gradient(mod, loss="loss", wrt=weights,
                                               recompute=recompute), feed)
        reports = {v: measure_memory(m, f) for v, (m, f) in variants.items()}
        with threadpool_limits(1):
            seconds = interleaved_medians([byoc.build(m).run for m, _ in variants.values()],
                                          [f for _, f in variants.values()], args.repeat)
        for (variant, r), sec in zip(reports.items(), seconds):
            print(f"{label:12s} {variant:10s} {mib(r.peak_bytes)} {mib(r.bound_bytes)} "
                  f"{mib(r.total_bytes)} {r.instructions:6d} {1e3 * sec:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
