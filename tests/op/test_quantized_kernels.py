"""The integer kernels of quantized models (byoc/op/kernels/quantized.py) against onnxruntime:
every result bit-equal, including sums long enough to be cut into chunks (the float32 products
are exact only up to 2**24), rounding ties, saturation, per-channel scales and zero points."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import helper

from byoc.compare import onnxruntime_u8s8_saturates
from byoc.op.kernels.quantized import EXACT_FLOAT32, _exact_matmul

from .test_kernels import ORT, REF, C, Case, const, ins, none, randn, rint, run_case

i8, u8, i16, u16, i32, f32 = np.int8, np.uint8, np.int16, np.uint16, np.int32, np.float32
RANGE = {u8: (0, 256), i8: (-128, 128), u16: (0, 65536), i16: (-32768, 32768)}
CASES: list[tuple[str, Case]] = []


def q(dtype, *shape):
    """Uniform over the whole range of ``dtype``, the extremes included."""
    return rint(*RANGE[dtype], *shape, dtype=dtype)


def zp(dtype, *values):
    return const(values[0] if len(values) == 1 else list(values), dtype)


def add(cid: str, case: Case) -> None:
    if case.op in ("QuantizeLinear", "DequantizeLinear"):  # onnxruntime 1.32 runs them to 23
        case.opset = 23
    CASES.append((f"{case.op}-{cid}", case))


# MatMulInteger: all four dtype pairs; k beyond one exact float32 chunk (514 and 258 products).
for a, b in ((u8, i8), (u8, u8), (i8, i8), (i8, u8)):
    name = f"{np.dtype(a).name}x{np.dtype(b).name}"
    add(f"{name}-small", C("MatMulInteger", ins(q(a, 4, 7), q(b, 7, 5), zp(a, 3), zp(b, 5))))
    add(f"{name}-k576", C("MatMulInteger", ins(q(a, 16, 576), q(b, 576, 33), zp(a, 100),
                                               zp(b, -7 if b == i8 else 201))))
    add(f"{name}-k1500", C("MatMulInteger", ins(q(a, 3, 1500), q(b, 1500, 9))))
add("per-column-zp", C("MatMulInteger", ins(q(u8, 6, 40), q(i8, 40, 4), zp(u8, 128),
                                            zp(i8, 1, -2, 3, 0))))
add("batched", C("MatMulInteger", ins(q(u8, 2, 3, 5, 300), q(i8, 300, 7), zp(u8, 17))))
add("vector", C("MatMulInteger", ins(q(u8, 64), q(i8, 64, 8), zp(u8, 9))))

# ConvInteger: pads, strides, dilations, groups, 1-D and 3-D, k = 64 * 9 = 576 per output.
add("3x3", C("ConvInteger", ins(q(u8, 1, 4, 9, 9), q(u8, 6, 4, 3, 3), zp(u8, 128), zp(u8, 120)),
             pads=[1, 1, 1, 1]))
add("k576", C("ConvInteger", ins(q(u8, 2, 64, 8, 8), q(u8, 16, 64, 3, 3), zp(u8, 3)),
              pads=[1, 1, 1, 1], strides=[2, 2]))
add("grouped-dilated", C("ConvInteger", ins(q(u8, 1, 6, 11, 10), q(u8, 4, 3, 3, 2), zp(u8, 77)),
                         group=2, dilations=[2, 1], pads=[2, 1, 1, 0]))
add("1d", C("ConvInteger", ins(q(u8, 1, 3, 20), q(u8, 5, 3, 4)), strides=[3]))
add("3d", C("ConvInteger", ins(q(u8, 1, 2, 5, 5, 5), q(u8, 3, 2, 2, 2, 2), zp(u8, 250))))
add("no-zero-points", C("ConvInteger", ins(q(u8, 1, 8, 6, 6), q(u8, 8, 1, 3, 3)), group=8))


def scale(lo: float, hi: float, *shape):
    return lambda rng: rng.uniform(lo, hi, shape).astype(f32)


# QLinearMatMul: u8/i8 in and out, per-column b, long k; scales that saturate both ways.
for a, b, y in ((u8, u8, u8), (u8, i8, u8), (i8, i8, i8)):
    name = "x".join(np.dtype(t).name for t in (a, b, y))
    add(name, C("QLinearMatMul", ins(q(a, 5, 40), scale(0.01, 0.05), zp(a, 1), q(b, 40, 6),
                                     scale(0.01, 0.05), zp(b, -3 if b == i8 else 130),
                                     scale(0.5, 2), zp(y, 10))))
    add(f"{name}-k700", C("QLinearMatMul", ins(q(a, 2, 3, 700), scale(0.01, 0.02), zp(a, 0),
                                               q(b, 700, 4), scale(0.01, 0.02), zp(b, 0),
                                               scale(2, 4), zp(y, 0))))
add("per-column", C("QLinearMatMul", ins(q(u8, 4, 30), scale(0.02, 0.03), zp(u8, 128),
                                         q(i8, 30, 3), scale(0.01, 0.05, 3), zp(i8, 0, 0, 0),
                                         scale(0.05, 0.1), zp(u8, 128))))

# QLinearConv: bias, per-channel weights, depthwise, int8 activations, saturation.
add("bias-per-channel", C("QLinearConv", ins(
    q(u8, 1, 8, 10, 10), scale(0.01, 0.03), zp(u8, 120), q(i8, 16, 8, 3, 3),
    scale(0.001, 0.01, 16), const([0] * 16, i8), scale(0.01, 0.05), zp(u8, 5),
    rint(-5000, 5000, 16, dtype=i32)), pads=[1, 1, 1, 1]))
add("bias-beyond-float32", C("QLinearConv", ins(  # |bias| > 2**24: added in int32
    q(u8, 1, 4, 5, 5), scale(0.01, 0.03), zp(u8, 120), q(i8, 3, 4, 3, 3), scale(0.001, 0.01),
    zp(i8, 0), scale(1e5, 2e5), zp(u8, 5), rint(-2**30, 2**30, 3, dtype=i32))))
add("depthwise-strided", C("QLinearConv", ins(
    q(u8, 2, 6, 9, 9), scale(0.01, 0.03), zp(u8, 0), q(u8, 6, 1, 3, 3), scale(0.01, 0.02),
    zp(u8, 128), scale(0.02, 0.03), zp(u8, 128)), group=6, strides=[2, 2], pads=[1, 1, 1, 1]))
add("int8-k576", C("QLinearConv", ins(
    q(i8, 1, 64, 6, 6), scale(0.01, 0.02), zp(i8, -1), q(i8, 8, 64, 3, 3), scale(0.01, 0.02, 8),
    const([0] * 8, i8), scale(0.5, 1), zp(i8, 3)), pads=[1, 1, 1, 1]))
add("saturating", C("QLinearConv", ins(
    q(u8, 1, 3, 5, 5), const(1.0, f32), zp(u8, 0), q(u8, 2, 3, 2, 2), const(1.0, f32),
    zp(u8, 0), const(0.001, f32), zp(u8, 128))))

# Quantize and dequantize, as onnxruntime rounds: ties at exact halves of a step, every output
# type, per-axis scales and zero points; DynamicQuantizeLinear's scale and zero point too.
TIES = lambda rng: (np.arange(-700, 700) * 0.125).astype(f32)  # noqa: E731 (halves of 0.25)
for t in (u8, i8, u16, i16):
    add(f"{np.dtype(t).name}", C("QuantizeLinear", ins(randn(2, 3, 5, 5), const(0.02, f32),
                                                       zp(t, 7))))
    add(f"{np.dtype(t).name}-ties", C("QuantizeLinear", ins(TIES, const(0.25, f32), zp(t, 3))))
add("no-zero-point", C("QuantizeLinear", ins(randn(40), const(0.01, f32))))
add("nan-inf", C("QuantizeLinear", ins(const([np.nan, np.inf, -np.inf, 1, -1], f32),
                                       const(0.1, f32), zp(i8, 3))))  # NaN: the lowest, as MLAS
add("per-axis", C("QuantizeLinear", ins(randn(2, 3, 4), const([0.01, 0.02, 0.05], f32),
                                        zp(u8, 1, 100, 250)), axis=1))
add("u8", C("DequantizeLinear", ins(q(u8, 2, 3, 4), const(0.0123, f32), zp(u8, 131))))
add("per-axis", C("DequantizeLinear", ins(q(i8, 2, 3, 4), const([0.1, 0.2, 0.3], f32),
                                          zp(i8, -1, 0, 1)), axis=1))
add("int32", C("DequantizeLinear", ins(rint(-2**31, 2**31 - 1, 50, dtype=i32),
                                       const(0.0123, f32))))
add("no-zero-point", C("DequantizeLinear", ins(q(u16, 30), const(3.5, f32), none())))
for name, x in (("randn", randn(4, 50)), ("positive", rint(1, 9, 30, dtype=f32)),
                ("negative", rint(-9, -1, 30, dtype=f32)), ("zeros", const(np.zeros(7), f32)),
                ("ties", TIES)):
    add(name, C("DynamicQuantizeLinear", ins(x), n_out=3))


# Where onnxruntime's u8 x s8 products saturate (onnxruntime_u8s8_saturates), a u8 x s8 case is
# checked against the exact sum (the ONNX reference) instead.
WEIGHTS_INPUT = {"QLinearConv": 3, "QLinearMatMul": 3, "ConvInteger": 1, "MatMulInteger": 1}


def _u8_times_s8(case: Case) -> bool:
    if case.op not in WEIGHTS_INPUT:
        return False
    inputs = case.inputs(np.random.default_rng(0))
    return inputs[0].dtype == u8 and inputs[WEIGHTS_INPUT[case.op]].dtype == i8


@pytest.mark.parametrize("case", [pytest.param(c, id=i) for i, c in CASES])
def test_bit_equal_to_onnxruntime(case: Case) -> None:
    if case.ref == ORT and _u8_times_s8(case) and onnxruntime_u8s8_saturates():
        case = dataclasses.replace(case, ref=REF)
    run_case(case)


def test_the_float32_bound_is_where_chunking_starts() -> None:
    """Chunks of at most 2**24 / bound products: at 2**24 + 1, one float32 sum would round (it
    does: 2**24 + 1 is not a float32), and the chunked product still gives the exact integer."""
    n = 2 * (EXACT_FLOAT32 // (255 * 255)) + 7  # more than two chunks of 258
    a = np.full((1, n), 255, f32)
    b = np.full((n, 1), 255, f32)
    exact = _exact_matmul(a, b, 255 * 255)
    assert exact.dtype == np.int32 and int(exact[0, 0]) == n * 255 * 255
    assert int((a @ b)[0, 0]) != n * 255 * 255 or n * 255 * 255 <= EXACT_FLOAT32


def test_weights_fed_at_run_time_are_not_kept_from_one_run_to_the_next() -> None:
    """What depends on constants is prepared once; weights and scales that are graph inputs are
    read afresh every run (a model run twice with other weights gives onnxruntime's answer twice)."""
    from onnx import TensorProto

    import byoc
    from byoc.compare import onnxruntime_session

    vi = helper.make_tensor_value_info
    conv = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                            pads=[1, 1, 1, 1])
    inits = [helper.make_tensor("xz", TensorProto.UINT8, [], [128]),
             helper.make_tensor("wz", TensorProto.INT8, [], [0]),
             helper.make_tensor("ys", TensorProto.FLOAT, [], [0.05]),
             helper.make_tensor("yz", TensorProto.UINT8, [], [128])]
    graph = helper.make_graph([conv], "g", [vi("x", TensorProto.UINT8, [1, 4, 6, 6]),
                                            vi("xs", TensorProto.FLOAT, []),
                                            vi("w", TensorProto.INT8, [5, 4, 3, 3]),
                                            vi("ws", TensorProto.FLOAT, [])],
                              [vi("y", TensorProto.UINT8, [1, 5, 6, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model)
    exe = byoc.build(byoc.load_onnx(model))
    session = onnxruntime_session(model)
    if onnxruntime_u8s8_saturates():  # u8 x s8: the exact sum where onnxruntime's saturates
        from onnx.reference import ReferenceEvaluator

        session = ReferenceEvaluator(model)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (1, 4, 6, 6)).astype(u8)
    for seed in (1, 2):
        feeds = {"x": x, "xs": np.array(0.01 * seed, f32),
                 "w": np.random.default_rng(seed).integers(-127, 128, (5, 4, 3, 3)).astype(i8),
                 "ws": np.array(0.02 / seed, f32)}
        np.testing.assert_array_equal(exe.run(feeds)["y"], session.run(None, feeds)[0])
