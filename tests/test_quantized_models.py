"""QDQ- and QOperator-quantized models (made by onnxruntime's own quantizer from the tiny
ResNet) through every backend, compared with onnxruntime.

byoc runs a QDQ model as written: DequantizeLinear, the float op, QuantizeLinear. onnxruntime
does too with basic optimizations, and then byoc equals it exactly. Its default (extended)
optimizations fuse each DQ -> op -> Q into an integer kernel (QLinearConv, ...) that rounds
differently, so the outputs may differ by one quantization step of the final dequantized output:
that is the tolerance against default onnxruntime (docs/decisions.md, "Quantized models").
"""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest

import byoc
from byoc.cli import default_model_path
from byoc.compare import onnxruntime_session

quantization = pytest.importorskip("onnxruntime.quantization")
# openvino is an optional extra (in the test extra too): skipped, saying why, where it is absent.
BACKENDS = [None, "reference", "onnxruntime", "native", "ccompiler",
            pytest.param("openvino", marks=pytest.mark.skipif(
                importlib.util.find_spec("openvino") is None,
                reason="openvino is not installed (pip install -e '.[openvino]')"))]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory) -> dict:
    src = default_model_path()
    model = onnx.load(src)
    inp = model.graph.input[0]
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    samples = [np.random.default_rng(i).standard_normal(shape).astype(np.float32)
               for i in range(4)]

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.left = iter([{inp.name: x} for x in samples])

        def get_next(self):
            return next(self.left, None)

    folder = tmp_path_factory.mktemp("quantized")
    paths = {}
    for fmt in ("QDQ", "QOperator"):
        paths[fmt] = str(folder / f"{fmt}.onnx")
        quantization.quantize_static(src, paths[fmt], Reader(),
                                     quant_format=getattr(quantization.QuantFormat, fmt))
    paths["dynamic"] = str(folder / "dynamic.onnx")
    quantization.quantize_dynamic(src, paths["dynamic"])
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    return {"paths": paths, "input": {inp.name: x}}


def _output_step(path: str) -> float:
    """The scale of the DequantizeLinear the model's output comes through (one step)."""
    model = onnx.load(path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    node = producer[model.graph.output[0].name]
    while node.op_type != "DequantizeLinear":  # through Softmax, Flatten, ... to the last DQ
        node = producer[node.input[0]]
    return float(np.max(inits[node.input[1]]))


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator", "dynamic"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_quantized_models_match_onnxruntime(quantized, fmt: str, backend: str | None) -> None:
    path, inputs = quantized["paths"][fmt], quantized["input"]
    mod = byoc.load_onnx(path)
    if backend:
        mod = byoc.partition(mod, backends=[backend])
    (got,) = byoc.build(mod).run(inputs).values()
    as_written = onnxruntime_session(path, optimize=False).run(None, inputs)[0]
    default = onnxruntime_session(path).run(None, inputs)[0]
    scale = float(np.max(np.abs(as_written)))
    if backend == "openvino" and fmt == "QDQ":
        # OpenVINO's low-precision transformations run DQ -> op -> Q as integer kernels where
        # the CPU has fast int8 paths (seen on an AVX2 Zen 3, not on an AVX-512 Zen 5): within
        # one step of the output, as onnxruntime's own fused kernels below
        step = _output_step(path)
        assert np.max(np.abs(got - as_written)) <= step * 1.001, np.max(np.abs(got - as_written))
    else:
        np.testing.assert_allclose(got, as_written, rtol=0, atol=1e-5 * scale)
    if fmt == "QDQ":  # onnxruntime's fused integer kernels: within one step of the output
        step = _output_step(path)
        assert np.max(np.abs(got - default)) <= step * 1.001, (np.max(np.abs(got - default)), step)
    else:
        np.testing.assert_allclose(got, default, rtol=0, atol=1e-4 * scale)


def test_the_cli_says_which_onnxruntime_a_qdq_model_matches(quantized, tmp_path) -> None:
    from tests.bad_inputs.test_bad_models import run_cli

    np.save(tmp_path / "x.npy", next(iter(quantized["input"].values())))
    name = next(iter(quantized["input"]))
    result = run_cli("run", quantized["paths"]["QDQ"], "--input", f"{name}=x.npy",
                     "--compare", "onnxruntime", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "matches onnxruntime run as written (no graph optimizations); its default fused " \
           "QDQ kernels differ by up to" in result.stdout, result.stdout
    plain = run_cli("run", quantized["paths"]["QOperator"], "--compare", "onnxruntime",
                    cwd=tmp_path)
    assert plain.returncode == 0 and "\nmatches onnxruntime\n" in plain.stdout, plain.stdout


@pytest.mark.parametrize("fmt", ["QOperator", "dynamic"])
def test_every_integer_tensor_equals_onnxruntime_s(quantized, fmt: str) -> None:
    """Every integer tensor of the model (each QLinearConv, ConvInteger, MatMulInteger,
    QuantizeLinear, DynamicQuantizeLinear result) bit-equal to onnxruntime run as written."""
    path, inputs = quantized["paths"][fmt], quantized["input"]
    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    integer = {onnx.TensorProto.UINT8, onnx.TensorProto.INT8, onnx.TensorProto.INT32}
    values = [v for v in model.graph.value_info if v.type.tensor_type.elem_type in integer]
    assert len(values) >= 9, [v.name for v in values]
    model.graph.output.extend(values)
    theirs = onnxruntime_session(model, optimize=False).run([v.name for v in values], inputs)
    ours = byoc.build(byoc.load_onnx(path)).run(inputs, capture="all").tensors
    for v, want in zip(values, theirs):
        assert ours[v.name].dtype == want.dtype, v.name
        np.testing.assert_array_equal(ours[v.name], want, err_msg=v.name)


def test_the_cli_names_onnxruntime_s_saturating_integer_products(tmp_path) -> None:
    """A full-range u8 x s8 QLinearConv: where onnxruntime's products saturate (x86 without
    VNNI) `byoc run --compare` says it does not match and why, while byoc's output is the
    exact sums' (the ONNX reference's, but for its rounding); elsewhere it matches onnxruntime."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from byoc.compare import onnxruntime_u8s8_saturates
    from tests.bad_inputs.test_bad_models import run_cli

    rng = np.random.default_rng(0)
    t = onnx.numpy_helper.from_array
    inits = [t(np.array(0.02, np.float32), "xs"), t(np.array(120, np.uint8), "xz"),
             t(rng.integers(-128, 128, (16, 8, 3, 3)).astype(np.int8), "w"),
             t(np.array(0.005, np.float32), "ws"), t(np.array(0, np.int8), "wz"),
             t(np.array(0.03, np.float32), "ys"), t(np.array(5, np.uint8), "yz")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                            pads=[1, 1, 1, 1])
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [vi("x", TensorProto.UINT8, [1, 8, 10, 10])],
                              [vi("y", TensorProto.UINT8, [1, 16, 10, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.save(model, tmp_path / "q.onnx")
    x = rng.integers(0, 256, (1, 8, 10, 10)).astype(np.uint8)
    np.save(tmp_path / "x.npy", x)
    (ours,) = byoc.build(byoc.load_onnx(model)).run({"x": x}).values()
    # the exact sums, requantized as onnxruntime does (float32): within one step of the
    # reference's rounding
    exact = ReferenceEvaluator(model).run(None, {"x": x})[0].astype(int)
    assert np.abs(ours.astype(int) - exact).max() <= 1
    result = run_cli("run", tmp_path / "q.onnx", "--input", "x=x.npy", "--compare",
                     "onnxruntime", cwd=tmp_path)
    if onnxruntime_u8s8_saturates():
        (theirs,) = onnxruntime_session(model).run(None, {"x": x})
        assert np.abs(theirs.astype(int) - exact).max() > 1  # saturated, not a rounding
        assert result.returncode == 1, result.stderr
        assert "does NOT match onnxruntime, whose u8 x s8 integer kernels saturate" in \
            result.stdout, result.stdout
    else:
        assert result.returncode == 0 and "\nmatches onnxruntime\n" in result.stdout, \
            result.stdout
