"""Liveness figures (byoc.autodiff.measure_memory), the backward-friendly gradient order, and
recompute="elementwise" (the mirror): what it mirrors, and that it lowers the peak."""

from __future__ import annotations

import importlib.util
import os

import numpy as np

import byoc
from byoc import op
from byoc.autodiff import measure_memory
from byoc.autodiff.recompute import mirrorable
from byoc.ir import Call, post_order

from .fd import module


def test_figures_of_a_chain_by_hand():
    x = op.var("x", (1000,), "float64")
    s = op.ReduceSum(op.Exp(op.Exp(x)), keepdims=0)
    r = measure_memory(module([s], [x], ["s"]), {"x": np.zeros(1000)})
    # a = exp(x): 8000 B; b = exp(a): a and b alive, 16000 B, then a is freed; s: 8 B kept
    assert (r.peak_bytes, r.bound_bytes, r.total_bytes) == (16000, 16000, 16008)
    assert r.input_bytes == 8000 and r.instructions == 3


def _example():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_mlp.py")
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_example_reports_recompute_below_the_plain_peak():
    reports = _example().memory_report(log=lambda line: None)
    fwd, plain, mirrored = reports["forward"], reports["forward+backward"], reports["recompute"]
    for r in reports.values():
        assert 0 < r.bound_bytes <= r.peak_bytes <= r.total_bytes
    assert fwd.peak_bytes < plain.peak_bytes
    assert mirrored.peak_bytes < 0.8 * plain.peak_bytes  # 0.224 vs 0.297 MiB when written
    assert mirrored.instructions > plain.instructions  # the time it trades


def test_gradients_come_in_completion_order():
    example = _example()
    g = byoc.gradient(byoc.load_onnx(example.mlp()), loss="loss", wrt=example.WEIGHTS)
    assert g.main.attrs["output_names"][2:] == ["grad:b3", "grad:w3", "grad:b2", "grad:w2",
                                                "grad:b1", "grad:w1"]


def test_what_is_mirrored():
    x, b = op.var("x", (4,), "float64"), op.var("b", (4,), "float64")
    m = op.MatMul(op.Reshape(x, op.const(np.array([1, 4]))), op.const(np.eye(4)))
    z = op.Add(m, b)  # reads one stored tensor (m): mirrored
    silu = op.Mul(z, op.Sigmoid(z))  # a chain back to m alone: mirrored
    two = op.Add(silu, m)  # m and silu are both mirrored to m: still one stored tensor
    both = op.Mul(op.Exp(x), op.Tanh(m))  # reads x (an input) and Tanh(m): mirrored
    drop = op.Dropout(z)  # not repeatable
    wide = op.Add(op.Softmax(m), op.Relu(op.Softmax(silu)))  # two stored softmaxes: not
    order = post_order([two, both, drop, wide])
    chosen = mirrorable(order)
    assert {z, silu, two, both} <= chosen
    assert drop not in chosen and wide not in chosen and m not in chosen


def test_recompute_only_adds_mirrors_and_keeps_the_forward():
    example = _example()
    mod = byoc.load_onnx(example.mlp())
    plain = byoc.gradient(mod, loss="loss", wrt=example.WEIGHTS)
    mirrored = byoc.gradient(mod, loss="loss", wrt=example.WEIGHTS, recompute="elementwise")
    spans = [e.span.name for e in post_order(mirrored.main.body) if isinstance(e, Call)]
    added = [s for s in spans if s.endswith("/recompute")]
    assert sorted(added) == sorted({"fc1_bias/recompute", "silu1_gate/recompute",
                                    "silu1/recompute", "fc2_bias/recompute",
                                    "silu2_gate/recompute", "silu2/recompute",
                                    "fc3_bias/recompute"})
    forward = [e for e in post_order(plain.main.body.fields[0]) if isinstance(e, Call)]
    assert [e.span.name for e in post_order(mirrored.main.body.fields[0])
            if isinstance(e, Call)] == [e.span.name for e in forward]
