"""native's conv and pool kernels against onnxruntime, shape by shape: pointwise (as a GEMM,
thin ones included), depthwise (any stride, dilation, multiplier, pads), 3x3 (direct,
Winograd), taps read in place (few input channels; small maps' flattened rows; output
channels across the vector's lanes, broadcasting each tap's input), strided and
large kernels, grouped convs, MaxPool (stride 2 down the rows, then along them) and
AveragePool; odd sizes, rows narrower than a vector, batch > 1 and a dynamic batch; each with
the epilogue a model fuses (bias, Relu, a residual Add). The same bits at 1 and 3 threads;
within 1e-5 of the output's largest magnitude of onnxruntime (pools: equal)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import byoc
from byoc.compare import run_onnxruntime
from tests.conftest import make_model

FLOAT = TensorProto.FLOAT

# (x shape, w shape, attributes), each run as Conv -> (+ residual) -> Relu
CONVS = {
    "pointwise": ((2, 24, 7, 9), (20, 24, 1, 1), {}),
    # one pixel (SE blocks): the batch as one product, W^T packed ahead; 4 images against
    # 1100 channels: W^T's shared blocks of 1024 columns, cut among the threads
    "pointwise_se": ((2, 40, 1, 1), (10, 40, 1, 1), {}),
    "pointwise_se_wide": ((4, 256, 1, 1), (1100, 256, 1, 1), {}),
    "pointwise_wide": ((1, 64, 3, 5), (33, 64, 1, 1), {}),
    # maps of 36, 49 and 20: the columns past whole vectors down A's columns, over three K
    # blocks, on several threads for 49; 13 and 20 channels: the last rows of A against
    # several column panels at once
    "pointwise_deep_6x6": ((1, 600, 6, 6), (13, 600, 1, 1), {}),
    "pointwise_deep_7x7": ((2, 300, 7, 7), (20, 300, 1, 1), {}),
    "pointwise_7x7_threads": ((1, 520, 7, 7), (300, 520, 1, 1), {}),
    "pointwise_4x5": ((1, 64, 4, 5), (48, 64, 1, 1), {}),
    # convs onto small maps: stride 2 onto 7x7 (two images, two K blocks); onto 6x6 with an
    # end pad, three K blocks, on several threads; dilated
    "conv_3x3_s2_onto_7x7": ((2, 40, 14, 14), (48, 40, 3, 3), {"strides": [2, 2],
                                                        "pads": [1, 1, 1, 1]}),
    "conv_3x3_s2_threads": ((1, 64, 13, 13), (96, 64, 3, 3), {"strides": [2, 2],
                                                          "pads": [1, 1, 0, 0]}),
    "conv_3x3_s2_dilated": ((1, 24, 17, 17), (40, 24, 3, 3), {"strides": [2, 2],
                                                          "dilations": [2, 2]}),
    # 7 panels of 25 positions: no count of blocks makes them divide among 3 threads' 6
    # tasks, which take runs of 1 or 2 units
    "conv_3x3_s2_uneven_cut": ((1, 64, 9, 9), (112, 64, 3, 3), {"strides": [2, 2],
                                                            "pads": [1, 1, 1, 1]}),
    # a map of 100: the 4 columns past whole vectors down A's columns (three K blocks, B's
    # whole panels in place, the last packed), the last row of A against all panels at once
    "pointwise_deep_10x10": ((1, 600, 10, 10), (13, 600, 1, 1), {}),
    # few output channels: B's whole panels read in place (rows 135 floats apart), the last
    # packed; at a stride of whole cache lines (128 floats) all packed; 22 channels: the last
    # 4 rows against in-place and packed panels
    "pointwise_in_place": ((1, 40, 9, 15), (24, 40, 1, 1), {}),
    "pointwise_in_place_rows": ((1, 40, 9, 15), (22, 40, 1, 1), {}),
    "pointwise_line_stride": ((1, 40, 8, 16), (24, 40, 1, 1), {}),
    "pointwise_strided": ((1, 16, 9, 11), (24, 16, 1, 1), {"strides": [2, 2]}),
    # strided 1x1: the positions read gathered first (rows of two vectors and a scalar tail);
    # with an end pad a window reaches, the padded im2col instead
    "pointwise_strided_wide": ((1, 8, 6, 37), (12, 8, 1, 1), {"strides": [2, 2]}),
    "pointwise_strided_end_pad": ((1, 8, 6, 6), (12, 8, 1, 1), {"strides": [2, 2],
                                                                "pads": [0, 0, 1, 1]}),
    "pointwise_grouped": ((1, 16, 5, 6), (12, 4, 1, 1), {"group": 4}),
    # 6 groups of 301K multiply-adds in all: a group a task on 3 threads
    "pointwise_grouped_threads": ((1, 96, 14, 14), (96, 16, 1, 1), {"group": 6}),
    "depthwise_3x3": ((2, 12, 13, 17), (12, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 12}),
    "depthwise_3x3_s2": ((1, 8, 15, 20), (8, 1, 3, 3),
                         {"pads": [1, 1, 1, 1], "strides": [2, 2], "group": 8}),
    "depthwise_5x5_s2_odd": ((1, 6, 11, 13), (6, 1, 5, 5),
                             {"pads": [2, 1, 2, 2], "strides": [2, 2], "group": 6}),
    "depthwise_narrow": ((2, 5, 4, 3), (5, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 5}),
    "depthwise_wide_rows": ((1, 4, 2, 37), (4, 1, 5, 5), {"pads": [2, 2, 2, 2], "group": 4}),
    "depthwise_multiplier": ((1, 4, 9, 10), (8, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 4}),
    "depthwise_dilated": ((1, 6, 12, 19), (6, 1, 3, 3),
                          {"pads": [2, 0, 2, 1], "strides": [1, 2], "dilations": [2, 3],
                           "group": 6}),
    # rows of whole vectors, and one float past them (a masked store of one lane)
    "depthwise_5x5_whole_vectors": ((1, 4, 5, 32), (4, 1, 5, 5), {"pads": [2, 2, 2, 2],
                                                                  "group": 4}),
    "depthwise_5x5_one_past": ((1, 4, 3, 33), (4, 1, 5, 5), {"pads": [2, 2, 2, 2], "group": 4}),
    # taps 18 floats along the row: read as whole vectors further on, then shifted
    "depthwise_far_taps": ((1, 3, 6, 40), (3, 1, 3, 3), {"pads": [9, 9, 9, 9],
                                                         "dilations": [9, 9], "group": 3}),
    "depthwise_1d": ((2, 6, 23), (6, 1, 5), {"pads": [2, 2], "strides": [2], "group": 6}),
    "conv_3x3": ((1, 13, 11, 10), (17, 13, 3, 3), {"pads": [1, 1, 1, 1]}),
    "conv_3x3_winograd": ((2, 32, 9, 13), (40, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    "conv_3x3_winograd_wide": ((1, 40, 7, 37), (48, 40, 3, 3), {"pads": [1, 1, 1, 1]}),
    "conv_3x3_winograd_valid": ((1, 32, 21, 22), (33, 32, 3, 3), {}),
    "conv_3x3_winograd_16ch": ((1, 16, 15, 14), (20, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    # a block's 16 planes of transformed inputs (and outputs) 4 KB apart: spaced further
    "conv_3x3_winograd_4k_planes": ((1, 32, 32, 32), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
    "conv_3x3_s2": ((1, 16, 17, 14), (24, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    # the last input column and row reach no window: the padded copy stops short of them
    "conv_3x3_s2_cropped": ((1, 8, 14, 14), (12, 8, 3, 3), {"strides": [2, 2]}),
    "conv_stem_7x7_s2": ((1, 3, 37, 41), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "conv_5x5": ((1, 8, 12, 11), (12, 8, 5, 5), {"pads": [2, 2, 2, 2]}),
    # read in place (few channels, rows of 48 outputs or more; a masked partial vector last)
    "direct_stem_7x7_s2": ((1, 3, 20, 221), (10, 3, 7, 7), {"pads": [3, 3, 3, 3],
                                                            "strides": [2, 2]}),  # 111 wide
    "direct_3x3": ((2, 5, 7, 64), (13, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    "direct_dilated": ((1, 4, 9, 63), (7, 4, 3, 3), {"pads": [2, 1, 0, 2], "strides": [2, 1],
                                                     "dilations": [2, 1]}),
    "direct_1x1_s2": ((1, 8, 6, 127), (12, 8, 1, 1), {"strides": [1, 2]}),
    # a stride-2 stem's planes filled in vectors (each phase's even lanes), a scalar tail
    "direct_3x3_s2": ((1, 3, 9, 224), (8, 3, 3, 3), {"strides": [2, 2]}),
    "direct_3x3_s2_pads": ((2, 3, 8, 221), (9, 3, 3, 3), {"pads": [1, 1, 2, 2],
                                                          "strides": [2, 2]}),
    # all images' rows cut into tasks together (a task's rows run into the next image), each
    # block of rows filling its own planes: 6 small images, 4 of 20 rows (blocks of 8, 8, 4);
    # 3 rows, fewer than a block; a last panel of 2 and of 4 channels (the rows kernel)
    "direct_small_images": ((6, 3, 14, 192), (8, 3, 3, 3), {"pads": [1, 1, 1, 1],
                                                            "strides": [2, 2]}),
    "direct_image_batches": ((4, 3, 40, 192), (22, 3, 3, 3), {"pads": [1, 1, 1, 1],
                                                              "strides": [2, 2]}),
    "direct_short_map": ((2, 3, 5, 200), (12, 3, 3, 3), {"pads": [1, 1, 1, 1],
                                                         "strides": [2, 2]}),
    "conv_grouped": ((1, 8, 10, 9), (12, 4, 3, 3), {"pads": [0, 1, 1, 0], "group": 2}),
    "conv_dilated_s2": ((1, 5, 16, 15), (7, 5, 3, 3),
                        {"pads": [2, 2, 2, 2], "strides": [2, 1], "dilations": [2, 2]}),
    "conv_1x3": ((2, 12, 3, 20), (10, 12, 1, 3), {"pads": [0, 1, 0, 1]}),
    # a map past flat's: packed im2col panels at stride 1
    "conv_3x3_im2col_large_map": ((1, 4, 33, 34), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    # small maps read in place along their flattened padded rows (byoc_conv_flat): taps over
    # two and three KC blocks, Winograd's channels on a 7x9 map, asymmetric pads and a batch,
    # no pads, dilation, a single row
    "flat_3x3_7x7": ((1, 48, 7, 7), (20, 48, 3, 3), {"pads": [1, 1, 1, 1]}),
    "flat_winograd_channels": ((1, 64, 7, 9), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "flat_5x5_batch": ((2, 12, 9, 11), (10, 12, 5, 5), {"pads": [2, 1, 2, 3]}),
    "flat_valid": ((1, 20, 9, 9), (12, 20, 3, 3), {}),
    "flat_dilated": ((1, 8, 10, 12), (6, 8, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    "flat_1x3_row": ((2, 40, 1, 37), (30, 40, 1, 3), {"pads": [0, 1, 0, 1]}),
    # output channels across the vector's lanes (byoc_conv_lanes): more channel panels than
    # a task keeps at once, over three KC blocks; a last panel part empty on 7x7 with an end
    # pad (tiles of 6 and 5 positions) and two images; grouped; positions in two blocks;
    # dilated; 1-D; a 5x5 and a Winograd-sized 3x3 of 32 channels at stride 1
    "lanes_3x3_s2_panels": ((1, 64, 20, 22), (160, 64, 3, 3), {"strides": [2, 2],
                                                              "pads": [1, 1, 1, 1]}),
    "lanes_3x3_s2_last_panel": ((2, 24, 14, 14), (60, 24, 3, 3), {"strides": [2, 2],
                                                                 "pads": [1, 1, 0, 0]}),
    "lanes_grouped_s2": ((1, 32, 12, 13), (64, 16, 3, 3), {"strides": [2, 2],
                                                           "pads": [1, 1, 1, 1], "group": 2}),
    "lanes_two_blocks": ((1, 8, 41, 45), (16, 8, 3, 3), {"strides": [2, 2]}),
    "lanes_dilated_s2": ((1, 16, 19, 17), (32, 16, 3, 3), {"strides": [2, 2], "dilations": [2, 2],
                                                           "pads": [2, 1, 2, 2]}),
    "lanes_1d_s2": ((2, 32, 29), (48, 32, 3), {"strides": [2], "pads": [1, 1]}),
    "lanes_5x5": ((1, 16, 13, 13), (32, 16, 5, 5), {"pads": [2, 2, 2, 2]}),
    "lanes_3x3_32_channels": ((1, 64, 9, 9), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
}

POOLS = {
    "maxpool_3x3_s2": ("MaxPool", (2, 8, 17, 21), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                   "pads": [1, 1, 1, 1]}),
    "maxpool_ceil": ("MaxPool", (1, 5, 13, 13), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                 "ceil_mode": 1}),
    "maxpool_s1_narrow": ("MaxPool", (1, 9, 5, 7), {"kernel_shape": [3, 3],
                                                    "pads": [1, 1, 1, 1]}),
    "maxpool_dilated": ("MaxPool", (1, 4, 12, 14), {"kernel_shape": [2, 3], "strides": [1, 2],
                                                    "dilations": [2, 2]}),
    "maxpool_row_of_16": ("MaxPool", (1, 3, 6, 16), {"kernel_shape": [3, 3],
                                                     "pads": [1, 1, 1, 1]}),
    "maxpool_2x2": ("MaxPool", (1, 6, 10, 19), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    # stride 2 down the rows then along them: rows of several vectors and a masked tail, rows
    # of whole vectors, windows past the top and bottom (fewer rows than the kernel's)
    "maxpool_s2_wide_rows": ("MaxPool", (1, 3, 9, 70), {"kernel_shape": [3, 3],
                                                        "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "maxpool_s2_whole_vectors": ("MaxPool", (1, 2, 7, 32), {"kernel_shape": [3, 3],
                                                            "strides": [2, 2],
                                                            "pads": [0, 1, 2, 0]}),
    "avgpool_3x3": ("AveragePool", (1, 8, 14, 14), {"kernel_shape": [3, 3],
                                                    "pads": [1, 1, 1, 1]}),
    "avgpool_with_pad": ("AveragePool", (2, 4, 11, 10),
                         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                          "count_include_pad": 1}),
    "avgpool_ceil": ("AveragePool", (1, 4, 11, 16), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                     "pads": [0, 1, 1, 0], "ceil_mode": 1}),
    "avgpool_2x2_s2": ("AveragePool", (1, 6, 12, 9), {"kernel_shape": [2, 2],
                                                      "strides": [2, 2]}),
}


def _model(rng: np.random.Generator, batch: int | str | None = None):
    """Every conv and pool above as a branch of one model (one region, one compile)."""
    n = helper.make_node
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}

    def x_input(name, shape):
        shape = tuple(shape)
        inputs.append((name, FLOAT, [batch if batch is not None else shape[0], *shape[1:]]))
        feeds[name] = rng.standard_normal(shape).astype(np.float32)

    for k, (name, (xs, ws, attrs)) in enumerate(CONVS.items()):
        x_input(f"x_{name}", xs)
        w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        inits += [helper.make_tensor(f"w_{name}", FLOAT, ws, w.ravel()),
                  helper.make_tensor(f"b_{name}", FLOAT, [ws[0]],
                                     rng.standard_normal(ws[0]).astype(np.float32))]
        nodes.append(n("Conv", [f"x_{name}", f"w_{name}", f"b_{name}"], [f"c_{name}"],
                       name=f"conv_{name}", **attrs))
        last = f"c_{name}"
        if k % 2:  # a residual: the conv's own output, scaled (an epilogue that reads memory)
            nodes.append(n("Mul", [last, "half"], [f"h_{name}"], name=f"half_{name}"))
            nodes.append(n("Add", [last, f"h_{name}"], [f"s_{name}"], name=f"add_{name}"))
            last = f"s_{name}"
        nodes.append(n("Relu", [last], [f"y_{name}"], name=f"relu_{name}"))
        outputs.append((f"y_{name}", FLOAT, None))
    for name, (op, xs, attrs) in POOLS.items():
        x_input(f"x_{name}", xs)
        nodes.append(n(op, [f"x_{name}"], [f"y_{name}"], name=name, **attrs))
        outputs.append((f"y_{name}", FLOAT, None))
    inits.append(helper.make_tensor("half", FLOAT, [], [0.5]))
    return make_model(nodes, inputs, outputs, inits), feeds


def _check(model, feeds, exes):
    runs = [exe.run(feeds) for exe in exes]
    for run in runs[1:]:
        for name, want in runs[0].items():
            assert np.array_equal(run[name], want), name  # any thread count, the same bits
    want = run_onnxruntime(model, feeds)
    for name, got in runs[0].items():
        ref = want[name]
        assert got.shape == ref.shape, name
        if name.removeprefix("y_") in POOLS:
            assert np.array_equal(got, ref), name
        else:
            scale = max(float(np.abs(ref).max()), 1e-30)
            assert float(np.abs(got - ref).max()) <= 1e-5 * scale, name


def test_convs_and_pools_match_onnxruntime_at_any_thread_count():
    model, feeds = _model(np.random.default_rng(0))
    part = byoc.partition(byoc.load_onnx(model), backends=["native"])
    assert len([f for f in part.functions if f != "main"]) == 1  # one region: all of it native
    _check(model, feeds, [byoc.build(part, threads=t) for t in (1, 3)])


def test_a_dynamic_batch_specializes_per_batch():
    rng = np.random.default_rng(1)
    model, _ = _model(rng, batch="N")
    exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["native"]), threads=2)
    for batch in (3, 1):
        feeds = {}
        for i in model.graph.input:
            dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = rng.standard_normal((batch, *dims[1:])).astype(np.float32)
        _check(model, feeds, [exe])


@pytest.mark.parametrize("fill", [np.inf, -np.inf])
def test_pools_carry_inf_as_onnxruntime_does(fill):
    """(NaN: onnxruntime's own MaxPool kernels disagree, one skipping it, another not.)"""
    rng = np.random.default_rng(2)
    model, feeds = _model(rng)
    for name in POOLS:
        x = feeds[f"x_{name}"]
        x.reshape(-1)[rng.integers(0, x.size, 7)] = fill
    exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["native"]), threads=1)
    got, want = exe.run(feeds), run_onnxruntime(model, feeds)
    for name in POOLS:
        assert np.array_equal(got[f"y_{name}"], want[f"y_{name}"], equal_nan=True), name


def test_few_channel_3x3_convs_take_winograd_only_on_maps_big_enough():
    from backends.ccompiler.emitter import Tensor
    from backends.ccompiler.ops.conv import winograd

    def takes(c, m, hw):
        x = Tensor("x", (1, c, hw, hw), "float32")
        w = Tensor("w", (m, c, 3, 3), "float32", np.zeros((m, c, 3, 3), np.float32))
        return winograd(x, w, [1, c, hw, hw, m, hw, hw, 3, 3, 1, 1, 1, 1, 1, 1], 1)

    assert takes(16, 20, 15) and takes(16, 64, 55) and takes(128, 32, 7)
    assert not takes(16, 64, 7) and not takes(8, 64, 56) and not takes(16, 12, 56)


def test_small_maps_of_few_output_channels_read_their_taps_in_place():
    from backends.ccompiler.emitter import Tensor
    from backends.ccompiler.ops.conv import flat

    def takes(c, m, h, w, k=3):
        x = Tensor("x", (1, c, h, w), "float32")
        wt = Tensor("w", (m, c, k, k), "float32", np.zeros((m, c, k, k), np.float32))
        p = k // 2
        return flat(x, wt, [1, c, h, w, m, h, w, k, k, 1, 1, p, p, 1, 1], 1)

    # densenet's growth convs on 7x7 (not on 14x14, where Winograd ties); ppocr's 8x10
    assert takes(128, 32, 7, 7) and takes(96, 24, 8, 10)
    assert not takes(128, 32, 14, 14) and not takes(512, 512, 7, 7) and not takes(8, 8, 40, 40)
    assert takes(16, 48, 13, 13, k=5) and not takes(32, 128, 13, 13, k=5)


def test_the_direct_cases_take_the_direct_kernel():
    from backends.ccompiler.emitter import Tensor
    from backends.ccompiler.ops.conv import direct

    def dims(name):
        (n, c, h, w), (m, _, k, _), _ = CONVS[name]
        o = lambda d: (d + 2 - k) // 2 + 1  # pads 1, stride 2
        return [n, c, h, w, m, o(h), o(w), k, k, 2, 2, 1, 1, 1, 1]

    for name in ("direct_small_images", "direct_image_batches", "direct_short_map"):
        ws = CONVS[name][1]
        wt = Tensor("w", ws, "float32", np.zeros(ws, np.float32))
        assert direct(wt, dims(name), 1), name  # the kernel the case is there for


def test_strided_convs_and_small_maps_take_output_channels_across_lanes():
    from backends.ccompiler.emitter import Tensor
    from backends.ccompiler.ops.conv import lanes

    def takes(c, m, h, k=3, s=1, group=1):
        x = Tensor("x", (1, c, h, h), "float32")
        wt = Tensor("w", (m, c // group, k, k), "float32",
                    np.zeros((m, c // group, k, k), np.float32))
        p, o = k // 2, (h - 1) // s + 1
        return lanes(x, wt, [1, c, h, h, m, o, o, k, k, s, s, p, p, 1, 1], group)

    # strided 3x3s, 5x5s on small maps, Winograd's few output channels on 7x7 and 14x14,
    # alexnet's grouped 5x5
    assert takes(128, 160, 28, s=2) and takes(512, 512, 14, s=2) and takes(32, 64, 13, k=5)
    assert takes(128, 32, 7) and takes(128, 32, 14) and takes(96, 256, 26, k=5, group=2)
    # a stem's 27 taps; a panel one third empty; Winograd's many channels or large maps
    assert not takes(3, 32, 224, s=2) and not takes(96, 24, 10)
    assert not takes(512, 512, 7) and not takes(128, 32, 28) and not takes(64, 64, 56)


def _without_avx(monkeypatch, tmp_path) -> None:
    """Builds from here on for plain x86-64 (SSE: NR 8), in a cache of their own."""
    import platform

    from byoc.codegen import build_cache

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("an x86-64 target")
    cc, version, flags = build_cache.toolchain()
    plain = tuple("-march=x86-64" if f == "-march=native" else f for f in flags)
    monkeypatch.setattr(build_cache, "_TOOLCHAIN", (cc, version, plain))
    monkeypatch.setattr(build_cache, "native_flags_have", lambda flag: False)
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path))


@pytest.mark.slow
def test_every_conv_and_pool_on_a_machine_without_avx(monkeypatch, tmp_path):
    """The kernels' generic vectors (SSE's 4 floats, panels of 8 channels or columns), where
    this machine's tests run AVX's or AVX-512's: the same cases, at 1 and 3 threads."""
    _without_avx(monkeypatch, tmp_path)
    model, feeds = _model(np.random.default_rng(0))
    _check(model, feeds, [byoc.build(byoc.partition(byoc.load_onnx(model), backends=["native"]),
                                     threads=t) for t in (1, 3)])


@pytest.mark.slow
def test_convs_on_a_machine_without_avx(monkeypatch, tmp_path):
    """An SE conv's W^T is packed in Python by the NR the C is compiled with: built for plain
    x86-64 (SSE's NR of 8) it still matches (pack_b had assumed 16 off AVX-512), and so do a
    strided conv and a pointwise one on a small map."""
    _without_avx(monkeypatch, tmp_path)
    rng = np.random.default_rng(4)
    n = helper.make_node
    shapes = {"s2": ((2, 40, 14, 14), (48, 40, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
              "pw": ((1, 64, 6, 6), (100, 64, 1, 1), {}),
              "se": ((4, 40, 1, 1), (1100, 40, 1, 1), {})}
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for name, (xs, ws, attrs) in shapes.items():
        inputs.append((f"x_{name}", FLOAT, list(xs)))
        feeds[f"x_{name}"] = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        inits.append(helper.make_tensor(f"w_{name}", FLOAT, ws, w.ravel()))
        nodes.append(n("Conv", [f"x_{name}", f"w_{name}"], [f"y_{name}"], **attrs))
        outputs.append((f"y_{name}", FLOAT, None))
    model = make_model(nodes, inputs, outputs, inits)
    exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["native"]), threads=2)
    got, want = exe.run(feeds), run_onnxruntime(model, feeds)
    for name, ref in want.items():
        scale = float(np.abs(ref).max())
        assert float(np.abs(got[name] - ref).max()) <= 1e-5 * scale, name
