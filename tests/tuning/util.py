"""Synthetic models and fake backends whose costs are known, for testing tune and plans."""

from __future__ import annotations

import contextlib

import numpy as np
from byoc.backends.reference import compile_region
from onnx import TensorProto, helper

import byoc
from byoc.backend import register_backend, unregister_backend
from byoc.ir import Call, GlobalVar, IRModule, post_order
from byoc.tuning.cache import MeasurementCache
from byoc.tuning.measure import Measurement, Measurer
from tests.conftest import make_model

FLOAT = TensorProto.FLOAT


def chain_model(ops: list[str], name: str = "chain"):
    """x -> ops[0] -> ops[1] -> ... -> y, node k named n<k>."""
    nodes, prev = [], "x"
    for k, op in enumerate(ops):
        out = "y" if k == len(ops) - 1 else f"v{k}"
        nodes.append(helper.make_node(op, [prev], [out], name=f"n{k}"))
        prev = out
    return make_model(nodes, [("x", FLOAT, [4, 8])], [("y", FLOAT, [4, 8])], name=name)


def two_outputs_model():
    """x -> a -> (b -> y1, c -> d -> y2): main returns a tuple; a Split gives tuple items."""
    n = helper.make_node
    nodes = [n("Relu", ["x"], ["a"], name="a"), n("Abs", ["a"], ["y1"], name="b"),
             n("Split", ["a"], ["s0", "s1"], name="split", axis=1, num_outputs=2),
             n("Neg", ["s0"], ["c"], name="c"), n("Concat", ["c", "s1"], ["y2"], name="d",
                                                  axis=1)]
    return make_model(nodes, [("x", FLOAT, [4, 8])],
                      [("y1", FLOAT, [4, 8]), ("y2", FLOAT, [4, 8])], name="two_outputs")


def branchy_model():
    """Two branches that meet twice: x -> a -> (b1 -> b2, c1) -> m1 -> (d1, e1 -> e2) -> m2."""
    n = helper.make_node
    nodes = [n("Relu", ["x"], ["a"], name="a"),
             n("Abs", ["a"], ["b1"], name="b1"), n("Neg", ["b1"], ["b2"], name="b2"),
             n("Sigmoid", ["a"], ["c1"], name="c1"),
             n("Add", ["b2", "c1"], ["m1"], name="m1"),
             n("Relu", ["m1"], ["d1"], name="d1"),
             n("Abs", ["m1"], ["e1"], name="e1"), n("Neg", ["e1"], ["e2"], name="e2"),
             n("Mul", ["d1", "e2"], ["y"], name="m2")]
    return make_model(nodes, [("x", FLOAT, [4, 8])], [("y", FLOAT, [4, 8])], name="branchy")


@contextlib.contextmanager
def fake_backends(**supports: set[str]):
    """Backends that take the given ops and run them with the host kernels."""
    try:
        for name, ops in supports.items():
            register_backend(name, supports=ops, compile=compile_region)
        yield list(supports)
    finally:
        for name in supports:
            unregister_backend(name)


class Costs:
    """Known costs: per node on each backend (missing: cannot), per region a fixed cost and a
    cost per tensor crossing its boundary."""

    def __init__(self, node: dict[str, dict[str, float]], region: dict[str, float],
                 copy: dict[str, float]):
        self.node, self.region, self.copy = node, region, copy

    def of(self, part: IRModule) -> float:
        total = 0.0
        for e in post_order(part.main.body):
            if not isinstance(e, Call):
                continue
            if isinstance(e.op, GlobalVar):
                func = part[e.op.name]
                b = func.attrs["Compiler"]
                outs = len(func.attrs.get("output_names", [])) or 1
                total += self.region[b] + self.copy[b] * (len(func.params) + outs)
                total += sum(self.node[c.span.name][b] for c in post_order(func.body)
                             if isinstance(c, Call))
            else:
                total += self.node[e.span.name]["host"]
        return total


class FakeMeasurer(Measurer):
    """Measures by the known costs instead of the clock (nothing is timed). The costs are per
    node name, so equal work under other names may cost otherwise: nothing is reused by key
    across segments, as a real measurement would be."""

    def __init__(self, tensors, costs: Costs, cache: MeasurementCache | None = None):
        super().__init__(tensors, cache or MeasurementCache(enabled=False))
        self.costs = costs
        self.seen: list[str] = []

    def measure(self, part, inputs=None) -> Measurement:
        key = self.key(part, inputs or [p.name for p in part.main.params])
        self.seen.append(key)
        self.stats.measured += 1
        return Measurement(self.costs.of(part), "", 1, False, key)

    def compare(self, parts):
        return [Measurement(self.costs.of(p), "", 1) for p, _ in parts]


def tune_fake(model, backends, costs: Costs, atoms: int = 64, **kw):
    """byoc.tune with the fake measurer; returns (plan, measurer, module)."""
    mod = byoc.load_onnx(model)
    made = []

    def measurer(tensors):
        made.append(FakeMeasurer(tensors, costs))
        return made[-1]

    inputs = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    plan = byoc.tune(mod, backends, inputs, atoms=atoms, measurer=measurer, **kw)
    return plan, made[0], mod
