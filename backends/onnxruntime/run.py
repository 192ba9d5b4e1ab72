"""Running an onnxruntime session on byoc's device values, and stopping it on Ctrl-C.

Values on the onnxruntime device are OrtValues, except strings (numpy object arrays: see
``values.py``); a region fed a string runs through ``session.run`` on numpy arrays.

A Loop whose condition never turns false is a valid model, and onnxruntime runs it forever,
inside one C++ call that Python's Ctrl-C cannot reach: the signal only sets a flag that Python
looks at when the call returns. So a session that may loop (a whole model, for ``--compare``;
a region given a Loop whole: ``byoc/passes/whole_control_flow.py``) runs in a worker thread while
the main thread waits, where KeyboardInterrupt does arrive; it then sets
``RunOptions.terminate``, which onnxruntime checks between nodes (a Loop's body included),
waits for the worker to stop and raises KeyboardInterrupt. Other sessions run in the calling
thread (a thread hand-off costs tens of microseconds, a region call a few).
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np

from byoc.runtime.ort_sessions import FATAL, run_options

from .values import from_ort

try:
    from onnxruntime import OrtValue
except ImportError:  # onnxruntime is a dependency; an install without it fails at the session
    OrtValue = None


def run_region(session: Any, outs: list[str], names: list[str], values: list[Any],
               interruptible: bool = False) -> tuple:
    """Run the session on device values: OrtValues in and out, unless a string (a numpy
    array) is among them; then numpy arrays in and out (byoc's device holds both).
    ``interruptible``: the session may run for ever (a Loop), so Ctrl-C must stop it."""
    if interruptible and threading.current_thread() is threading.main_thread():
        return _interruptibly(lambda options: _run(session, outs, names, values, options))
    return _run(session, outs, names, values, run_options())


def _run(session: Any, outs: list[str], names: list[str], values: list[Any], options) -> tuple:
    if not any(isinstance(v, np.ndarray) for v in values):
        native = getattr(session, "_sess", None)
        if native is None:  # not the binding measured below: its public call
            return tuple(session.run_with_ort_values(outs, dict(zip(names, values)), options))
        # The binding's own call, its results taken by index: the public wrapper iterates the
        # result vector, which costs 40 us for two outputs in onnxruntime 1.32 (a whole
        # silero VAD region ran 0.20 ms through it, 0.13 ms so)
        result = native.run_with_ort_values(
            {n: v._get_c_value() for n, v in zip(names, values)}, outs, options)
        return tuple(OrtValue(result[i]) for i in range(len(result)))
    return tuple(session.run(outs, {n: from_ort(v) for n, v in zip(names, values)}, options))


def _interruptibly(call) -> tuple:
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = FATAL  # no raw log line: byoc reports the exception itself
    done: dict[str, Any] = {}

    def work() -> None:
        try:
            done["result"] = call(options)
        except BaseException as exc:  # handed to the caller's thread
            done["error"] = exc

    worker = threading.Thread(target=work, name="byoc-onnxruntime-run", daemon=True)
    worker.start()
    try:
        worker.join()  # a lock wait: Ctrl-C interrupts it in the main thread
    except KeyboardInterrupt:
        options.terminate = True
        worker.join()
        # What the worker left (onnxruntime's "Exiting due to terminate flag" and its
        # traceback) sits in reference cycles that keep the terminated session alive to the
        # interpreter's end, and destroying it there aborts the process: free it now.
        done.clear()
        gc.collect()
        raise
    if "error" in done:
        raise done.pop("error")
    return done.pop("result")
