"""LSTM, GRU and RNN host kernels against onnxruntime (onnx.reference for layout=1, which
onnxruntime does not run), over directions, layouts, optional inputs and attributes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from byoc.compare import run_onnxruntime
from byoc.op.kernels import HAND_KERNELS

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
EXTRAS = {"LSTM": ["peephole", "clip"], "GRU": ["linear_before_reset", "clip"], "RNN": ["clip"]}
CASES = [(op, d, layout, b, s, h, None)
         for op in GATES
         for d, layout, b, s, h in itertools.product(["forward", "reverse", "bidirectional"],
                                                     [0, 1], [0, 1], [0, 1], [0, 1])
         # onnx.reference ignores sequence_lens, and onnxruntime has no layout=1: no oracle.
         if not (s and layout)]
CASES += [(op, "bidirectional", 0, 1, 1, 1, extra) for op in GATES for extra in EXTRAS[op]]


@pytest.mark.parametrize("op, direction, layout, with_b, with_lens, with_h0, extra", CASES)
def test_recurrent_matches_onnxruntime(op, direction, layout, with_b, with_lens, with_h0, extra):
    rng = np.random.default_rng(0)
    seq, batch, n_in, hidden = 5, 3, 4, 6
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    f32 = np.float32
    x = rng.standard_normal((batch, seq, n_in) if layout else (seq, batch, n_in)).astype(f32)
    w = (rng.standard_normal((dirs, g * hidden, n_in)) * 0.5).astype(f32)
    r = (rng.standard_normal((dirs, g * hidden, hidden)) * 0.5).astype(f32)
    b = rng.standard_normal((dirs, 2 * g * hidden)).astype(f32) if with_b else None
    lens = np.array([5, 3, 1], np.int32) if with_lens else None
    h_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    h0 = rng.standard_normal(h_shape).astype(f32) if with_h0 else None
    inputs = [x, w, r, b, lens, h0]
    if op == "LSTM":
        c0 = rng.standard_normal(h_shape).astype(f32) if with_h0 else None
        peep = rng.standard_normal((dirs, 3 * hidden)).astype(f32) if extra == "peephole" else None
        inputs += [c0, peep]
    names = ["X", "W", "R", "B", "lens", "h0", "c0", "P"][:len(inputs)]
    attrs = {"hidden_size": hidden, "direction": direction, "layout": layout}
    if extra == "linear_before_reset":
        attrs["linear_before_reset"] = 1
    if extra == "clip":
        attrs["clip"] = 0.7
    n_out = 3 if op == "LSTM" else 2
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, [n if v is not None else "" for n, v in zip(names, inputs)], outs, **attrs)
    graph = helper.make_graph(
        [node], "rnn",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in zip(names, inputs) if v is not None],
        [helper.make_empty_tensor_value_info(o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    feeds = {n: v for n, v in zip(names, inputs) if v is not None}
    want = (ReferenceEvaluator(model).run(None, feeds) if layout
            else list(run_onnxruntime(model, feeds).values()))
    got = HAND_KERNELS[op](attrs, *inputs)
    for k, ref in enumerate(want):
        assert got[k].shape == ref.shape and got[k].dtype == ref.dtype
        assert np.abs(got[k] - ref).max() <= 1e-5 * np.abs(ref).max()
