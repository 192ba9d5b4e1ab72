"""What reaches the terminal: nothing from a model raw (``info``, error lines, onnxruntime's log
lines), and Ctrl-C ends any command with exit 130 and one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import onnx
import pytest
from onnx import TensorProto, helper

from tests.bad_inputs.test_bad_models import assert_refused, run_cli
from tests.bad_inputs.test_bad_run_inputs import byoc_main
from tests.signals import sigint_at_default

ESC = "\x1b[2J\x1b[31m"  # clear the screen, then red


def _hostile(tmp_path) -> str:
    """Names, a dim and a domain with ESC sequences and newlines; a value_info that disagrees
    with inference (onnxruntime warns `MergeShapeInfo` for it on every session)."""
    x = "x" + ESC
    nodes = [helper.make_node("Relu", [x], ["m"], name="relu" + ESC + "\nFORGED"),
             helper.make_node("Reshape", ["m", "s"], ["y"], name="reshape\nFORGED")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["n" + ESC + "\nX", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("s", TensorProto.INT64, [1], [-1])],
        value_info=[helper.make_tensor_value_info("m", TensorProto.FLOAT, [5, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("evil" + ESC + "\nd", 1)])
    onnx.save(model, tmp_path / "hostile.onnx")
    return "hostile.onnx"


def _printable(text: str) -> bool:
    return all(line.isprintable() for line in text.splitlines())


def test_info_shows_every_model_string_escaped(tmp_path):
    r = run_cli("info", _hostile(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _printable(r.stdout) and "FORGED" not in r.stdout, r.stdout
    assert '"evil\\u001b[2J\\u001b[31m\\u000ad" 1' in r.stdout
    assert 'Tensor[("n\\u001b[2J\\u001b[31m\\u000aX", 3), float32]' in r.stdout


@pytest.mark.parametrize("argv", [["run", "--compare", "onnxruntime"],
                                  ["bench", "--repeat", "2", "--warmup", "1"]])
def test_onnxruntime_logs_nothing_to_the_terminal(tmp_path, argv):
    """Was: `[W:onnxruntime:, graph.cc:128 MergeShapeInfo]` in colour on every run."""
    r = run_cli(argv[0], _hostile(tmp_path), *argv[1:], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    assert _printable(r.stdout), r.stdout


def test_an_onnxruntime_failure_is_one_escaped_line(tmp_path):
    """A run that fails inside onnxruntime: its own log line (raw names, colour) is not shown;
    byoc's one line is, names escaped."""
    path = tmp_path / "bad.onnx"
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape" + ESC + "\nFORGED")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("s", TensorProto.INT64, [1], [7])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = run_cli("run", path, "--backend", "onnxruntime", cwd=tmp_path)
    assert r.returncode == 2 and "onnxruntime:" not in r.stderr.replace("byoc", ""), r.stderr
    (line,) = r.stderr.splitlines()
    assert line.isprintable() and "reshape\\x1b[2J" in line, line


def test_an_input_shape_error_keeps_its_whole_line(tmp_path):
    """Was cut at the newline inside the dim's name."""
    import numpy as np

    np.save(tmp_path / "x.npy", np.ones((2, 4), np.float32))
    r = run_cli("run", _hostile(tmp_path), "--input", f"x{ESC}=x.npy", cwd=tmp_path)
    assert_refused(r, 'must have shape ("n\\u001b[2J\\u001b[31m\\u000aX", 3), got (2, 4) '
                      '(dim 1)')


@pytest.mark.parametrize("argv,ending", [
    (["run"], ""), (["bench", "--repeat", "1", "--warmup", "0"], ""),
    (["build", "--backend", "reference"], ""),
    (["run", "--input", "NAME"], "is not a .npy or .npz file"),
    (["run", "--input", "X=NAME"], "is not a .npy or .npz file"),
    (["run", "--input", "X=NAME.npz"], "feeds them by name)"),
    (["run", "--input", "y=NAME.npz"], "the model's inputs are ['x\\x1b[2J\\x1b[31m']")])
def test_a_file_name_with_control_characters_stays_on_its_line(tmp_path, monkeypatch, capsys,
                                                                argv, ending):
    """The model's file name in the first line of run, bench and build, and --input's names in
    errors: escaped like a model's names (an error was cut at the newline inside the name)."""
    import numpy as np

    name = "evil" + ESC + "\nname"
    (tmp_path / name).write_bytes((tmp_path / _hostile(tmp_path)).read_bytes())
    np.savez(tmp_path / (name + ".npz"), a=np.ones(1), b=np.ones(1))
    argv = [a.replace("NAME", name).replace("X=", "x" + ESC + "=") for a in argv]
    monkeypatch.chdir(tmp_path)
    code, out, err = byoc_main(capsys, argv[0], name, *argv[1:])
    assert _printable(out + err) and "\nname" not in out + err, (out, err)
    if ending:
        assert code == 2 and err.count("\n") == 1 and err.rstrip().endswith(ending), err
    else:
        assert code == 0, err
        assert '"evil\\u001b[2J\\u001b[31m\\u000aname"' in out.splitlines()[0], out


# -- Ctrl-C ----------------------------------------------------------------------------------------


def _forever(tmp_path) -> str:
    """A Loop that never stops and grows nothing: valid, and onnxruntime runs it forever too."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "c", "x"], ["y"], name="forever", body=body)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor("c", TensorProto.BOOL, [], [True])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "forever.onnx")
    return str(tmp_path / "forever.onnx")


def _interrupt(cmd: list[str], after: float, ready: str = "", started=None, env=None
               ) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``cmd``, send it SIGINT (as Ctrl-C does) ``after`` seconds after it printed the
    line ``ready`` (if given: imports take seconds on a loaded machine), or after
    ``started()`` turned true."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, preexec_fn=sigint_at_default)
    first = p.stdout.readline() if ready else ""
    assert first == ready, (first, p.communicate())
    deadline = time.monotonic() + 60
    while started and not started() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(after)
    assert p.poll() is None, p.communicate()
    start = time.perf_counter()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    return (subprocess.CompletedProcess(cmd, p.returncode, first + out, err),
            time.perf_counter() - start)


@pytest.mark.parametrize("extra", [[], ["--compare", "onnxruntime"]], ids=["run", "compare"])
def test_ctrl_c_ends_a_run_that_never_ends(tmp_path, extra):
    r, took = _interrupt([sys.executable, "-m", "byoc", "run", _forever(tmp_path), *extra],
                         after=3)
    assert r.returncode == 130 and r.stderr == "byoc: interrupted\n", (r.returncode, r.stderr)
    assert took < 30


def test_ctrl_c_ends_a_build_and_its_compiler(tmp_path):
    """Ctrl-C while gcc compiles a region: exit 130 and one line, the compiler (and what it
    started) killed with it, no build folder left in the cache."""
    from tests.backends.test_big_regions import _SLOW_CC
    from tests.fuzz.harness import CCOMPILER

    if not CCOMPILER:
        pytest.skip("no C compiler")
    pids, cc = tmp_path / "pids", tmp_path / "slowcc"
    cc.write_text(_SLOW_CC.format(pids=pids))
    cc.chmod(0o755)
    nodes = [helper.make_node("Relu", ["x"], ["m"], name="relu"),
             helper.make_node("Neg", ["m"], ["y"], name="neg")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "m.onnx")
    cache = tmp_path / "cache"
    r, _ = _interrupt([sys.executable, "-m", "byoc", "build", str(tmp_path / "m.onnx"),
                       "--backend", "ccompiler"], after=0.2, started=pids.exists,
                      env={**os.environ, "CC": str(cc), "BYOC_CACHE_DIR": str(cache)})
    assert r.returncode == 130 and r.stderr == "byoc: interrupted\n", (r.returncode, r.stderr)
    time.sleep(0.2)
    for pid in map(int, pids.read_text().split()):  # the compiler's own child: killed too
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().split()[2] == "Z", pid
    assert not list(cache.rglob(".build-*")), list(cache.rglob("*"))


@pytest.mark.slow
def test_ctrl_c_ends_a_command_stuck_inside_onnxruntime(tmp_path):
    """Python cannot interrupt onnxruntime's run: the watchdog ends the process after its grace
    period, with the same line and status."""
    code = textwrap.dedent(f"""
        import numpy as np
        from byoc.cli.interrupt import Interrupts
        from byoc.runtime.ort_sessions import run_options, session
        with Interrupts():
            s = session({_forever(tmp_path)!r})
            print("running", flush=True)
            s.run(None, {{"x": np.zeros(2, np.float32)}}, run_options())
    """)
    r, took = _interrupt([sys.executable, "-c", code], after=1, ready="running\n")
    assert r.stdout == "running\n", r.stdout
    assert r.returncode == 130 and r.stderr == "byoc: interrupted\n", (r.returncode, r.stderr)
    assert took < 30


def test_every_onnxruntime_session_byoc_creates_logs_errors_only(monkeypatch):
    """--compare and bench (byoc.compare), the onnxruntime backend and one-node host kernels:
    each session goes through byoc/runtime/ort_sessions.py, which sets error severity."""
    import onnxruntime as ort

    import byoc
    from byoc.compare import onnxruntime_session
    from byoc.op.host_kernels import KernelContext
    from byoc.op.host_kernels import onnxruntime as ort_kernel
    from byoc.runtime import ort_sessions
    from tests.conftest import FLOAT, make_model

    seen = []
    real = ort.InferenceSession

    def spy(data, options, **kw):
        seen.append(options.log_severity_level)
        return real(data, options, **kw)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                       [("x", FLOAT, [2])], [("y", FLOAT, [2])])
    onnxruntime_session(model)
    byoc.build(byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"]))
    gelu = make_model([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")],
                      [("x", FLOAT, [2])], [("y", FLOAT, [2])], extra_opsets={"com.microsoft": 1})
    call = byoc.load_onnx(gelu).main.body
    ort_kernel(call, KernelContext(opsets={"": 17, "com.microsoft": 1}))
    assert len(seen) >= 3 and set(seen) == {ort_sessions.ERROR}, seen
    assert ort_sessions.run_options().log_severity_level == ort_sessions.FATAL


def test_no_session_is_created_outside_ort_sessions():
    """A guard: a new InferenceSession elsewhere would log with onnxruntime's defaults."""
    import pathlib

    import byoc.backends
    import byoc.frontends

    import byoc

    folders = [pathlib.Path(p) for pkg in (byoc, byoc.backends, byoc.frontends)
               for p in pkg.__path__]
    places = {p.name for folder in folders for p in folder.rglob("*.py")
              if "InferenceSession(" in p.read_text()}
    assert len(folders) == 3 and places == {"ort_sessions.py"}, places

