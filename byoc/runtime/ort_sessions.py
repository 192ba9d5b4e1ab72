"""onnxruntime sessions as byoc creates them (``--compare``, ``bench``, the onnxruntime backend,
one-node host kernels): CPU only, the thread count given, and quiet.

onnxruntime logs to stderr from C++, in colour, with the model's names raw: an ESC sequence or a
newline in a node name reaches the terminal as it is (and its warnings, such as
``MergeShapeInfo``, appear on every run of some models). So sessions log at error severity only,
runs not at all (a failed run raises, and byoc reports the exception as its own one line, names
escaped), and onnxruntime's default logger is held to errors too.
"""

from __future__ import annotations

import functools

from .threads import ORT_SPIN_US

ERROR = 3  # onnxruntime's severities: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal
FATAL = 4


@functools.lru_cache(maxsize=1)
def _quiet_default_logger() -> None:
    import onnxruntime as ort

    ort.set_default_logger_severity(ERROR)


def session(model, threads: int = 1, optimize: bool = True, baseline: bool = False):
    """An InferenceSession on the CPU for ``model`` (bytes, a path or a ModelProto).

    ``baseline``: onnxruntime as a user gets it, to compare with (its threads spin on after a
    run); otherwise a session byoc runs as one of its engines, whose idle threads sleep soon
    (``threads.ORT_SPIN_US``) so as not to hold a core the next region needs."""
    import onnxruntime as ort

    _quiet_default_logger()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not baseline and threads > 1:
        options.add_session_config_entry("session.intra_op.spin_duration_us", str(ORT_SPIN_US))
    options.log_severity_level = ERROR
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


@functools.lru_cache(maxsize=1)
def run_options():
    """What every ``session.run`` of byoc's passes: no log lines (the exception says it)."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = FATAL
    return options
