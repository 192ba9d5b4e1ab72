"""The native backend: fused kernels against the unfused host reference, on random shapes."""

from __future__ import annotations

import re
import warnings

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
    code = re.sub(r"/\*.*?\*/", "", source, flags=re.S)  # the header lists every ONNX node
    assert "BatchNormalization" not in code and "(BatchNormalization)" in source


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
    mod = IRModule({"main": Function((x,), op.Relu(x))})
    (why,) = byoc.explain(byoc.partition(mod, backends=["native", "ccompiler"])).values()
    assert why.startswith("native: ") and "native: native" not in why  # named once
    assert "; ccompiler: " in why and "ccompiler: ccompiler" not in why


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_reduction_takes_its_elementwise_prologue(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    other = _bcast(data.draw, shape)
    axes = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    reduce = data.draw(st.sampled_from([op.ReduceSum, op.ReduceMean, op.ReduceMax, op.ReduceMin,
                                        op.ReduceSumSquare, op.ReduceL2]))
    keepdims = data.draw(st.sampled_from([0, 1]))
    rng = np.random.default_rng(4)
    x, y = op.var("x", shape), op.var("y", other)
    z = reduce(op.Mul(op.Sigmoid(op.Add(x, y)), op.Sub(x, op.const(np.float32(0.25)))),
               op.const(np.array(axes, np.int64)), keepdims=keepdims)
    source = _check(Function((x, y), z), {"x": rng.standard_normal(shape).astype(np.float32),
                                          "y": rng.standard_normal(other).astype(np.float32)},
                    tol=1e-4)
    assert source.count("static BYOC_NOINLINE void byoc_k") == 1 and "reduce:" in source


def test_a_long_sum_row_is_computed_in_chunks():
    rng = np.random.default_rng(5)
    x = op.var("x", (3, 1000))
    z = op.ReduceMean(op.Mul(x, x), op.const(np.array([1], np.int64)))
    source = _check(Function((x,), z), {"x": rng.standard_normal((3, 1000)).astype(np.float32)})
    assert "reduce:" in source and "byoc_sum(chunk" in source


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_batched_matmul_epilogue_is_applied_per_tile(data):
    b, m, k, n = (data.draw(st.integers(1, 9)) for _ in range(4))
    out = (b, m, n)
    residual = _bcast(data.draw, out)
    rng = np.random.default_rng(6)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x, r = op.var("x", (b, m, k)), op.var("r", residual)
    y = op.Add(op.MatMul(x, op.const(f32(k, n))), op.const(f32(n)))
    y = op.Relu(op.Add(op.Mul(y, r), op.const(np.float32(0.5))))
    source = _check(Function((x, r), y), {"x": f32(b, m, k), "r": f32(*residual)}, tol=1e-4)
    assert "epilogue:" in source
    # along a row of the GEMM the residual reads one value or consecutive ones: a tile epilogue
    if len(residual) < 1 or residual[-1] in (1, n) or n == 1:
        assert "byoc_k0_epi" in source


def test_conv_epilogue_runs_in_the_gemm_not_after_it():
    rng = np.random.default_rng(7)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x, r = op.var("x", (2, 3, 6, 6)), op.var("r", (2, 5, 6, 6))
    c = op.Conv(x, op.const(f32(5, 3, 3, 3)), op.const(f32(5)), pads=[1, 1, 1, 1])
    y = op.Relu(op.Add(op.Mul(c, op.const(f32(5, 1, 1))), r))
    source = _check(Function((x, r), y), {"x": f32(2, 3, 6, 6), "r": f32(2, 5, 6, 6)}, tol=1e-4)
    kernel = source[source.index("static BYOC_NOINLINE void byoc_k0"):]
    assert "byoc_k0_epi" in source and "&epi" in kernel and "for (" not in kernel


def test_shapes_computed_in_the_graph_become_constants():
    """Shape -> Gather -> Concat -> Reshape, Range and Expand over a symbolic dim: all native,
    one region, respecialized for each input shape."""
    x = op.var("x", ("n", 6))
    n = op.Gather(op.Shape(x), op.const(np.array(0, np.int64)))
    target = op.Concat(op.Unsqueeze(n, op.const(np.array([0], np.int64))),
                       op.const(np.array([3, 2], np.int64)), axis=0)
    y = op.Reshape(op.Sigmoid(x), target)
    pos = op.Cast(op.Range(op.const(np.array(0, np.int64)), n, op.const(np.array(1, np.int64))),
                  to=1)
    y = op.Add(y, op.Reshape(pos, op.const(np.array([-1, 1, 1], np.int64))))
    func = Function((x,), y)
    from byoc.backends.native import supports

    assert all(supports(c) is True for c in (y, target.args[0], n))
    mod = IRModule({"main": func.with_attrs(output_names=["out"])})
    part = byoc.partition(mod, backends=["native"])
    assert byoc.explain(part) == {}  # nothing left on the host
    exe, host = byoc.build(part), byoc.build(mod)
    rng = np.random.default_rng(8)
    for rows in (2, 5, 2):
        feeds = {"x": rng.standard_normal((rows, 6)).astype(np.float32)}
        got, ref = exe.run(feeds)["out"], host.run(feeds)["out"]
        assert got.shape == ref.shape == (rows, 3, 2)
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    region = next(exe.external[name] for name in part.functions if name != "main")
    assert len(region.specializations) == 2


def test_pads_computed_from_constants_through_a_transpose_are_taken():
    """An exported STFT's reflect Pad (silero VAD): its pads come from constants through
    ConstantOfShape, Concat, Reshape, Slice, Transpose and Cast, none folded at import; native
    takes the Pad and folds the pads when the region is specialized, for each input width."""
    x = op.var("x", ("n", "t"))
    zeros = op.ConstantOfShape(op.const(np.array([2], np.int64)), value=np.zeros(1, np.int64))
    pairs = op.Reshape(op.Concat(op.const(np.array([3, 2], np.int64)), zeros, axis=0),
                       op.const(np.array([2, 2], np.int64)))
    pads = op.Cast(op.Reshape(op.Transpose(op.Slice(pairs, op.const(np.array([-1], np.int64)),
                                                    op.const(np.array([-3], np.int64)),
                                                    op.const(np.array([0], np.int64)),
                                                    op.const(np.array([-1], np.int64))),
                                           perm=[1, 0]),
                              op.const(np.array([-1], np.int64))), to=7)
    y = op.Pad(op.Add(x, op.const(np.float32(1.0))), pads, mode="reflect")
    mod = IRModule({"main": Function((x,), y, {"output_names": ["out"]})})
    part = byoc.partition(mod, backends=["native"])
    assert byoc.explain(part) == {}  # nothing left on the host
    exe, host = byoc.build(part), byoc.build(mod)
    rng = np.random.default_rng(9)
    for shape in ((3, 16), (2, 40)):
        feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
        got, ref = exe.run(feeds)["out"], host.run(feeds)["out"]
        assert got.shape == ref.shape == (shape[0], shape[1] + 5)
        np.testing.assert_array_equal(got, ref)


def test_nan_and_inf_pass_through_fused_kernels():
    x = op.var("x", (8,))
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 100.0], np.float32)
    outs = [op.Mul(f(op.Add(x, op.const(np.float32(0.0)))), op.const(np.float32(1.0)))
            for f in (op.Relu, op.Sigmoid, op.Tanh, op.Exp, op.Sign, op.Abs)]
    outs.append(op.ReduceMax(op.Relu(x), op.const(np.array([0], np.int64))))
    for y in outs:
        mod = IRModule({"main": Function((x,), y, {"output_names": ["out"]})})
        got = byoc.build(byoc.partition(mod, backends=["native"])).run({"x": special})["out"]
        ref = byoc.build(mod).run({"x": special})["out"]
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)  # NaN where NaN, inf where inf


def test_a_shape_value_from_the_host_keys_the_specialization():
    """ReduceProd over int64 stays on the host: the Reshape's target reaches the region as an
    input, whose value then joins the signature."""
    x = op.var("x", ("n", 3))
    size = op.ReduceProd(op.Shape(x), keepdims=1)
    y = op.Reshape(op.Relu(x), op.Concat(size, op.const(np.array([1], np.int64)), axis=0))
    mod = IRModule({"main": Function((x,), y, {"output_names": ["out"]})})
    part = byoc.partition(mod, backends=["native"])
    assert len(byoc.explain(part)) == 1  # the ReduceProd
    exe, host = byoc.build(part), byoc.build(mod)
    rng = np.random.default_rng(9)
    for rows in (2, 4):
        feeds = {"x": rng.standard_normal((rows, 3)).astype(np.float32)}
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a region falling back to the host warns
            got = exe.run(feeds)["out"]
        ref = host.run(feeds)["out"]
        assert got.shape == ref.shape == (rows * 3, 1)
        np.testing.assert_allclose(got, ref)


@pytest.mark.parametrize("n, shared", [(1, False), (2, False), (1, True)])
def test_concat_inputs_are_written_in_place(n, shared):
    """A fire module: two convs concatenated on channels. With one image each conv writes its
    slice of the output; with two the slices are not contiguous, and an input read elsewhere
    must keep its own buffer: then the Concat copies."""
    rng = np.random.default_rng(10)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x = op.var("x", (n, 3, 5, 5))
    a = op.Relu(op.Conv(x, op.const(f32(4, 3, 1, 1)), op.const(f32(4))))
    b = op.Relu(op.Conv(x, op.const(f32(6, 3, 3, 3)), op.const(f32(6)), pads=[1, 1, 1, 1]))
    y = op.Sigmoid(op.Concat(a, b, axis=1))
    if shared:
        y = op.Add(y, op.ReduceSum(a, op.const(np.array([1], np.int64))))
    source = _check(Function((x,), y), {"x": f32(n, 3, 5, 5)}, tol=1e-4)
    assert ("its inputs were written in place" in source) == (n == 1 and not shared)


def test_a_concat_of_concats():
    rng = np.random.default_rng(11)
    x = op.var("x", (4, 3))
    inner = op.Concat(op.Relu(x), op.Neg(x), axis=0)
    y = op.Concat(inner, op.Sigmoid(x), axis=0)
    _check(Function((x,), y), {"x": rng.standard_normal((4, 3)).astype(np.float32)})


def test_a_depthwise_conv_with_its_activation_alone_in_a_region_compiles():
    """Its fused activation runs as a second loop (no GEMM to take a tile epilogue), and the
    region calls nothing of the library: the epilogue's declarations must come anyway."""
    rng = np.random.default_rng(0)
    x = op.var("x", (1, 8, 10, 10))
    w = op.const(rng.standard_normal((8, 1, 3, 3)).astype(np.float32))
    func = Function((x,), op.Relu(op.Conv(x, w, group=8, pads=[1, 1, 1, 1])))
    _check(func, {"x": rng.standard_normal((1, 8, 10, 10)).astype(np.float32)})


@pytest.mark.parametrize("backend", ["native", "ccompiler"])
@pytest.mark.parametrize("computed", [False, True], ids=["constant", "from_shape"])
def test_a_reshape_to_another_element_count_is_an_error_naming_the_node(backend, computed):
    """[3, 8, 37] (888 elements) into [24, 296] (7104) or [3, 7]: C would read past its
    input (NaN or garbage); the error names the node and both shapes."""
    from onnx import TensorProto, helper

    from byoc.errors import ByocError

    n = helper.make_node
    nodes = [n("Relu", ["x"], ["r"], name="relu")]
    inits = []
    if computed:  # the target from Shape(x), folded when native specializes the region
        nodes += [n("Shape", ["x"], ["sx"], name="shape"),
                  n("Slice", ["sx", "zero", "one"], ["batch"], name="batch"),
                  n("Concat", ["batch", "seven"], ["target"], axis=0, name="target")]
        inits += [helper.make_tensor(k, TensorProto.INT64, [1], [v])
                  for k, v in (("zero", 0), ("one", 1), ("seven", 7))]
    else:
        inits.append(helper.make_tensor("target", TensorProto.INT64, [2], [24, 296]))
    nodes += [n("Reshape", ["r", "target"], ["y"], name="bad_reshape"),
              n("Sigmoid", ["y"], ["z"], name="sig")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [3, 8, 37])],
                              [helper.make_tensor_value_info("z", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    part = byoc.partition(byoc.load_onnx(model), backends=[backend])
    if backend == "ccompiler" and computed:
        assert "bad_reshape" in byoc.explain(part)  # ccompiler leaves a computed target
        return                                       # to the host, which raises as numpy
    x = np.ones((3, 8, 37), np.float32)
    with pytest.raises(ByocError, match=r"node 'bad_reshape' \(Reshape\): cannot reshape "
                                        r"\[3, 8, 37\] \(888 elements\) into \[(24, 296|3, 7)\]"):
        byoc.build(part).run({"x": x})


def test_the_c_header_marks_a_batch_norm_folded_into_its_conv(tmp_path):
    """The stem's BatchNormalization is folded into its conv's weights: no code of its own
    ([folded]); the conv is computed (it held the BN's name alone before)."""
    from byoc.backends.ccompiler.sources import write_c_sources

    from byoc.cli import default_model_path

    part = byoc.partition(byoc.load_onnx(default_model_path()), backends=["native"])
    exe = byoc.build(part)
    exe.run({"image": np.ones((1, 3, 32, 32), np.float32)})
    (path,) = write_c_sources(part, tmp_path / "c", exe)
    text = path.read_text()
    assert "/*   stem/bn (BatchNormalization)  [folded] */" in text
    assert "/*   stem/conv (Conv) */" in text and "/*   stem/relu (Relu) */" in text
    assert "9 folded before code generation" in text  # the model's nine BatchNormalizations


def test_a_batch_norm_whose_statistics_a_graph_builds_is_folded_into_its_conv():
    """The zoo's light models build their weights with ConstantOfShape: folded into constants
    first, the BatchNormalization then folds into the conv (one kernel), as with initializers."""
    from onnx import TensorProto, helper

    from byoc.compare import run_onnxruntime
    from byoc.profile import profile

    n = helper.make_node
    nodes, inits = [], []
    for name, shape, value in (("w", [8, 3, 3, 3], 0.02), ("scale", [8], 1.5), ("bias", [8], -0.1),
                               ("mean", [8], 0.05), ("var", [8], 2.0)):
        inits.append(helper.make_tensor(f"{name}_shape", TensorProto.INT64, [len(shape)], shape))
        nodes.append(n("ConstantOfShape", [f"{name}_shape"], [name], name=f"make_{name}",
                       value=helper.make_tensor("v", TensorProto.FLOAT, [1], [value])))
    nodes += [n("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
              n("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"),
              n("Relu", ["b"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [1, 3, 9, 9])],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = {"x": np.random.default_rng(0).standard_normal((1, 3, 9, 9)).astype(np.float32)}
    exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["native"]))
    report = profile(exe, x, repeat=1)
    assert [(k["kernel"], k["nodes"]) for k in report["kernels"]] == [
        ("Conv+BatchNormalization+Relu", ["conv", "bn", "relu"])]
    np.testing.assert_allclose(exe.run(x)["y"], run_onnxruntime(model, x)["y"], rtol=1e-5,
                               atol=1e-6)


def test_a_view_in_its_input_s_buffer_copies_nothing():
    """A Dropout the memory plan gives its input's buffer (between two convs) is no memcpy
    of the buffer onto itself; its mask is still ones, and the values are the host's."""
    from onnx import TensorProto, helper

    from tests.conftest import make_model

    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8, 1, 1],
                           rng.standard_normal(64).astype(np.float32))
    n = helper.make_node
    model = make_model(
        [n("Conv", ["x", "w"], ["c1"], name="conv1"), n("Relu", ["c1"], ["r1"], name="relu1"),
         n("Dropout", ["r1"], ["d", "mask"], name="drop"),
         n("Conv", ["d", "w"], ["c2"], name="conv2"), n("Relu", ["c2"], ["y"], name="relu2")],
        [("x", TensorProto.FLOAT, [1, 8, 6, 6])], [("y", TensorProto.FLOAT, [1, 8, 6, 6])], [w])
    feeds = {"x": rng.standard_normal((1, 8, 6, 6)).astype(np.float32)}
    part = byoc.partition(byoc.load_onnx(model), backends=["native"])
    exe = byoc.build(part)
    np.testing.assert_allclose(exe.run(feeds)["y"], byoc.build(byoc.load_onnx(model)).run(feeds)["y"],
                               rtol=1e-5, atol=1e-5)
    (region,) = [exe.external[name] for name in part.functions if name != "main"]
    source = region.specializations[0].source
    drop = source[source.index("/* op: drop */"):]
    drop = drop[:drop.index("\n}\n")]
    assert "memcpy" not in drop
