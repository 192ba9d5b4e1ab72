"""Finite-difference checks of MatMul (1-D operands, batch broadcasting) and Gemm (every
transpose flag, alpha, beta, broadcast C)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from byoc import op

from .fd import check
from .strategies import fd_settings, seeds


@st.composite
def matmul_shapes(draw):
    """numpy matmul operand shapes: 1-D or batched, batch dims broadcasting."""
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))

    def side(core: tuple[int, int], vector: tuple[int]) -> tuple[int, ...]:
        if draw(st.integers(0, 3)) == 0:
            return vector
        lead = draw(st.integers(0, len(batch)))
        return tuple(1 if draw(st.booleans()) else d for d in batch[lead:]) + core

    return side((m, k), (k,)), side((k, n), (k,))


@fd_settings
@given(shapes=matmul_shapes(), seed=seeds)
def test_matmul(shapes, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes
    check(lambda a, b: op.MatMul(a, b), {"a": rng.normal(size=sa), "b": rng.normal(size=sb)})


def test_matmul_vector_vector():
    rng = np.random.default_rng(1)
    check(lambda a, b: op.MatMul(a, b), {"a": rng.normal(size=4), "b": rng.normal(size=4)})


@fd_settings
@given(seed=seeds, ta=st.booleans(), tb=st.booleans(), c_shape=st.sampled_from(
    ["none", "full", "row", "col", "scalar"]), alpha=st.sampled_from([1.0, 0.5]),
    beta=st.sampled_from([1.0, -2.0]))
def test_gemm(seed, ta, tb, c_shape, alpha, beta):
    rng = np.random.default_rng(seed)
    m, k, n = rng.integers(1, 5, size=3)
    a = rng.normal(size=(k, m) if ta else (m, k))
    b = rng.normal(size=(n, k) if tb else (k, n))
    inputs = {"a": a, "b": b}
    shapes = {"full": (m, n), "row": (n,), "col": (m, 1), "scalar": ()}
    if c_shape != "none":
        inputs["c"] = rng.normal(size=shapes[c_shape])
    check(lambda *v: op.Gemm(*v, transA=int(ta), transB=int(tb), alpha=alpha, beta=beta), inputs)
