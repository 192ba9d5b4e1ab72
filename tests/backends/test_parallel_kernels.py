"""native and ccompiler kernels on the thread pool: the same bits at any thread count, the
pool made once, small kernels left on one thread."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import byoc
from byoc.backends.ccompiler import pool
from byoc.compare import compare_outputs, run_onnxruntime
from tests.conftest import make_model

FLOAT = TensorProto.FLOAT


def _w(name, shape, rng, scale=0.2):
    return helper.make_tensor(name, FLOAT, shape,
                              (rng.standard_normal(shape) * scale).astype(np.float32).ravel())


def _cnn(rng):
    """Convs (3x3 GEMM, depthwise, pointwise, strided), pools, a fused chain, Concat,
    Transpose, a reduction, LayerNorm, LRN: odd sizes, so that cuts fall mid-panel."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv3x3"),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("Conv", ["r1", "wd"], ["d1"], pads=[1, 1, 1, 1], group=24, name="depthwise"),
        n("Sigmoid", ["d1"], ["s1"], name="sig"),
        n("Mul", ["d1", "s1"], ["silu"], name="silu"),
        n("Conv", ["silu", "wp", "bp"], ["p1"], name="pointwise"),
        n("MaxPool", ["p1"], ["m1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          name="maxpool"),
        n("Conv", ["r1", "ws2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1], name="strided"),
        n("Concat", ["m1", "c2"], ["cat"], axis=1, name="concat"),
        n("AveragePool", ["cat"], ["a1"], kernel_shape=[2, 2], strides=[1, 1], name="avgpool"),
        n("LRN", ["a1"], ["lrn"], size=3, name="lrn"),
        n("Transpose", ["lrn"], ["t1"], perm=[0, 2, 3, 1], name="transpose"),
        n("LayerNormalization", ["t1", "g", "beta"], ["ln"], axis=-1, name="layernorm"),
        n("ReduceMean", ["ln", "ax"], ["rm"], keepdims=0, name="reduce"),
        n("GlobalAveragePool", ["cat"], ["gap"], name="gap"),
    ]
    inits = [_w("w1", [24, 13, 3, 3], rng), _w("b1", [24], rng), _w("wd", [24, 1, 3, 3], rng),
             _w("wp", [20, 24, 1, 1], rng), _w("bp", [20], rng), _w("ws2", [11, 24, 3, 3], rng),
             _w("g", [31], rng, 1.0), _w("beta", [31], rng),
             helper.make_tensor("ax", TensorProto.INT64, [1], [2])]
    model = make_model(nodes, [("x", FLOAT, [2, 13, 37, 41])],
                       [("rm", FLOAT, None), ("gap", FLOAT, None)], inits)
    return model, {"x": rng.standard_normal((2, 13, 37, 41)).astype(np.float32)}


def _attention(rng):
    """Batched MatMuls (each product small: the batch is cut), a Softmax, a GEMM with a
    bias, one row against a wide matrix (the dot path), Erf, a Gather of rows."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["q", "k"], ["s"], name="scores"),
        n("Softmax", ["s"], ["p"], axis=-1, name="softmax"),
        n("MatMul", ["p", "v"], ["o"], name="context"),
        n("Reshape", ["o", "shape"], ["flat"], name="flatten"),
        n("Gemm", ["flat", "wg", "bg"], ["g"], transB=1, name="gemm"),
        n("Erf", ["g"], ["e"], name="erf"),
        n("MatMul", ["row", "wide"], ["dots"], name="row_dots"),
        n("Gather", ["wide", "idx"], ["rows"], axis=0, name="gather"),
    ]
    inits = [helper.make_tensor("shape", TensorProto.INT64, [2], [24, 37]),
             _w("wg", [203, 37], rng, 0.05), _w("bg", [203], rng),
             _w("wide", [600, 1500], rng, 0.05)]
    model = make_model(nodes, [("q", FLOAT, [3, 8, 37]), ("k", FLOAT, [3, 37, 45]),
                               ("v", FLOAT, [3, 45, 37]), ("row", FLOAT, [1, 600]),
                               ("idx", TensorProto.INT64, [64])],
                       [("e", FLOAT, None), ("dots", FLOAT, None), ("rows", FLOAT, None)],
                       inits)
    shapes = {"q": (3, 8, 37), "k": (3, 37, 45), "v": (3, 45, 37), "row": (1, 600)}
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return model, {**feeds, "idx": rng.integers(-600, 600, 64)}


def _late_layers(rng):
    """What a CNN's last stages and a grouped net cut differently: many output channels on a
    7x7 map (a row cut, B packed once and shared), a strided 3x3 conv of the same kind,
    grouped 1x1 and 3x3 convs over two images (one (image, group) pair per task), Winograd on
    a map of one tile block (its steps cut), a MatMul of many rows and few columns, an SE
    block's 1x1 convs on 1x1 maps (the batch's product at once) with a Sigmoid epilogue."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], name="wide_pointwise"),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("Conv", ["r1", "w2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1], name="strided"),
        n("Conv", ["r1", "wg1", "bg1"], ["g1"], group=4, name="grouped_pointwise"),
        n("Conv", ["g1", "wg3"], ["g3"], group=2, pads=[1, 1, 1, 1], name="grouped_3x3"),
        n("Conv", ["g3", "ww", "bw"], ["wg"], pads=[1, 1, 1, 1], name="winograd"),
        n("Add", ["wg", "g3"], ["res"], name="residual"),
        n("MatMul", ["tall", "narrow"], ["mm"], name="tall_matmul"),
        n("Conv", ["se", "wse1", "bse1"], ["s1"], name="se_reduce"),
        n("Relu", ["s1"], ["s2"], name="se_relu"),
        n("Conv", ["s2", "wse2", "bse2"], ["s3"], name="se_expand"),
        n("Sigmoid", ["s3"], ["gate"], name="se_gate"),
    ]
    inits = [_w("w1", [200, 64, 1, 1], rng), _w("b1", [200], rng),
             _w("w2", [130, 200, 3, 3], rng, 0.05),
             _w("wg1", [96, 50, 1, 1], rng), _w("bg1", [96], rng),
             _w("wg3", [64, 48, 3, 3], rng, 0.1),
             _w("ww", [64, 64, 3, 3], rng, 0.1), _w("bw", [64], rng),
             _w("tall", [300, 256], rng, 0.1), _w("wse1", [24, 96, 1, 1], rng),
             _w("bse1", [24], rng), _w("wse2", [96, 24, 1, 1], rng), _w("bse2", [96], rng)]
    model = make_model(nodes, [("x", FLOAT, [2, 64, 7, 7]), ("narrow", FLOAT, [256, 20]),
                               ("se", FLOAT, [3, 96, 1, 1])],
                       [("c2", FLOAT, None), ("res", FLOAT, None), ("mm", FLOAT, None),
                        ("gate", FLOAT, None)], inits)
    return model, {"x": rng.standard_normal((2, 64, 7, 7)).astype(np.float32),
                   "narrow": rng.standard_normal((256, 20)).astype(np.float32),
                   "se": rng.standard_normal((3, 96, 1, 1)).astype(np.float32)}


@pytest.mark.parametrize("backend", ["native", "ccompiler"])
@pytest.mark.parametrize("make", [_cnn, _attention, _late_layers],
                         ids=["cnn", "attention", "late_layers"])
def test_every_thread_count_gives_the_same_bits_and_onnxruntime_s_numbers(backend, make):
    model, inputs = make(np.random.default_rng(0))
    part = byoc.partition(byoc.load_onnx(model), backends=[backend])
    runs = {t: byoc.build(part, threads=t).run(inputs) for t in (1, 2, 3, 4)}
    assert pool.workers() >= 3  # the pool did take the work
    for t in (2, 3, 4):
        for name, want in runs[1].items():
            assert np.array_equal(runs[t][name], want), (t, name)
    bad = [c for c in compare_outputs(runs[1], run_onnxruntime(model, inputs)) if not c.ok]
    assert not bad, bad


def test_the_pool_lives_across_calls():
    model, inputs = _cnn(np.random.default_rng(1))
    exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["native"]), threads=2)
    exe.run(inputs)
    made = pool.workers()
    for _ in range(3):
        exe.run(inputs)
    assert pool.workers() == made >= 1


def test_big_loops_go_to_the_pool_small_ones_stay_inline():
    from byoc.backends.ccompiler import emit_c

    def c_of(shape):
        model = make_model([helper.make_node("Sigmoid", ["x"], ["y"], name="s")],
                           [("x", FLOAT, shape)], [("y", FLOAT, shape)])
        part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
        return emit_c(next(f for n, f in part.functions.items() if n != "main"))

    assert "byoc_parallel(256, byoc_op0_t0" in c_of([64, 1024])  # blocks of 4096 / 16
    assert "byoc_op0_t0" not in c_of([4, 16])


@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [0, 0, 0, 0], [0, 1, 2, 0]])
def test_winograd_3x3_convs_match_onnxruntime_at_any_thread_count(pads):
    """Stride-1 3x3 convs with 32 channels or more go through Winograd F(2x2, 3x3): odd
    sizes (partial tiles), asymmetric padding, a bias and a residual Add + Relu epilogue.
    (Maps past 10x10: smaller ones of 40 output channels read their taps in place.)"""
    rng = np.random.default_rng(2)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], pads=pads, name="conv"),
             n("Conv", ["x", "w2"], ["r"], pads=pads, name="shortcut"),
             n("Add", ["c", "r"], ["s"], name="add"), n("Relu", ["s"], ["y"], name="relu")]
    model = make_model(nodes, [("x", FLOAT, [2, 32, 13, 15])], [("y", FLOAT, None)],
                       [_w("w", [40, 32, 3, 3], rng), _w("b", [40], rng),
                        _w("w2", [40, 32, 3, 3], rng)])
    inputs = {"x": rng.standard_normal((2, 32, 13, 15)).astype(np.float32)}
    part = byoc.partition(byoc.load_onnx(model), backends=["native"])
    runs = [byoc.build(part, threads=t).run(inputs)["y"] for t in (1, 2, 3)]
    exe = byoc.build(part, threads=1)
    exe.run(inputs)
    (built,) = exe.external.values()
    # its declaration and both convs' calls
    assert built.specializations[0].source.count("byoc_conv3x3_winograd(") == 3
    assert all(np.array_equal(r, runs[0]) for r in runs[1:])
    want = run_onnxruntime(model, inputs)["y"]
    assert np.abs(runs[0] - want).max() <= 1e-5 * np.abs(want).max()
