"""Replaying an extracted case costs what its region costs, not what the model costs.

    python benchmarks/bench_extract.py

For a real model, times (a) importing, building and running the whole model on the reference
backend and (b) `repro` of a one-node case extracted from it, and prints the ratio.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import byoc  # noqa: E402
from byoc.extract import extract, repro  # noqa: E402
from tests.models.zoo import light_models  # noqa: E402


def main() -> int:
    entry = next(m for m in light_models() if m.name == "light_densenet121")
    proto = entry.load()
    inputs = entry.make_inputs(np.random.default_rng(0))
    t0 = time.perf_counter()
    mod = byoc.load_onnx(proto)
    part = byoc.partition(mod, backends=["reference"])
    byoc.build(part).run(inputs)
    whole = time.perf_counter() - t0
    node = next(n.name for n in proto.graph.node if n.op_type == "Conv")
    with tempfile.TemporaryDirectory() as tmp:
        case = os.path.join(tmp, "case")
        extract(mod, "reference", case, inputs, nodes=(node, node))
        t0 = time.perf_counter()
        checks = repro(case, "reference")
        replay = time.perf_counter() - t0
    assert all(c.ok for c in checks)
    print(f"{entry.name}: {len(proto.graph.node)} nodes")
    print(f"  whole model (import, partition, build, run) {whole * 1e3:8.1f} ms")
    print(f"  repro of the one-node case ({node})          {replay * 1e3:8.1f} ms")
    print(f"  ratio                                       {whole / replay:8.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
