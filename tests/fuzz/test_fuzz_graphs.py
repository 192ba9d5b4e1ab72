"""Random valid ONNX graphs, imported and partitioned every way, compute what onnxruntime does.

Each graph (``strategies.fuzz_graphs``) runs on the host alone; partitioned for ``reference``,
``onnxruntime`` and ``ccompiler`` (when a C compiler is there); and for two mixes drawn from
priority lists of those and of three partial test backends, each taking a random subset of the
graph's ops and compiling with reference's, onnxruntime's or ccompiler's compile (see
``harness.py``). Every output must equal onnxruntime's on the original model within
``byoc.compare``'s tolerances, and nothing may raise.

The default run is derandomized (the same examples every time, CI included) and small; the
slow one (``-m slow``) runs 500 more. ``BYOC_FUZZ_EXAMPLES=N`` changes the slow count. A failure
prints the model in ONNX's text form: shrunk ones go to ``test_fuzz_regressions.py``.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import CCOMPILER, COMMON, check_case, plans
from tests.fuzz.strategies import GENERATORS, FuzzGraph, fuzz_graphs


@settings(max_examples=40, **COMMON)
@given(data=st.data(), case=fuzz_graphs())
def test_fuzzed_graphs_match_onnxruntime(case: FuzzGraph, data: st.DataObject) -> None:
    # ccompiler in one example out of three keeps the default run to seconds (C compiles).
    with_c = CCOMPILER is not None and data.draw(st.integers(0, 2)) == 0
    check_case(case, *data.draw(plans(case, with_c)))


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("BYOC_FUZZ_EXAMPLES", "500")), **COMMON)
@given(data=st.data(), case=fuzz_graphs(max_nodes=14))
def test_many_fuzzed_graphs_match_onnxruntime(case: FuzzGraph, data: st.DataObject) -> None:
    check_case(case, *data.draw(plans(case, CCOMPILER is not None)))


@settings(max_examples=60, **COMMON)
@given(case=fuzz_graphs())
def test_the_strategy_makes_valid_models(case: FuzzGraph) -> None:
    """Every drawn model passes ONNX's full check, and its inputs fit its declarations."""
    onnx.checker.check_model(case.model, full_check=True)
    declared = {i.name: i for i in case.model.graph.input}
    assert set(case.inputs) == set(declared)
    for name, value in case.inputs.items():
        assert np.all(np.isfinite(value)) and value.ndim == len(
            declared[name].type.tensor_type.shape.dim)


@pytest.mark.parametrize("op", sorted(GENERATORS))
def test_each_generator_adds_its_op(op: str) -> None:
    """No generator is dead code: drawn alone, each adds its op within a few examples."""
    seen: list[bool] = []

    @settings(max_examples=10, **COMMON)
    @given(fuzz_graphs(max_nodes=3, ops=(op,)))
    def draw(case: FuzzGraph) -> None:
        seen.append(op in case.ops)

    draw()
    assert any(seen), f"{op} never made it into a graph"
