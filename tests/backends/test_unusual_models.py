"""Valid models a backend could not run (issue 16): each now runs on the backend named, equal
to onnxruntime, or is declined at partition time with a reason."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.compare import compare_outputs, run_onnxruntime
from tests.conftest import FLOAT, make_model
from tests.fuzz.harness import CCOMPILER

needs_c = pytest.mark.skipif(not CCOMPILER, reason="no C compiler")


def _placed(model: onnx.ModelProto, backend: str) -> tuple[byoc.runtime.Executable, list]:
    part = byoc.partition(byoc.load_onnx(model), backends=[backend])
    regions = [f for name, f in part.functions.items() if name != "main"]
    return byoc.build(part), regions


def _assert_matches(model: onnx.ModelProto, feeds: dict, backend: str, rtol=None) -> dict:
    exe, regions = _placed(model, backend)
    assert regions, f"{backend} took nothing"
    got = exe.run(feeds)
    bad = [c for c in compare_outputs(got, run_onnxruntime(model, feeds), rtol) if not c.ok]
    assert not bad, bad
    return got


# -- native: a conv and its epilogue --------------------------------------------------------------

EPILOGUES = {
    "Relu": lambda c: ([helper.make_node("Relu", [c], ["y"])], []),
    "Sigmoid": lambda c: ([helper.make_node("Sigmoid", [c], ["y"])], []),
    "Clip": lambda c: ([helper.make_node("Clip", [c, "lo", "hi"], ["y"])],
                       [numpy_helper.from_array(np.float32(-0.5), "lo"),
                        numpy_helper.from_array(np.float32(0.75), "hi")]),
    "Add": lambda c: ([helper.make_node("Add", [c, "r"], ["s"]),
                       helper.make_node("Relu", ["s"], ["y"])], []),
}
# (input channels, output channels, group, kernel): one input channel (was `unknown type name
# 'byoc_epi'`: the conv took a path without the GEMM library), depthwise, grouped, pointwise
CONVS = {"one_channel": (1, 4, 1, 3), "one_channel_1x1": (1, 3, 1, 1),
         "depthwise": (4, 4, 4, 3), "depthwise_x2": (3, 6, 3, 3), "groups": (4, 6, 2, 3),
         "pointwise": (5, 7, 1, 1), "dense": (3, 5, 1, 3)}


@needs_c
@pytest.mark.parametrize("conv", sorted(CONVS))
def test_native_runs_each_conv_with_each_epilogue(conv: str) -> None:
    """The conv, with and without bias, followed by each epilogue: one model (one region to
    compile, holding no other conv), each pair on its own input to its own output."""
    rng = np.random.default_rng(len(conv))
    nodes, inits, inputs, outputs, feeds = [], [], [], [], {}
    c, m, group, k = CONVS[conv]
    for epilogue in sorted(EPILOGUES):
        for bias in (True, False):
            tag = f"{epilogue}_{'bias' if bias else 'nobias'}"
            w = rng.standard_normal((m, c // group, k, k)).astype(np.float32)
            inits.append(numpy_helper.from_array(w, f"w_{tag}"))
            if bias:
                b = rng.standard_normal(m).astype(np.float32)
                inits.append(numpy_helper.from_array(b, f"b_{tag}"))
            nodes.append(helper.make_node(
                "Conv", [f"x_{tag}", f"w_{tag}", *([f"b_{tag}"] if bias else [])], [f"c_{tag}"],
                group=group, pads=[k // 2] * 4, name=f"conv_{tag}"))
            tail, extra = EPILOGUES[epilogue](f"c_{tag}")
            rename = {"y": f"y_{tag}", "s": f"s_{tag}", "r": f"r_{tag}"}
            for node in tail:
                node.input[:] = [rename.get(i, i) for i in node.input]
                node.output[:] = [rename.get(o, o) for o in node.output]
            nodes += tail
            inits += [t for t in extra if t.name not in {i.name for i in inits}]
            inputs.append((f"x_{tag}", FLOAT, ["n", c, 7, 6]))
            feeds[f"x_{tag}"] = rng.standard_normal((2, c, 7, 6)).astype(np.float32)
            if epilogue == "Add":
                inputs.append((f"r_{tag}", FLOAT, ["n", m, 7, 6]))
                feeds[f"r_{tag}"] = rng.standard_normal((2, m, 7, 6)).astype(np.float32)
            outputs.append((f"y_{tag}", FLOAT, None))
    _assert_matches(make_model(nodes, inputs, outputs, inits), feeds, "native")


# -- onnxruntime: tensors numpy has no dtype for, and strings ---------------------------------------


@pytest.mark.parametrize("elem", [TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN,
                                  TensorProto.FLOAT8E5M2, TensorProto.FLOAT16])
def test_onnxruntime_moves_tensors_numpy_has_no_dtype_for(elem: int) -> None:
    """A bfloat16 or float8 tensor leaving onnxruntime's device (numpy() refuses bfloat16 and
    gives float8 as uint8) or entering it (no OrtValue is made of an ml_dtypes array)."""
    nodes = [helper.make_node("Cast", ["x"], ["low"], to=elem),
             helper.make_node("Cast", ["low"], ["back"], to=FLOAT)]
    model = make_model(nodes, [("x", FLOAT, [6])], [("low", elem, [6]), ("back", FLOAT, [6])])
    x = np.array([1.5, -2, 3.25, 0, 7, -0.1], np.float32)
    got = _assert_matches(model, {"x": x}, "onnxruntime")
    assert got["low"].dtype == np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    # and back in: onnxruntime has no Relu of these types, so the host runs it between two
    # onnxruntime regions (onnxruntime cannot run this model whole: the host is the reference)
    nodes = [helper.make_node("Cast", ["x"], ["low"], to=elem, name="down"),
             helper.make_node("Relu", ["low"], ["relu"], name="relu"),
             helper.make_node("Cast", ["relu"], ["back"], to=FLOAT, name="up")]
    model = make_model(nodes, [("x", FLOAT, [6])], [("back", FLOAT, [6])])
    exe, regions = _placed(model, "onnxruntime")
    want = byoc.build(byoc.load_onnx(model)).run({"x": x})
    np.testing.assert_array_equal(exe.run({"x": x})["back"], want["back"])
    if elem != TensorProto.FLOAT16:
        assert len(regions) == 2 and exe.copy_stats.copies[("cpu", "onnxruntime")] == 2


def test_onnxruntime_runs_string_tensors() -> None:
    """Strings cannot become OrtValues: they stay numpy object arrays on the device, and a region
    fed one runs through session.run. A NUL inside a string survives."""
    nodes = [helper.make_node("Concat", ["s", "s"], ["t"], axis=0),
             helper.make_node("Identity", ["t"], ["u"]),
             helper.make_node("Shape", ["t"], ["n"])]
    model = make_model(nodes, [("s", TensorProto.STRING, [2])],
                       [("u", TensorProto.STRING, [4]), ("n", TensorProto.INT64, [1])])
    got = _assert_matches(model, {"s": np.array(["a\x00b", "ü"], dtype=object)}, "onnxruntime")
    assert list(got["u"]) == ["a\x00b", "ü", "a\x00b", "ü"]


def test_compare_feeds_onnxruntime_strings_as_objects(tmp_path, capsys, monkeypatch) -> None:
    """``--compare onnxruntime`` with a ``<U`` array from a .npy: onnxruntime cut it at the
    first NUL and byoc reported a mismatch of its own making."""
    from byoc.cli import main

    model = make_model([helper.make_node("Identity", ["s"], ["t"])],
                       [("s", TensorProto.STRING, [3])], [("t", TensorProto.STRING, [3])])
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "s.npy", np.array(["a\x00b", "plain", "\x00"]))
    monkeypatch.chdir(tmp_path)
    code = main(["run", "m.onnx", "--input", "s=s.npy", "--compare", "onnxruntime", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    assert json.loads(out)["ok"] is True


@pytest.mark.parametrize("name", ["BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                  "FLOAT8E5M2FNUZ", "INT4", "UINT4", "FLOAT4E2M1", "FLOAT16"])
def test_every_onnx_dtype_goes_to_an_ortvalue_and_back(name: str) -> None:
    """4-bit types are packed two to a byte as ONNX packs them (onnxruntime reads the packed
    bytes; an odd count leaves half a byte)."""
    from byoc.backends.onnxruntime.values import from_ort, to_ort

    elem = getattr(TensorProto, name)
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    x = np.array([[0, 1, 2], [3, 4, 5], [6, 0, 1]], np.float32)
    if name == "INT4":
        x -= 3
    x = x.astype(dtype)
    value = to_ort(x)
    assert value.element_type() == elem and value.shape() == [3, 3]
    back = from_ort(value)
    assert back.dtype == dtype and back.shape == (3, 3)
    np.testing.assert_array_equal(back.astype(np.float32), x.astype(np.float32))
    if name == "INT4":  # and onnxruntime reads the values we meant: int4 -> float32
        node = helper.make_node("Cast", ["x"], ["y"], to=FLOAT)
        model = make_model([node], [("x", elem, [3, 3])], [("y", FLOAT, [3, 3])])
        from byoc.compare import onnxruntime_session

        (y,) = onnxruntime_session(model).run_with_ort_values(["y"], {"x": value})
        np.testing.assert_array_equal(y.numpy(), x.astype(np.float32))
