"""Arguments as a hostile user types them: every error one line and exit 2, before any work;
and the inputs of a run as a newcomer passes them (``.npz`` files, ``--dim``, ``--shape``, the
note that says which inputs were made up)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.bad_inputs.test_bad_run_inputs import assert_one_line, byoc_main
from tests.conftest import FLOAT, make_model

HOSTILE = [  # (argv, what the one line says)
    (["run", "--dim", "batch=²"], "--dim batch wants a size (0, 1, 2, ...), got '²'"),
    (["run", "--dim", "batch=٣"], "--dim batch wants a size"),
    (["run", "--dim", "batch=-1"], "--dim batch wants a size"),
    (["run", "--dim", "batch=1e3"], "--dim batch wants a size"),
    (["run", "--dim", "batch=" + "9" * 40], "--dim batch wants a size"),
    (["run", "--dim", "=3"], "--dim wants NAME=N, got '=3'"),
    (["run", "--dim", "batch=1", "--dim", "batch=2"], "--dim 'batch' is given twice"),
    (["run", "--dim", "foo=48"], "--dim 'foo': the model's inputs have no dim of that name; "
                                 "its dims are ['batch']"),
    (["run", "--seed", "-1"], "argument --seed: wants a whole number, at least 0; got '-1'"),
    (["run", "--seed", "²"], "argument --seed: wants a whole number, at least 0"),
    (["run", "--threads", "0"], "argument --threads: wants a whole number, at least 1 and at most 1024"),
    (["run", "--threads", "100000"], "argument --threads: wants a whole number, at least 1 and at most 1024"),
    (["bench", "--repeat", "0"], "argument --repeat: wants a whole number, at least 1; got '0'"),
    (["bench", "--warmup", "-1"], "argument --warmup: wants a whole number, at least 0"),
    (["extract", "--region", "-1", "-o", "x", "--backend", "reference"],
     "argument --region: wants a whole number, at least 0"),
    (["run", "--backend", ","], "--backend wants NAME[,NAME], got ','"),
    (["run", ""], "argument model: wants a path, got ''"),
    (["run", "--trace", ""], "argument --trace: wants a path, got ''"),
    (["build", "--emit-c", ""], "argument --emit-c: wants a path"),
    (["run", "--input", "="], "--input wants NAME=FILE.npy, NAME=FILE.npz or FILE.npz"),
    (["run", "--input", "x="], "--input wants NAME=FILE.npy"),
    (["run", "--shape", "image=1,3,32"], "--shape image: the input has rank 4"),
    (["run", "--shape", "image=1,3,31,32"], "--shape image: dim 2 is 32 in the model, got 31"),
    (["run", "--shape", "image=1,3,32,"], "--shape image wants a size"),
    (["run", "--shape", "nope=1"], "--shape: unknown input 'nope'; the model's inputs are"),
    (["run", "--shape", "image=2,3,32,32", "--dim", "batch=1"],
     "--shape image: dim 0 ('batch') is 2, but 'batch' is 1"),
    (["run", "--compare"], "argument --compare: expected one argument"),
    (["run", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["run", "--x\nY"], "unrecognized arguments: --x\\nY (see byoc --help)"),  # not cut
    (["run", "--fallback", "x"], "argument --fallback: invalid choice"),
    (["run", "--atol", "nan"], "argument --atol: wants a number from 0, got 'nan'"),
    (["run", "--rtol", "-1"], "argument --rtol: wants a number from 0, got '-1'"),
    (["tune", "--backend", "reference", "-o", "p.json", "--budget", "0"],
     "argument --budget: wants a number above 0"),
    (["tune", "--backend", "reference", "-o", "p.json", "--atoms", "0"],
     "argument --atoms: wants a whole number, at least 1"),
    (["tune", "--backend", "reference", "-o", ""], "argument -o/--output: wants a path"),
    (["plan", "show", ""], "argument PLAN.json: wants a path"),
]


@pytest.mark.parametrize("argv,needle", HOSTILE, ids=[" ".join(a) for a, _ in HOSTILE])
def test_a_hostile_argument_is_one_line_and_exit_2(capsys, argv, needle):
    code, _, err = byoc_main(capsys, *argv)
    assert_one_line(code, err, needle)


# -- inputs as a newcomer passes them ------------------------------------------------------------


@pytest.fixture
def two_inputs(tmp_path, monkeypatch):
    """a: (?, 3) with an unnamed dim, b: (n, 3); ya = Relu(a), yb = Relu(b)."""
    unnamed = helper.make_tensor_value_info("a", FLOAT, [None, 3])
    model = make_model([helper.make_node("Relu", ["a"], ["ya"], name="relu_a"),
                        helper.make_node("Relu", ["b"], ["yb"], name="relu_b")],
                       [unnamed, ("b", FLOAT, ["n", 3])],
                       [("ya", FLOAT, [None, 3]), ("yb", FLOAT, ["n", 3])])
    onnx.save(model, tmp_path / "m.onnx")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, *argv) -> dict:
    code, out, err = byoc_main(capsys, "run", "m.onnx", "--json", *argv)
    assert code == 0, err
    return json.loads(out)


def _shapes(result: dict) -> dict:
    return {k: tuple(v["shape"]) for k, v in result["outputs"].items()}


def test_unnamed_dims_are_set_with_shape_and_named_ones_with_dim(two_inputs, capsys):
    result = _run(capsys, "--shape", "a=4,3", "--dim", "n=5")
    assert _shapes(result) == {"ya": (4, 3), "yb": (5, 3)}
    assert result["made_up_inputs"] == ["a", "b"]
    code, _, err = byoc_main(capsys, "run", "m.onnx", "--dim", "m=5")
    assert_one_line(code, err, "--dim 'm': the model's inputs have no dim of that name; its dims "
                               "are ['n']")


def test_an_npz_feeds_inputs_by_name(two_inputs, capsys):
    a, b = np.full((2, 3), -1, np.float32), np.arange(9, dtype=np.float32).reshape(3, 3)
    np.savez(two_inputs / "both.npz", a=a, b=b)
    np.savez(two_inputs / "one.npz", anything=a)
    np.save(two_inputs / "b.npy", b)
    np.savez(two_inputs / "none.npz")
    result = _run(capsys, "--input", "both.npz")
    assert _shapes(result) == {"ya": (2, 3), "yb": (3, 3)} and "made_up_inputs" not in result
    result = _run(capsys, "--input", "a=one.npz", "--input", "b=b.npy", "--compare",
                  "onnxruntime")
    assert result["ok"] and _shapes(result) == {"ya": (2, 3), "yb": (3, 3)}
    for argv, needle in [
            (["--input", "a=both.npz"], "--input a: 'both.npz' holds 2 arrays ['a', 'b']; "
                                        "NAME=FILE.npz wants exactly one"),
            (["--input", "one.npz"], "unknown input 'anything' (one.npz); the model's inputs "
                                     "are ['a', 'b']"),
            (["--input", "both.npz", "--input", "b=b.npy"], "input 'b' is given twice"),
            (["--input", "b.npy"], "say which input it is with --input NAME=b.npy"),
            (["--input", "none.npz"], "--input none.npz: the .npz file holds no arrays"),
            (["--input", "a=none.npz"], "--input a: 'none.npz' holds 0 arrays []"),
            (["--input", "a=one.npz", "--shape", "a=2,3"], "given with --input and --shape")]:
        code, _, err = byoc_main(capsys, "run", "m.onnx", *argv)
        assert_one_line(code, err, needle)


def test_a_bare_npy_is_the_only_input_of_a_one_input_model(tmp_path, capsys, monkeypatch):
    from byoc.cli import default_model_path

    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((2, 3, 32, 32), np.float32))
    code, out, err = byoc_main(capsys, "run", default_model_path(), "--input", "x.npy",
                               "--json")
    assert code == 0, err
    result = json.loads(out)
    assert _shapes(result) == {"probabilities": (2, 10)} and "made_up_inputs" not in result


def test_run_says_which_inputs_were_made_up_and_how_to_pass_real_ones(two_inputs, capsys):
    np.save(two_inputs / "b.npy", np.ones((2, 3), np.float32))
    code, out, err = byoc_main(capsys, "run", "m.onnx", "--input", "b=b.npy", "--seed", "7")
    assert code == 0 and err == "", err
    assert out.splitlines()[-1] == ("input 'a' made up (seed 7); pass real ones with --input "
                                    "NAME=FILE.npy or --input FILE.npz")
    code, out, err = byoc_main(capsys, "run", "m.onnx", "--input", "b=b.npy", "--json")
    assert json.loads(out)["made_up_inputs"] == ["a"]  # the whole stdout is the JSON
    np.save(two_inputs / "a.npy", np.ones((2, 3), np.float32))
    code, out, err = byoc_main(capsys, "run", "m.onnx", "--input", "b=b.npy", "--input",
                               "a=a.npy")
    assert code == 0 and "made up" not in out + err
