"""extract, repro, bisect and build --emit-c on models with symbolic and unnamed dims, on every
built-in backend, with one region numbering everywhere."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.backend import register_backend, unregister_backend
from byoc.extract import bisect, extract, load_case, regions, repro
from byoc.ir import Call, Function, rewrite
from tests.bad_inputs.test_bad_models import run_cli
from tests.conftest import FLOAT

BACKENDS = ["reference", "ccompiler", "native", "onnxruntime"]


def dynamic_cnn() -> onnx.ModelProto:
    """Conv, Relu, BatchNormalization, MaxPool (padded), GlobalAveragePool, Flatten, Gemm; the
    input [batch, 3, ?, ?]: a symbolic dim and two unnamed ones."""
    rng = np.random.default_rng(0)

    def t(name, *shape, low=None):
        v = rng.uniform(low, 1.5, shape) if low is not None else rng.standard_normal(shape) * 0.4
        return numpy_helper.from_array(v.astype(np.float32), name)

    inits = [t("w", 4, 3, 3, 3), t("b", 4), t("s", 4), t("m", 4), t("v", 4, low=0.2),
             t("fw", 5, 4), t("fb", 5),
             numpy_helper.from_array(np.full(4, -2.0, np.float32), "o")]  # negatives to pool
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("BatchNormalization", ["r", "s", "o", "m", "v"], ["n"], name="bn"),
        helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2], name="pool"),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, None, None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])
    model = helper.make_model(helper.make_graph(nodes, "dyn", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("dyn") / "dyn.onnx"
    onnx.save(dynamic_cnn(), path)
    return str(path)


X = {"x": np.random.default_rng(1).standard_normal((2, 3, 11, 13)).astype(np.float32)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_extract_and_repro_on_dynamic_dims(tmp_path, model_path, backend):
    mod = byoc.load_onnx(model_path)
    case = extract(mod, backend, str(tmp_path / "case"), X, region=0)
    model, inputs, outputs = load_case(str(tmp_path / "case"))
    assert inputs["x"].shape == (2, 3, 11, 13) and outputs["y"].shape == (2, 5)
    checks = repro(str(tmp_path / "case"), backend)
    assert checks and all(c.ok for c in checks), checks
    if backend in ("ccompiler", "native"):  # the C it generates for these very shapes
        source = (tmp_path / "case" / "region.c").read_text()
        assert "region.c" in case.files and "ONNX nodes" in source and "conv (Conv)" in source
        assert "void byoc_region(" in source
    else:
        assert "region.c" not in case.files


@pytest.mark.parametrize("backend", BACKENDS)
def test_bisect_on_every_backend_finds_no_region_differs(tmp_path, model_path, backend):
    result = run_cli("bisect", model_path, "--backend", backend, "--dim", "batch=2",
                     "-o", tmp_path / "b", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no region differs" in result.stdout and "numbered from 0" in result.stdout


def _pad_with_zero(func: Function):
    """The reference backend with the planted bug: MaxPool pads with 0, not -inf."""
    def swap(old, new):
        if isinstance(new, Call) and new.op == "MaxPool":
            pads = new.attrs["pads"]
            padded = byoc.op.Pad(new.args[0], byoc.op.const(np.array(
                [0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]], np.int64)))
            attrs = {k: v for k, v in new.attrs.items() if k != "pads"}
            return Call("MaxPool", (padded,), attrs, new.type, new.span)
        return new

    (body,), _ = rewrite([func.body], swap)
    return byoc.get_backend("reference").compile(Function(func.params, body, func.attrs))


@pytest.fixture
def zero_pad():
    yield register_backend("zeropad", supports=lambda call: True, compile=_pad_with_zero)
    unregister_backend("zeropad")


def test_the_planted_maxpool_padding_bug_is_caught(tmp_path, model_path, zero_pad):
    mod = byoc.load_onnx(model_path)
    result = bisect(mod, "zeropad", X, out_dir=str(tmp_path / "bad"))
    assert result.node == "pool" and result.index == 0
    (bad,) = result.comparisons
    assert bad.n_out > 0 and not bad.ok
    assert not all(c.ok for c in repro(str(tmp_path / "bad"), "zeropad"))
    # Numbered as partition numbers it: extract --region of that number is that region.
    part = byoc.partition(mod, backends=["zeropad"])
    assert regions(part)[result.index].name == result.region.name


def test_extract_a_region_whose_values_have_no_rank(tmp_path, backends):
    """A Reshape to a shape only known at run time: the region after it sees a tensor of
    unknown rank; the case declares the recorded tensor's shape (ONNX's checker wants one)."""
    backends("relus", {"Relu"})
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape"),
             helper.make_node("Relu", ["y"], ["r"], name="relu")]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
        helper.make_tensor_value_info("s", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inputs = {"x": np.arange(-3, 3, dtype=np.float32), "s": np.array([2, 3], np.int64)}
    extract(byoc.load_onnx(model), "relus", str(tmp_path / "case"), inputs, region=0)
    case, recorded, expected = load_case(str(tmp_path / "case"))
    assert [d.dim_value for d in case.graph.input[0].type.tensor_type.shape.dim] == [2, 3]
    np.testing.assert_array_equal(expected["r"], np.maximum(inputs["x"].reshape(2, 3), 0))
    assert all(c.ok for c in repro(str(tmp_path / "case"), "relus"))


def test_bisect_says_how_many_body_regions_it_left(tmp_path, backends, capsys):
    """bisect runs main's regions; those inside If/Loop/Scan bodies are numbered after them,
    and it says so rather than claiming every region matched."""
    from byoc.cli import main

    backends("adds", {"Add", "Relu", "Neg"})
    def branch(op):
        return helper.make_graph([helper.make_node(op, ["a"], [f"{op}_out"], name=op.lower())],
                                 op, [], [helper.make_tensor_value_info(f"{op}_out", FLOAT, [3])])

    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="add"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("Relu"),
                              else_branch=branch("Neg"))]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("x", FLOAT, [3]),
        helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", FLOAT, [3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "if.onnx")
    result = bisect(byoc.load_onnx(str(tmp_path / "if.onnx")), "adds",
                    {"x": np.array([1, -2, 3], np.float32), "c": np.array(True)})
    assert result.region is None and (result.checked, result.in_bodies) == (1, 2)
    assert main(["bisect", str(tmp_path / "if.onnx"), "--backend", "adds",
                 "-o", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "all 1 region(s) of main" in out and "the 2 region(s) inside If/Loop/Scan bodies " \
        "(1 to 2) are not bisected" in out, out


def test_extract_and_bisect_default_to_the_embedded_model(tmp_path):
    """As run, partition and build do: a newcomer tries the tools before having a model."""
    r = run_cli("bisect", "--backend", "reference", cwd=tmp_path)
    assert r.returncode == 0 and "no region differs" in r.stdout, r.stderr
    r = run_cli("extract", "--backend", "ccompiler", "--region", "0", "-o", "case", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "case" / "region.c").exists(), r.stderr


def test_region_numbers_agree_across_partition_bisect_and_extract(tmp_path, model_path):
    table = run_cli("partition", model_path, "--backend", "ccompiler", cwd=tmp_path).stdout
    assert table.splitlines()[0].startswith("#") and "\n0 " in table
    assert "numbered from 0" in table
    r = run_cli("extract", model_path, "--backend", "ccompiler", "--region", "1", "-o",
                tmp_path / "x", cwd=tmp_path)
    assert r.returncode == 2 and "numbered 0 to 0" in r.stderr


def test_build_emit_c_specializes_to_the_given_shapes(tmp_path, model_path):
    for backend in ("ccompiler", "native"):
        out = tmp_path / backend
        np.save(tmp_path / "x.npy", X["x"])
        r = run_cli("build", model_path, "--backend", backend, "--input", "x=x.npy",
                    "--emit-c", out, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        files = sorted(out.glob("*.c"))
        assert files, r.stdout
        for f in files:
            text = f.read_text()
            assert text.startswith(f"/* byoc {backend}: region") and "/* ONNX nodes (" in text
            assert "void byoc_region(" in text
        text = files[0].read_text()
        # ccompiler names each input's shape; native calls its conv kernel with them.
        assert ("float32[2, 3, 11, 13]" if backend == "ccompiler" else "2, 3, 11, 13") in text
        # every node has code (native computes the BatchNormalization after the Relu as a Mul
        # and an Add); a BatchNormalization folded into a conv's weights: test_native.py
        assert "bn (BatchNormalization) */" in text and "[folded]" not in text, text[:500]
    # no shapes to specialize to: one line, exit 2, nothing written
    r = run_cli("build", model_path, "--backend", "ccompiler", "--emit-c", tmp_path / "none",
                cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "dynamic dims" in r.stderr and not (tmp_path / "none").exists()
    r = run_cli("build", model_path, "--backend", "onnxruntime", "--input", "x=x.npy",
                "--emit-c", tmp_path / "ort", cwd=tmp_path)
    assert r.returncode == 2 and "generates no C" in r.stderr


def test_repro_reports_errors_and_takes_tolerances(tmp_path, model_path):
    extract(byoc.load_onnx(model_path), "reference", str(tmp_path / "case"), X, region=0)
    out = tmp_path / "case" / "test_data_set_0" / "output_0.pb"
    tensor = onnx.load_tensor(str(out))
    value = numpy_helper.to_array(tensor).copy()
    value.flat[3] += 1e-3  # one element off by 1e-3
    out.write_bytes(numpy_helper.from_array(value, tensor.name).SerializeToString())
    r = run_cli("repro", tmp_path / "case", "--backend", "reference", cwd=tmp_path)
    assert r.returncode == 1 and f"out=1/{value.size} OUT OF TOLERANCE" in r.stdout, r.stdout
    assert "max_abs_err=0.001" in r.stdout and "max_rel_err=" in r.stdout
    r = run_cli("repro", tmp_path / "case", "--backend", "reference", "--atol", "2e-3",
                cwd=tmp_path)
    assert r.returncode == 0 and f"out=0/{value.size} ok" in r.stdout, r.stdout
