"""The static memory plan: in place, size-matched reuse, and the live-set lower bound."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import byoc
from byoc import op
from byoc.ir import Function
from byoc.runtime.memory_plan import Step, Value, plan_function, plan_main, plan_steps

MB = 1 << 20


def test_elementwise_chain_runs_in_place():
    """x -> relu -> neg -> exp: one buffer for all three (each input read for the last time)."""
    x = op.var("x", (256, 1024))
    y = op.Exp(op.Neg(op.Relu(x)))
    plan = plan_function(Function((x,), y))
    assert plan.inplace == 2 and len(plan.block_bytes) == 1
    assert plan.peak_bytes == MB and plan.naive_bytes == 3 * MB


def test_no_in_place_over_a_value_read_later():
    """a = relu(x); b = neg(a); c = add(a, b): b cannot overwrite a."""
    steps = [Step((), (Value("a", 100, "float32"),)),
             Step(("a",), (Value("b", 100, "float32"),), inplace=True),
             Step(("a", "b"), (Value("c", 100, "float32"),), inplace=True)]
    plan = plan_steps(steps, keep=["c"])
    assert plan.block_of["a"] != plan.block_of["b"]
    assert plan.block_of["c"] in (plan.block_of["a"], plan.block_of["b"])
    assert plan.lower_bound == 300


def test_freed_block_is_reused_by_size():
    """a, b freed before c and d are made: c takes a's block, d b's."""
    steps = [Step((), (Value("a", 1000, "float32"),)),
             Step(("a",), (Value("b", 900, "float32"),)),
             Step(("b",), (Value("c", 950, "float32"),)),
             Step(("c",), (Value("d", 1000, "float32"),))]
    plan = plan_steps(steps, keep=["d"])
    assert len(plan.block_bytes) == 2 and plan.reused == 2
    assert plan.peak_bytes <= 1.1 * plan.lower_bound


def test_offsets_never_overlap_for_values_alive_together():
    rng = np.random.default_rng(0)
    steps, names = [], []
    for k in range(200):
        reads = tuple(rng.choice(names, size=min(len(names), 2), replace=False)) if names else ()
        steps.append(Step(reads, (Value(f"v{k}", int(rng.integers(1, 5000)), "float32"),)))
        names.append(f"v{k}")
    plan = plan_steps(steps, keep=["v199"])
    last = {}
    for t, s in enumerate(steps):
        for r in s.reads:
            last[r] = t
    last["v199"] = len(steps)
    live = [(t, last.get(f"v{t}", t), plan.offset(f"v{t}"), plan.offset(f"v{t}") +
             steps[t].writes[0].nbytes) for t in range(200)]
    for a in live:
        for b in live:
            if a is not b and a[0] <= b[1] and b[0] <= a[1]:
                assert a[3] <= b[2] or b[3] <= a[2]


def test_a_real_model_is_within_bound():
    path = Path(byoc.__file__).parent / "data" / "tiny_resnet.onnx"
    mod = byoc.load_onnx(str(path))
    shape = [2 if isinstance(d, str) else d for d in mod.main.params[0].type.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    s = plan_main(mod, {mod.main.params[0].name: x}).summary()
    assert s["planned_peak_bytes"] <= 1.1 * s["lower_bound_bytes"]
    assert s["planned_peak_bytes"] < s["naive_bytes"]
