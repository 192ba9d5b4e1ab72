"""The native backend: fused kernels against the unfused host reference, on random shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import byoc
from byoc import op
from byoc.ir import Function, IRModule


def _check(func: Function, feeds: dict[str, np.ndarray], tol: float = 1e-5) -> str:
    """Run ``func`` partitioned for native and on the host; returns the native region's C."""
    func = func.with_attrs(output_names=["out"])
    mod = IRModule({"main": func})
    part = byoc.partition(mod, backends=["native"])
    exe = byoc.build(part)
    got = exe.run(feeds)["out"]
    ref = byoc.build(mod).run(feeds)["out"]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))
    built = [exe.external[name] for name in part.functions if name != "main"]
    # one source per shape signature built (ccompiler's runtime makes 0-d inputs 1-d: two)
    return "".join(g.source for region in built for g in region.specializations[:1])


def _bcast(draw, shape):
    """A shape broadcasting to ``shape``: some dims set to 1, some leading dims dropped."""
    drop = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else d for d in shape[drop:])


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_elementwise_chain_with_broadcasting_is_one_loop(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    other = _bcast(data.draw, shape)
    rng = np.random.default_rng(0)
    x, y = op.var("x", shape), op.var("y", other)
    z = op.Tanh(op.Mul(op.Sigmoid(op.Add(x, y)), op.const(np.float32(1.5))))
    z = op.Sub(op.Relu(z), op.const(rng.standard_normal(other).astype(np.float32)))
    source = _check(Function((x, y), z), {"x": rng.standard_normal(shape).astype(np.float32),
                                          "y": rng.standard_normal(other).astype(np.float32)})
    assert source.count("static BYOC_NOINLINE void byoc_k") == 1  # one kernel, no buffers
    assert "ewise:" in source


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(3, 9), st.sampled_from([1, 3]),
       st.booleans())
def test_conv_batchnorm_relu_residual_epilogue(n, m, hw, k, residual):
    rng = np.random.default_rng(1)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x = op.var("x", (n, 3, hw, hw))
    c = op.Conv(x, op.const(f32(m, 3, k, k)), op.const(f32(m)), pads=[k // 2] * 4)
    bn = op.BatchNormalization(c, op.const(f32(m)), op.const(f32(m)), op.const(f32(m)),
                               op.const(np.abs(f32(m)) + 0.5))
    y = op.Add(bn, op.var("r", (n, m, hw, hw))) if residual else bn
    y = op.HardSwish(op.Clip(op.Relu(y), op.const(np.float32(0)), op.const(np.float32(4))))
    params = (x, y.args[0].args[0].args[0].args[1]) if residual else (x,)
    feeds = {"x": f32(n, 3, hw, hw), **({"r": f32(n, m, hw, hw)} if residual else {})}
    source = _check(Function(params, y), feeds, tol=1e-4)
    assert source.count("static BYOC_NOINLINE void byoc_k") == 1 and "epilogue:" in source
    assert "BatchNormalization" not in source


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 7), st.integers(1, 20), st.integers(1, 20), st.booleans())
def test_matmul_and_gemm_take_bias_and_activation(m, k, n, gemm):
    rng = np.random.default_rng(2)
    x = op.var("x", (m, k))
    w = op.const(rng.standard_normal((k, n)).astype(np.float32))
    b = op.const(rng.standard_normal(n).astype(np.float32))
    y = op.Gemm(x, w, b) if gemm else op.Add(op.MatMul(x, w), b)
    y = op.Mul(y, op.Sigmoid(y))
    source = _check(Function((x,), y), {"x": rng.standard_normal((m, k)).astype(np.float32)},
                    tol=1e-4)
    assert "epilogue:" in source


def test_diamond_and_non_fusable_ops_in_one_region():
    rng = np.random.default_rng(3)
    x = op.var("x", (2, 4, 6, 6))
    c = op.Conv(x, op.const(rng.standard_normal((4, 4, 3, 3)).astype(np.float32)),
                pads=[1, 1, 1, 1])
    d = op.Sum(op.Relu(c), op.Sigmoid(c), op.Neg(c))
    s = op.Softmax(op.ReduceMean(d, op.const(np.array([2, 3], np.int64))), axis=1)
    _check(Function((x,), s), {"x": rng.standard_normal((2, 4, 6, 6)).astype(np.float32)})


def test_declines_say_why():
    from byoc.backends.native import supports

    x = op.var("x", (2, 3), "float64")
    assert supports(op.Relu(x)).startswith("native: ")
