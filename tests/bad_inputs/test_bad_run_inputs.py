"""Bad run inputs, through the CLI (``--input NAME=FILE.npy``) and the API, on the host and on
partitioned builds: a clear one-line error naming the input, or results equal to onnxruntime's.

NaN and Inf must propagate as onnxruntime propagates them; the per-op table below records where
a backend does not (bugs, xfail strict) or where byoc chose otherwise (divergences).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import byoc
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.errors import InputError
from byoc.inputs import random_inputs
from tests.bad_inputs.test_bad_models import assert_refused, run_cli
from tests.conftest import FLOAT, make_model
from tests.fuzz.harness import CCOMPILER

BACKENDS = [None, "reference", "onnxruntime"] + (["ccompiler", "ccompiler,onnxruntime"]
                                                 if CCOMPILER else [])
W = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)


@pytest.fixture(scope="module", autouse=True)
def private_build_cache(tmp_path_factory) -> Iterator[None]:
    """C regions build into a cache of this module's own (the CLI runs inherit it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BYOC_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


def _model() -> onnx.ModelProto:
    """a, b: (n, 3) sharing the dim n; y = |a + b|, z = y @ W (ops every backend takes)."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Abs", ["s"], ["y"], name="abs"),
             helper.make_node("MatMul", ["y", "w"], ["z"], name="matmul")]
    return make_model(nodes, [("a", FLOAT, ["n", 3]), ("b", FLOAT, ["n", 3])],
                      [("y", FLOAT, ["n", 3]), ("z", FLOAT, ["n", 2])],
                      [numpy_helper.from_array(W, "w")])


@pytest.fixture
def folder(tmp_path):
    """The model and good inputs in a folder of their own (the CLI's cwd)."""
    onnx.save(_model(), tmp_path / "m.onnx")
    rng = np.random.default_rng(0)
    for name in "ab":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((2, 3)).astype(np.float32))
    return tmp_path


def _backend_args(backend: str | None) -> list[str]:
    return ["--backend", backend] if backend else []


def _save(folder, name: str, array) -> str:
    np.save(folder / name, array, allow_pickle=True)
    return name


REFUSED = {  # what the bad file holds -> what the one line must say
    "unknown name": ("c=a.npy", "unknown input 'c'"),
    "float64": ("a=f64.npy", "input 'a' must be float32, got float64"),
    "int64": ("a=i64.npy", "input 'a' must be float32, got int64"),
    "rank 3": ("a=rank3.npy", "input 'a' must have rank 2"),
    "a 0-d array": ("a=scalar.npy", "input 'a' must have rank 2"),
    "a wrong static dim": ("a=wide.npy", "input 'a' must have shape (n, 3), got (2, 4) (dim 1)"),
    "a pickle": ("a=pickle.npy", "holds Python objects (a pickle), which byoc never loads"),
    "not .npy at all": ("a=m.onnx", "is not a .npy or .npz file"),
    "no such file": ("a=nowhere.npy", "no such file 'nowhere.npy'"),
    "no NAME=, two inputs": ("a.npy", "say which input it is with --input NAME=a.npy"),
}


def byoc_main(capsys, *argv: str) -> tuple[int, str, str]:
    """The CLI in this process (a subprocess costs a second of imports): code, stdout, stderr."""
    from byoc.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(code: int, err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("byoc: error: "), err
    assert needle in lines[0], lines[0]


@pytest.fixture
def bad_files(folder, monkeypatch):
    """The bad .npy files of REFUSED, in the model's folder, which is the cwd."""
    _save(folder, "f64.npy", np.ones((2, 3)))
    _save(folder, "i64.npy", np.ones((2, 3), np.int64))
    _save(folder, "rank3.npy", np.ones((2, 3, 1), np.float32))
    _save(folder, "scalar.npy", np.float32(1))
    _save(folder, "wide.npy", np.ones((2, 4), np.float32))
    with open(folder / "pickle.npy", "wb") as f:  # an object array: np.load must not unpickle
        np.save(f, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_a_bad_input_file_is_refused_in_one_line(bad_files, capsys, what: str) -> None:
    before = sorted(os.listdir(bad_files))
    spec, needle = REFUSED[what]
    code, _, err = byoc_main(capsys, "run", "m.onnx", "--input", spec)
    assert_one_line(code, err, needle)
    assert sorted(os.listdir(bad_files)) == before


@pytest.mark.parametrize("backend", BACKENDS[1:])
def test_partitioned_builds_refuse_alike(bad_files, capsys, backend: str) -> None:
    for what in ("unknown name", "float64", "a wrong static dim"):
        spec, needle = REFUSED[what]
        assert_one_line(*byoc_main(capsys, "run", "m.onnx", "--input", spec, "--backend",
                                   backend)[::2], needle)


def test_a_bad_input_is_refused_in_one_line_by_a_real_process(bad_files) -> None:
    """The same through a real process (exit code, stderr, no traceback)."""
    assert_refused(run_cli("run", "m.onnx", "--input", "a=f64.npy", cwd=bad_files),
                   "input 'a' must be float32, got float64")


def test_refusals_that_need_two_flags(folder, capsys, monkeypatch) -> None:
    monkeypatch.chdir(folder)
    np.save(folder / "b3.npy", np.ones((3, 3), np.float32))
    for flags, needle in [(["--input", "a=a.npy", "--input", "b=b3.npy"],
                           "input 'b' dim 0 is 3, but dim 'n' is 2 in 'a'"),
                          (["--input", "a=a.npy", "--input", "a=b.npy"],
                           "input 'a' is given twice"),
                          (["--dim", "n=two"], "--dim n wants a size (0, 1, 2, ...), got 'two'")]:
        assert_one_line(*byoc_main(capsys, "run", "m.onnx", *flags)[::2], needle)


def test_a_huge_dim_for_made_up_inputs_is_refused(folder) -> None:
    """Fixed (byoc/inputs.py random_inputs checks limits.too_big before allocating)."""
    assert_refused(run_cli("run", "m.onnx", "--dim", f"n={10**12}", cwd=folder),
                   "input 'a'")


def test_made_up_token_ids_stay_inside_their_embedding_table() -> None:
    """Integer inputs gathered from a table (token ids, token types) are drawn below its size,
    so `byoc run` of a transformer without --input compares with onnxruntime."""
    table = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "table")
    model = make_model([helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")],
                       [("ids", onnx.TensorProto.INT64, [64])], [("y", FLOAT, [64, 3])],
                       [table])
    ids = random_inputs(byoc.load_onnx(model).main)["ids"]
    assert ids.min() >= 0 and ids.max() == 1  # two rows: 0 and 1 (64 draws)
    np.testing.assert_array_equal(byoc.build(byoc.load_onnx(model)).run({"ids": ids})["y"],
                                  run_onnxruntime(model, {"ids": ids})["y"])


def test_a_run_that_fails_on_made_up_inputs_says_they_were_made_up(tmp_path) -> None:
    """Made-up inputs the model cannot take (a shape input of random sizes) fail naming the node
    and saying the inputs were made up; given real inputs of the wrong rank, the LSTM says so
    in its own words rather than numpy's."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 8, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "r")]
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["xs"], name="reshape"),
             helper.make_node("LSTM", ["xs", "w", "r"], ["y"], name="the_lstm", hidden_size=2)]
    model = make_model(nodes, [("x", FLOAT, ["n"]), ("shape", onnx.TensorProto.INT64, [2])],
                       [("y", FLOAT, None)], inits)
    onnx.save(model, tmp_path / "m.onnx")
    result = run_cli("run", "m.onnx", cwd=tmp_path)
    assert_refused(result, "node 'reshape' (Reshape)")
    assert "inputs 'x', 'shape' were made up: pass real ones" in result.stderr, result.stderr
    np.save(tmp_path / "x.npy", np.zeros(6, np.float32))
    np.save(tmp_path / "shape.npy", np.array([3, 2]))
    given = run_cli("run", "m.onnx", "--input", "x=x.npy", "--input", "shape=shape.npy",
                    cwd=tmp_path)
    assert_refused(given, "X must be 3-D [seq, batch, input], got shape [3, 2]")
    assert "made up" not in given.stderr


def _compare(capsys, backend: str | None, *flags: str) -> dict:
    code, out, err = byoc_main(capsys, "run", "m.onnx", *flags, *_backend_args(backend),
                               "--compare", "onnxruntime", "--json")
    assert code == 0 and err == "", (out, err)
    result = json.loads(out)
    assert result["ok"] is True, result
    return result


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_inputs_propagate_as_in_onnxruntime(folder, capsys, monkeypatch,
                                                        backend: str | None) -> None:
    monkeypatch.chdir(folder)
    np.save(folder / "a.npy", np.array([[np.nan, 1, -np.inf], [np.inf, 2, 3]], np.float32))
    result = _compare(capsys, backend, "--input", "a=a.npy", "--input", "b=b.npy")
    assert set(result["outputs"]) == {"y", "z"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_unusual_but_valid_arrays_give_onnxruntimes_results(folder, capsys, monkeypatch,
                                                            backend: str | None) -> None:
    """Big-endian and Fortran-ordered .npy files, and an empty batch."""
    monkeypatch.chdir(folder)
    a = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.save(folder / "big.npy", a.astype(">f4"))
    np.save(folder / "fortran.npy", np.asfortranarray(a))
    _compare(capsys, backend, "--input", "a=big.npy", "--input", "b=fortran.npy")
    np.save(folder / "empty.npy", np.ones((0, 3), np.float32))
    _compare(capsys, backend, "--input", "a=empty.npy")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_api_refuses_bad_inputs_on_partitioned_builds(backend: str | None) -> None:
    mod = byoc.load_onnx(_model())
    exe = byoc.build(byoc.partition(mod, backends=backend.split(",")) if backend else mod)
    a = np.ones((2, 3), np.float32)
    for inputs, needle in [({"a": a}, "missing input 'b'"),
                           ({"a": a, "b": a, "w": W}, "unknown input 'w'"),
                           ({"a": a, "b": a.astype(np.float16)}, "must be float32, got float16"),
                           ({"a": a, "b": a[:1]}, "dim 'n' is 2 in 'a'"),
                           ({"a": [[1, 2, 3]], "b": a[:1]},
                            "input 'a' is a list numpy reads as int64; it wants an array of "
                            "float32, shape (n, 3) (np.asarray(value, dtype='float32'))")]:
        with pytest.raises(InputError, match=re.escape(needle)):
            exe.run(inputs)


def test_odd_api_values_are_refused_in_one_line_naming_the_input() -> None:
    """None, a Python scalar (onnxruntime's Python API refuses those too), a string for a
    float input, a dict, an object: each an InputError naming the input, what it got and the
    array it wants; a numpy scalar of the input's dtype is a rank-0 array and runs."""
    nodes = [helper.make_node("Mul", ["a", "s"], ["y"], name="scale")]
    model = make_model(nodes, [("a", FLOAT, ["n", 3]), ("s", FLOAT, [])], [("y", FLOAT, ["n", 3])])
    exe = byoc.build(byoc.load_onnx(model))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = exe.run({"a": a, "s": np.float32(1.5)})["y"]
    want = run_onnxruntime(model, {"a": a, "s": np.array(1.5, np.float32)})["y"]
    np.testing.assert_array_equal(got, want)
    wants_a, wants_s = "it wants an array of float32, shape (n, 3)", \
        "it wants an array of float32, shape ()"
    for value, needle in [
            (None, f"input 's' is None; {wants_s}"),
            (1.5, f"input 's' is a Python float; {wants_s} (np.array(value, dtype='float32'))"),
            (2, f"input 's' is a Python int; {wants_s}"),
            (True, f"input 's' is a Python bool; {wants_s}"),
            ("1.5", f"input 's' is a string; {wants_s}"),
            (b"1.5", f"input 's' is a string; {wants_s}"),
            ({"s": 1.5}, f"input 's' is a dict, which numpy holds only as a Python object; "
                         f"{wants_s}"),
            (object(), "input 's' is an object, which numpy holds only as a Python object"),
            (np.float64(1.5), "input 's' must be float32, got float64")]:
        with pytest.raises(InputError) as caught:
            exe.run({"a": a, "s": value})
        assert str(caught.value).startswith(needle), (value, str(caught.value))
        assert "\n" not in str(caught.value)
    for value, needle in [(None, f"input 'a' is None; {wants_a}"),
                          ("abc", f"input 'a' is a string; {wants_a}"),
                          ([["x", "y", "z"]], f"input 'a' is a list numpy reads as str32; "
                                              f"{wants_a}")]:
        with pytest.raises(InputError) as caught:
            exe.run({"a": value, "s": np.float32(1)})
        assert str(caught.value).startswith(needle), (value, str(caught.value))


# -- NaN and Inf, op by op ------------------------------------------------------------------------

UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Sqrt", "Log", "Floor", "Sign", "Erf",
         "Softplus", "LeakyRelu", "HardSigmoid", "IsNaN", "IsInf"]
OTHER = {"Softmax": {"axis": -1}, "ReduceSum": {}, "ReduceMean": {}, "ReduceMax": {},
         "ReduceMin": {}, "AveragePool": {"kernel_shape": [2, 2]},
         "MaxPool": {"kernel_shape": [2, 2]}, "GlobalMaxPool": {}, "LayerNormalization": {},
         "Add": {}, "Mul": {}, "Div": {}, "Max": {}, "Min": {}, "MatMul": {}, "Pow": {}}
BINARY = {"Add", "Mul", "Div", "Max", "Min", "MatMul", "Pow"}
# The C backend's ops whose math still turns NaN (or Inf) into numbers, each with its cause;
# each runs here as a strict xfail until fixed. (Once exp's clamp, Relu's and Sign's compares
# and ReduceMax/Min's `v > acc ? v : acc` did; issue 7 fixed them.)
CCOMPILER_NAN_BUGS: dict[str, str] = {}
# Where byoc's host kernels chose otherwise than onnxruntime, on purpose: a max over a window
# holding NaN is NaN (as ReduceMax, Max and ONNX's reference say); onnxruntime's MaxPool skips it.
HOST_DIVERGENCES = {"MaxPool", "GlobalMaxPool"}
SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.0, 0.5, -2.0, np.nan, np.inf],
                   np.float32).reshape(1, 2, 2, 2)


def _op_model(op: str) -> onnx.ModelProto:
    ins, inits = ["x"], []
    if op in BINARY:
        ins.append("x")
    if op == "LayerNormalization":
        ins.append("scale")
        inits.append(numpy_helper.from_array(np.ones(2, np.float32), "scale"))
    out = onnx.TensorProto.BOOL if op in ("IsNaN", "IsInf") else FLOAT
    node = helper.make_node(op, ins, ["y"], name=f"the_{op}", **OTHER.get(op, {}))
    return make_model([node], [("x", FLOAT, [1, 2, 2, 2])], [("y", out, None)], inits)


def _cases():
    for op in [*UNARY, *OTHER]:
        for backend in ["host", "reference", "onnxruntime"] + (["ccompiler"] if CCOMPILER
                                                               else []):
            marks = []
            if backend == "ccompiler" and op in CCOMPILER_NAN_BUGS:
                marks = [pytest.mark.xfail(strict=True, reason="BUG " + CCOMPILER_NAN_BUGS[op])]
            yield pytest.param(op, backend, marks=marks, id=f"{op}-{backend}")


@pytest.mark.parametrize("op, backend", list(_cases()))
def test_nan_and_inf_through_each_op(op: str, backend: str) -> None:
    model = _op_model(op)
    mod = byoc.load_onnx(model)
    got = byoc.build(mod if backend == "host" else byoc.partition(mod, backends=[backend])
                     ).run({"x": SPECIAL})["y"]
    if op in HOST_DIVERGENCES and backend in ("host", "reference"):
        assert np.isnan(got).all()  # every window holds a NaN
        return
    bad = [c for c in compare_outputs({"y": got}, run_onnxruntime(model, {"x": SPECIAL}))
           if not c.ok]
    assert not bad, (got, bad)
