"""byoc tune and byoc plan show, and --plan on partition/run/bench/build."""

from __future__ import annotations

import json

import pytest

from byoc.cli import main


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BYOC_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, cache):
    """One tune for the module (its stdout and stderr kept): the tests read its plan."""
    import contextlib
    import io

    path = tmp_path_factory.mktemp("plan") / "plan.json"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["tune", "--backend", "reference,onnxruntime", "--atoms", "4",
                     "-o", str(path)]) == 0
    return path, out.getvalue(), err.getvalue()


@pytest.fixture
def plan_file(tuned):
    path, out, err = tuned
    return path, type("Out", (), {"out": out, "err": err})


def test_tune_writes_a_plan_and_shows_it(plan_file):
    path, out = plan_file
    data = json.loads(path.read_text())
    assert data["format"] == "byoc-plan" and data["version"] == 1
    assert data["backends"] == ["reference", "onnxruntime"]
    assert len(data["nodes"]) == data["model"]["nodes"] == 33
    assert "byoc tune [" in out.err and "done:" in out.err  # progress on stderr
    assert "times in ms per option" in out.out and f"wrote {path}" in out.out
    segment = data["segments"][0]
    assert set(segment["time_s"]) >= {"host", "reference", "onnxruntime"}
    assert data["latency"]["predicted_s"] > 0 and data["latency"]["measured_s"] > 0


def test_a_warm_tune_writes_the_same_bytes(plan_file, tmp_path, capsys):
    path, _ = plan_file
    again = tmp_path / "again.json"
    assert main(["tune", "--backend", "reference,onnxruntime", "--atoms", "4", "--quiet",
                 "-o", str(again)]) == 0
    assert again.read_bytes() == path.read_bytes()
    assert capsys.readouterr().err == ""


def test_plan_show(plan_file, capsys):
    path, _ = plan_file
    assert main(["plan", "show", str(path), "--nodes"]) == 0
    out = capsys.readouterr().out
    assert "plan for tiny_resnet.onnx" in out and "stem/conv" in out
    assert main(["plan", "show", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "byoc-plan"


def test_the_plan_replays_everywhere(plan_file, tmp_path, capsys):
    path, _ = plan_file
    assert main(["partition", "--plan", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    placed = {n for r in report["regions"] for n in r["nodes"]}
    plan = json.loads(path.read_text())
    assert placed == {n["node"] for n in plan["nodes"] if n["region"] != "host"}
    assert main(["run", "--plan", str(path), "--compare", "onnxruntime"]) == 0
    assert "matches onnxruntime" in capsys.readouterr().out
    assert main(["bench", "--plan", str(path), "--repeat", "2", "--warmup", "1"]) == 0
    assert main(["build", "--plan", str(path)]) == 0


@pytest.mark.parametrize("argv, message", [
    (["partition", "--plan", "PLAN", "--backend", "reference"], "drop --backend"),
    (["run", "--plan", "PLAN", "--backend", "reference"], "drop --backend"),
    (["run", "--plan", "missing.json"], "plan: no such file"),
    (["tune", "--backend", "reference", "--budget", "0", "-o", "x.json"], "argument --budget"),
    (["tune", "--backend", "nope", "-o", "x.json"], "unknown backend 'nope'"),
])
def test_errors_are_one_line(plan_file, capsys, argv, message):
    path, _ = plan_file
    argv = [str(path) if a == "PLAN" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("byoc: error: ") and message in err[0]


def test_an_edited_plan_refused_in_one_line(plan_file, tmp_path, capsys):
    path, _ = plan_file
    data = json.loads(path.read_text())
    data["nodes"][0]["node"] = "not_a_node"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["run", "--plan", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node 'not_a_node'" in err[0]


def test_a_budget_stops_the_search_with_a_plan(tmp_path, cache):
    path = tmp_path / "quick.json"
    assert main(["tune", "--backend", "reference,onnxruntime", "--budget", "0.5", "--quiet",
                 "-o", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["search"]["complete"] is False
    assert main(["run", "--plan", str(path)]) == 0


def test_tune_refuses_to_replace_a_file_without_force(tmp_path, cache, capsys):
    path = tmp_path / "plan.json"
    path.write_text("mine")
    assert main(["tune", "--backend", "reference", "--quiet", "-o", str(path)]) == 2
    err = capsys.readouterr().err
    assert "exists; pass --force to replace it" in err and "byoc tune [" not in err
    assert path.read_text() == "mine"
    assert main(["tune", "--backend", "reference", "--quiet", "--atoms", "2", "--force",
                 "-o", str(path)]) == 0
    assert json.loads(path.read_text())["format"] == "byoc-plan"


def test_tune_takes_the_whole_shape_of_an_input_with_an_unnamed_dim(tmp_path, cache):
    """--shape, as run and partition take it: the plan records the shape it was measured at."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Abs", ["r"], ["y"], name="abs")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           [None, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "m.onnx")
    out = tmp_path / "plan.json"
    assert main(["tune", str(tmp_path / "m.onnx"), "--backend", "reference", "--shape", "x=3,4",
                 "--budget", "30", "--quiet", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["model"]["inputs"][0]["shape"] == [3, 4]
