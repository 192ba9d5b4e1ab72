"""Loops that do not stop (issue 16): one whose scan output grows is stopped by byoc's
allocation limit with an error naming the node, long before the address space runs out; one that
grows nothing is a valid model (onnxruntime runs it for ever too) and Ctrl-C ends it cleanly, on
the host and inside onnxruntime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.errors import KernelError
from tests.conftest import FLOAT, make_model
from tests.signals import sigint_at_default

ROW = 1 << 16  # floats a growing Loop scans out per iteration (256 KB)


def _endless_loop(grows: bool) -> onnx.ModelProto:
    """A Loop with no trip count whose condition stays true; ``grows``: it scans out a row per
    iteration, else it only carries a counter."""
    nodes = [helper.make_node("Identity", ["cond"], ["cond_out"], name="keep_going"),
             helper.make_node("Add", ["acc", "one"], ["acc_out"], name="count")]
    outs = [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", FLOAT, [1])]
    if grows:
        nodes.append(helper.make_node("Expand", ["acc_out", "row_shape"], ["row"], name="row"))
        outs.append(helper.make_tensor_value_info("row", FLOAT, [ROW]))
    body = helper.make_graph(
        nodes, "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                        helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                        helper.make_tensor_value_info("acc", FLOAT, [1])], outs,
        [numpy_helper.from_array(np.ones(1, np.float32), "one"),
         numpy_helper.from_array(np.array([ROW], np.int64), "row_shape")])
    loop = helper.make_node("Loop", ["", "go", "x"], ["total", *(["rows"] if grows else [])],
                            name="endless", body=body)
    return make_model([loop], [("x", FLOAT, [1])],
                      [("total", FLOAT, [1]), *([("rows", FLOAT, None)] if grows else [])],
                      [numpy_helper.from_array(np.array(True), "go")], opset=17)


@pytest.mark.parametrize("backend", ["host", "reference"])
def test_a_loop_whose_scan_output_grows_without_end_is_refused(backend: str,
                                                               monkeypatch) -> None:
    monkeypatch.setenv("BYOC_MAX_TENSOR_BYTES", str(64 << 20))
    mod = byoc.load_onnx(_endless_loop(grows=True))
    exe = byoc.build(mod if backend == "host" else byoc.partition(mod, backends=[backend]))
    started = time.perf_counter()
    with pytest.raises(KernelError) as info:
        exe.run({"x": np.zeros(1, np.float32)})
    message = str(info.value)
    assert "node 'endless' (Loop): MemoryError: refused to allocate: the Loop's scan " \
           "outputs hold" in message, message
    held = int(message.split(" hold ")[1].split(" bytes")[0].replace(",", ""))
    assert 16 << 20 < held <= 64 << 20  # stopped near the limit, not at it
    assert time.perf_counter() - started < 60


_INTERRUPTED = textwrap.dedent("""
    import sys, time
    import numpy as np
    import onnx
    import byoc
    from byoc.compare import run_onnxruntime
    model = onnx.load(sys.argv[1])
    mod = byoc.load_onnx(model)
    backend = sys.argv[2]
    exe = byoc.build(mod if backend in ("host", "compare") else
                     byoc.partition(mod, backends=[backend]))
    print("running", flush=True)
    try:
        if backend == "compare":  # the whole model in onnxruntime, as --compare runs it
            run_onnxruntime(model, {"x": np.zeros(1, np.float32)})
        else:
            exe.run({"x": np.zeros(1, np.float32)})
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


@pytest.mark.parametrize("backend", ["host", "onnxruntime", "compare"])
def test_ctrl_c_ends_a_loop_that_never_stops(backend: str, tmp_path) -> None:
    """On the host (its body's regions on onnxruntime), and inside onnxruntime itself, which
    runs a whole model's Loop in one C++ call that Ctrl-C cannot reach (``--compare``): byoc
    runs that session in a worker thread and stops it through RunOptions.terminate."""
    model = _endless_loop(grows=False)
    onnx.save(model, tmp_path / "endless.onnx")
    code, out, err = _interrupt([sys.executable, "-c", _INTERRUPTED,
                                 str(tmp_path / "endless.onnx"), backend], wait_for="running")
    assert code == 130 and out.strip() == "interrupted", (out, err)


@pytest.mark.slow  # waits for the CLI to reach the loop
def test_the_cli_ends_a_loop_that_never_stops_on_ctrl_c(tmp_path) -> None:
    onnx.save(_endless_loop(grows=False), tmp_path / "endless.onnx")
    code, out, err = _interrupt([sys.executable, "-m", "byoc", "run",
                                 str(tmp_path / "endless.onnx"), "--backend", "onnxruntime"],
                                wait_for=None, delay=6.0)  # imports, build, then the loop
    assert code == 130, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def _interrupt(cmd: list[str], wait_for: str | None, delay: float = 1.0
               ) -> tuple[int, str, str]:
    """Start ``cmd``, wait for its line ``wait_for`` (if any) and ``delay`` seconds, press
    Ctrl-C; its exit code, stdout and stderr."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=os.getcwd(), preexec_fn=sigint_at_default)
    try:
        if wait_for is not None:
            assert proc.stdout.readline().strip() == wait_for
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err
