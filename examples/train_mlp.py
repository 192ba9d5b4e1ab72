"""Train a small MLP classifier with plain SGD over byoc.gradient.

    python examples/train_mlp.py [--steps 300] [--lr 0.5] [--backend ccompiler] [--recompute]

The data are three interleaved spirals of 2-D points, generated here. The model is an ONNX
graph made with onnx.helper, as an exporter would write it: two hidden layers of
MatMul + Add + SiLU (x * Sigmoid(x)), a linear layer, SoftmaxCrossEntropyLoss. Its weights are
initializers; byoc.gradient turns them into inputs (same names), so every step feeds the
current weights and gets back the loss and one gradient per weight.

At the end it prints the memory of one step (forward alone, forward + backward, and the same
with recompute="elementwise") against the liveness bound, from byoc.autodiff.measure_memory.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.autodiff import measure_memory

WEIGHTS = ["w1", "b1", "w2", "b2", "w3", "b3"]


def spirals(n_per_class: int = 100, classes: int = 3, seed: int = 0
            ) -> tuple[np.ndarray, np.ndarray]:
    """Points on ``classes`` interleaved spiral arms, with a little noise."""
    rng = np.random.default_rng(seed)
    r = np.tile(np.linspace(0.1, 1.0, n_per_class), classes)
    arm = np.repeat(np.arange(classes), n_per_class)
    theta = arm * 2 * np.pi / classes + r * 4 + rng.normal(scale=0.15, size=r.shape)
    x = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1).astype(np.float32)
    return x, arm.astype(np.int64)


def mlp(hidden: int = 32, classes: int = 3, seed: int = 0) -> onnx.ModelProto:
    """The model: x (N, 2), labels (N,) -> loss (scalar), logits (N, classes)."""
    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        scale = np.sqrt(2.0 / shape[0]) if len(shape) == 2 else 0.0
        return numpy_helper.from_array((rng.normal(size=shape) * scale).astype(np.float32), name)

    inits = [weight("w1", (2, hidden)), weight("b1", (hidden,)),
             weight("w2", (hidden, hidden)), weight("b2", (hidden,)),
             weight("w3", (hidden, classes)), weight("b3", (classes,))]
    nodes = []
    x = "x"
    for k in (1, 2):  # Linear + SiLU, the chain recompute="elementwise" mirrors
        nodes += [helper.make_node("MatMul", [x, f"w{k}"], [f"mm{k}"], name=f"fc{k}"),
                  helper.make_node("Add", [f"mm{k}", f"b{k}"], [f"z{k}"], name=f"fc{k}_bias"),
                  helper.make_node("Sigmoid", [f"z{k}"], [f"s{k}"], name=f"silu{k}_gate"),
                  helper.make_node("Mul", [f"z{k}", f"s{k}"], [f"h{k}"], name=f"silu{k}")]
        x = f"h{k}"
    nodes += [helper.make_node("MatMul", [x, "w3"], ["mm3"], name="fc3"),
              helper.make_node("Add", ["mm3", "b3"], ["logits"], name="fc3_bias"),
              helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                               name="xent")]
    graph = helper.make_graph(
        nodes, "spiral_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["N"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)], ir_version=10)


def initial_weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t).copy() for t in model.graph.initializer}


def training_step(model: onnx.ModelProto, backend: str | None = None,
                  recompute: str | None = None) -> Callable[[dict], dict[str, np.ndarray]]:
    """One step as a function: feed {x, labels, weights...}, get {loss, logits, grad:w...}.
    ``backend`` partitions the step for that backend first (the host runs the rest)."""
    step = byoc.gradient(byoc.load_onnx(model), loss="loss", wrt=WEIGHTS, recompute=recompute)
    if backend is not None:
        step = byoc.partition(step, backends=[backend])
    return byoc.build(step).run


def train(steps: int = 300, lr: float = 0.5, backend: str | None = None,
          recompute: str | None = None, seed: int = 0, log: Callable[[str], None] = print
          ) -> list[float]:
    """Full-batch SGD on the spirals; returns the loss of every step."""
    model = mlp(seed=seed)
    x, labels = spirals(seed=seed)
    weights = initial_weights(model)
    run = training_step(model, backend, recompute)
    losses = []
    for k in range(steps):
        out = run({"x": x, "labels": labels, **weights})
        losses.append(float(out["loss"]))
        for name in WEIGHTS:  # plain SGD: w <- w - lr dL/dw
            weights[name] = weights[name] - np.float32(lr) * out[f"grad:{name}"]
        if k % max(steps // 10, 1) == 0 or k == steps - 1:
            accuracy = float(np.mean(out["logits"].argmax(1) == labels))
            log(f"step {k:4d}  loss {losses[-1]:.4f}  accuracy {accuracy:.2f}")
    return losses


def memory_report(log: Callable[[str], None] = print) -> dict[str, byoc.autodiff.MemoryReport]:
    """Peak live bytes of one step, with and without recompute, against the bound."""
    model = mlp()
    x, labels = spirals()
    feed = {"x": x, "labels": labels}
    forward = byoc.load_onnx(model)
    reports = {"forward": measure_memory(forward, feed)}
    feed = {**feed, **initial_weights(model)}
    for label, recompute in (("forward+backward", None), ("recompute", "elementwise")):
        step = byoc.gradient(forward, loss="loss", wrt=WEIGHTS, recompute=recompute)
        reports[label] = measure_memory(step, feed)
    for label, r in reports.items():
        log(f"{label:17s} {r}")
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--backend", default=None, help="partition each step for this backend")
    parser.add_argument("--recompute", action="store_true", help='recompute="elementwise"')
    args = parser.parse_args(argv)
    losses = train(args.steps, args.lr, args.backend, "elementwise" if args.recompute else None)
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    memory_report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
