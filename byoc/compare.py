"""Compare byoc's outputs with a reference (onnxruntime), with the project's tolerances.

fp32: the max absolute error must be at most 1e-4 times the reference's largest magnitude;
fp16/bf16 get 1e-2, float64 1e-7; integers, bools and strings must be equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

RELATIVE_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2, "float64": 1e-7}


@dataclass(frozen=True)
class OutputComparison:
    name: str
    shape: tuple[int, ...]
    dtype: str
    max_abs_err: float
    rel_err: float
    ok: bool
    note: str = ""

    def as_dict(self) -> dict:
        d = {"shape": list(self.shape), "dtype": self.dtype, "max_abs_err": self.max_abs_err,
             "rel_err": self.rel_err, "ok": self.ok}
        if self.note:
            d["note"] = self.note
        return d


def compare_output(name: str, got: np.ndarray, want: np.ndarray,
                   rtol: float | None = None) -> OutputComparison:
    """How far ``got`` is from ``want``: max abs error and that error over max |want|."""
    got, want = np.asarray(got), np.asarray(want)
    shape, dtype = tuple(got.shape), got.dtype.name
    if got.shape != want.shape:
        return OutputComparison(name, shape, dtype, float("inf"), float("inf"), False,
                                f"shape {got.shape} vs reference {want.shape}")
    if got.dtype != want.dtype:
        return OutputComparison(name, shape, dtype, float("inf"), float("inf"), False,
                                f"dtype {got.dtype} vs reference {want.dtype}")
    if got.size == 0:
        return OutputComparison(name, shape, dtype, 0.0, 0.0, True)
    if got.dtype.kind not in "fc":
        equal = bool(np.array_equal(got, want))
        err = 0.0 if equal else float(np.max(got != want)) if got.dtype.kind in "OUSb" else \
            float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        return OutputComparison(name, shape, dtype, err, err, equal)
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_mismatch = bool(np.any(np.isnan(g) != np.isnan(w)))
    inf_mismatch = bool(np.any(np.isinf(w) & (g != w)))
    finite = np.isfinite(w) & np.isfinite(g)
    err = float(np.max(np.abs(g[finite] - w[finite]), initial=0.0))
    scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
    rel = err / scale if scale > 0 else err
    tol = rtol if rtol is not None else RELATIVE_TOLERANCE.get(dtype, 1e-4)
    ok = rel <= tol and not nan_mismatch and not inf_mismatch
    note = "NaN/Inf differ" if nan_mismatch or inf_mismatch else ""
    return OutputComparison(name, shape, dtype, err, rel, ok, note)


def compare_outputs(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                    rtol: float | None = None) -> list[OutputComparison]:
    """Compare every reference output by name."""
    out = []
    for name, w in want.items():
        if name not in got:
            out.append(OutputComparison(name, (), "", float("inf"), float("inf"), False,
                                        "missing from byoc's outputs"))
        else:
            out.append(compare_output(name, got[name], w, rtol))
    return out


def onnxruntime_session(model, threads: int = 1, optimize: bool = True):
    """An onnxruntime CPU session with ``threads`` intra-op threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def run_onnxruntime(model, inputs: Mapping[str, np.ndarray], threads: int = 1,
                    optimize: bool = True) -> dict[str, np.ndarray]:
    """onnxruntime's outputs by name for the same inputs."""
    session = onnxruntime_session(model, threads, optimize)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, dict(inputs))))
