"""A 100,000-node chain imports, prints and runs: nothing in byoc recurses over a graph."""

from __future__ import annotations

import numpy as np
from onnx import helper

import byoc
from tests.conftest import FLOAT, make_model


def test_a_100k_node_chain_imports_prints_and_runs():
    n = 100_000
    ops = ["Neg", "Abs", "Neg", "Identity"]
    nodes = [helper.make_node(ops[i % 4], ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"], name=f"n{i}")
             for i in range(n)]
    model = make_model(nodes, [("x", FLOAT, [4])], [(f"t{n - 1}", FLOAT, [4])])
    mod = byoc.load_onnx(model)
    text = mod.astext()
    assert text.count("\n") == n + 2 and "span=n99999" in text
    out = byoc.build(mod).run({"x": np.array([-2.0, -1.0, 1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out[f"t{n - 1}"], np.array([-2.0, -1.0, -1.0, -2.0], np.float32))
