"""Compare byoc's outputs with a reference (onnxruntime, a recorded case), element-wise.

An element is within tolerance when ``|got - want| <= atol + rtol * |want|`` (as
``numpy.allclose``), with per-dtype defaults (``TOLERANCES``, written in the README; the
default atol is at least a hundred-thousandth of the reference's largest magnitude,
``ATOL_SCALE``): a
difference is judged against the element it is in, so a tiny output's last-bit noise passes
and one wrong element of a large output does not hide behind the output's scale. Integers,
bools and strings must be equal; NaN must meet NaN and an infinity the same infinity.

Each comparison reports the max absolute error, the max relative error (over elements whose
reference is not 0), how many elements are out, and, where the value comes after an integer
rounding step (a quantizer, Floor/Round/Ceil, a float-to-integer Cast), which step: there a
last-bit difference upstream moves a value by a whole step, and that is where to look.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# dtype -> (atol, rtol)
TOLERANCES = {"float32": (1e-5, 1e-4), "float16": (1e-3, 1e-2), "bfloat16": (1e-2, 1e-2),
              "float64": (1e-12, 1e-7)}
DEFAULT_TOLERANCE = TOLERANCES["float32"]


# The default atol is at least this share of the reference's largest magnitude: a float sum's
# rounding error grows with the size of its terms, not of its result, so an element near 0 of
# a product whose terms are near 100 may be off by 1e-4 (a K=1030 MatMul: 6e-5 on values up to
# 107; a 60-node ccompiler region of the PP-OCRv4 recognizer: 1.6e-4 on values up to 46). A
# hundred-thousandth of the largest magnitude still catches a wrong element (a MaxPool padded
# with 0: 0.0179 off on an output up to 320, 5.6 times the bound).
ATOL_SCALE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2, "float64": 1e-12}


def tolerance(dtype: str, atol: float | None = None, rtol: float | None = None,
              scale: float = 0.0) -> tuple[float, float]:
    """The (atol, rtol) for ``dtype``: the given ones, else its defaults (atol at least
    ``ATOL_SCALE`` times ``scale``, the reference's largest magnitude)."""
    default_atol, default_rtol = TOLERANCES.get(dtype, DEFAULT_TOLERANCE)
    if atol is None:
        atol = max(default_atol, ATOL_SCALE.get(dtype, ATOL_SCALE["float32"]) * scale)
    return atol, default_rtol if rtol is None else rtol


@dataclass(frozen=True)
class OutputComparison:
    name: str
    shape: tuple[int, ...]
    dtype: str
    max_abs_err: float
    max_rel_err: float  # max |got - want| / |want| over elements whose reference is not 0
    ok: bool
    note: str = ""
    n_out: int = 0  # elements out of tolerance
    size: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    rel_err: float = 0.0  # max abs error over the reference's largest magnitude
    rounding: str = ""  # the integer rounding step the value comes after, if any

    def as_dict(self) -> dict:
        d = {"shape": list(self.shape), "dtype": self.dtype, "max_abs_err": self.max_abs_err,
             "max_rel_err": self.max_rel_err, "rel_err": self.rel_err, "out": self.n_out,
             "size": self.size, "ok": self.ok}
        if self.dtype.startswith(("float", "bfloat")):
            d.update(atol=self.atol, rtol=self.rtol)
        if self.note:
            d["note"] = self.note
        if self.rounding:
            d["after_rounding"] = self.rounding
        return d

    def summary(self) -> str:
        """One line: the errors, how many elements are out, and why."""
        text = (f"max_abs_err={self.max_abs_err:.3g} max_rel_err={self.max_rel_err:.3g} "
                f"out={self.n_out}/{self.size} ")
        text += "ok" if self.ok else "OUT OF TOLERANCE"
        if self.dtype.startswith(("float", "bfloat")) and not self.ok:
            text += f" (atol={self.atol:g} rtol={self.rtol:g})"
        if self.note:
            text += f" ({self.note})"
        if self.rounding and self.max_abs_err:
            text += (f"; it comes after integer rounding at {self.rounding}: a last-bit "
                     "difference before it moves a value by a whole step")
        return text


def compare_output(name: str, got: np.ndarray, want: np.ndarray, rtol: float | None = None,
                   atol: float | None = None, rounding: str = "") -> OutputComparison:
    """How far ``got`` is from ``want``, element-wise (see the module docstring)."""
    got, want = np.asarray(got), np.asarray(want)
    shape, dtype = tuple(got.shape), got.dtype.name
    scale = 0.0
    if atol is None and want.dtype.kind == "f" and want.size:
        finite = np.abs(want[np.isfinite(want)])
        scale = float(finite.max()) if finite.size else 0.0
    a_tol, r_tol = tolerance(dtype, atol, rtol, scale)
    common = dict(size=int(got.size), atol=a_tol, rtol=r_tol, rounding=rounding)
    if got.shape != want.shape:
        return OutputComparison(name, shape, dtype, float("inf"), float("inf"), False,
                                f"shape {got.shape} vs reference {want.shape}",
                                n_out=int(got.size), rel_err=float("inf"), **common)
    if got.dtype != want.dtype:
        return OutputComparison(name, shape, dtype, float("inf"), float("inf"), False,
                                f"dtype {got.dtype} vs reference {want.dtype}",
                                n_out=int(got.size), rel_err=float("inf"), **common)
    if got.size == 0:
        return OutputComparison(name, shape, dtype, 0.0, 0.0, True, **common)
    if got.dtype.kind not in "fc":
        differ = got != want
        n_out = int(np.count_nonzero(differ))
        if got.dtype.kind in "OUSb" or not n_out:
            err = float(n_out > 0)
            return OutputComparison(name, shape, dtype, err, err, not n_out, n_out=n_out,
                                    rel_err=err, **common)
        g, w = got.astype(np.float64), want.astype(np.float64)
        return _floats(name, shape, dtype, g, w, 0.0, 0.0, common)
    return _floats(name, shape, dtype, got.astype(np.float64), want.astype(np.float64),
                   a_tol, r_tol, common)


def _floats(name, shape, dtype, g, w, a_tol, r_tol, common) -> OutputComparison:
    diff = np.abs(g - w)
    same = (g == w) | (np.isnan(g) & np.isnan(w))  # equal infinities and NaN meet NaN
    finite = np.isfinite(w) & np.isfinite(g)
    within = same | (finite & (diff <= a_tol + r_tol * np.abs(w)))
    n_out = int(within.size - np.count_nonzero(within))
    err = float(np.max(diff[finite], initial=0.0))
    nonzero = finite & (w != 0)
    rel = float(np.max(diff[nonzero] / np.abs(w[nonzero]), initial=0.0))
    scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
    note = "NaN/Inf differ" if n_out and not np.all(within | finite) else ""
    return OutputComparison(name, shape, dtype, err, rel, n_out == 0, note, n_out=n_out,
                            rel_err=err / scale if scale > 0 else err, **common)


def compare_outputs(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
                    rtol: float | None = None, atol: float | None = None,
                    rounding: Mapping[str, str] | None = None) -> list[OutputComparison]:
    """Compare every reference output by name (``rounding``: output -> the rounding step it
    comes after, see ``rounding_steps``)."""
    out = []
    for name, w in want.items():
        if name not in got:
            out.append(OutputComparison(name, (), "", float("inf"), float("inf"), False,
                                        "missing from byoc's outputs"))
        else:
            out.append(compare_output(name, got[name], w, rtol, atol,
                                      (rounding or {}).get(name, "")))
    return out


ROUNDING_OPS = frozenset({"Round", "Floor", "Ceil", "QuantizeLinear", "DynamicQuantizeLinear",
                          "QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul",
                          "com.microsoft.QLinearAdd", "com.microsoft.QLinearMul",
                          "com.microsoft.DynamicQuantizeLSTM", "com.microsoft.QLinearConv"})


def rounding_steps(func) -> dict[str, str]:
    """Output name -> the last integer rounding step before it in ``func`` ('node' (Op)):
    a quantizer, Round/Floor/Ceil, or a Cast from float to an integer type. Outputs no such
    step feeds are left out. Linear in the function's size (one pass in run order)."""
    from .analysis import value_name
    from .ir import Call, Function, Tuple, post_order

    assert isinstance(func, Function)
    last: dict = {}  # expr -> the nearest rounding step upstream, or None
    for e in post_order(func.body):
        found = None
        for a in getattr(e, "args", ()) or ((e.tuple_value,) if hasattr(e, "tuple_value") else
                                            getattr(e, "fields", ())):
            if a is not None and last.get(a):
                found = last[a]
        if isinstance(e, Call) and _rounds(e):
            label = e.span.name if e.span is not None else ""
            found = f"{label!r} ({e.op_name})"
        last[e] = found
    outputs = func.body.fields if isinstance(func.body, Tuple) else (func.body,)
    names = func.attrs.get("output_names") or [value_name(o) for o in outputs]
    return {n: last[o] for n, o in zip(names, outputs) if last.get(o)}


def _rounds(call) -> bool:
    from .ir import TensorType

    if call.op in ROUNDING_OPS:
        return True
    if call.op == "Cast" and call.args and call.args[0] is not None:
        src, dst = getattr(call.args[0], "type", None), call.type
        return (isinstance(src, TensorType) and isinstance(dst, TensorType)
                and _kind(src.dtype) == "f" and _kind(dst.dtype) in ("i", "u"))
    return False


def _kind(dtype: str | None) -> str:
    try:
        return np.dtype(dtype).kind if dtype else ""
    except TypeError:  # bfloat16, float8: floats numpy does not name
        return "f" if "float" in dtype else ""


def onnxruntime_session(model, threads: int = 1, optimize: bool = True):
    """An onnxruntime CPU session with ``threads`` intra-op threads and its other settings at
    onnxruntime's defaults (what byoc is compared with), logging errors only (run it with
    ``run_options()``: ``byoc/runtime/ort_sessions.py``)."""
    from .runtime.ort_sessions import session

    return session(model, threads, optimize, baseline=True)


def run_onnxruntime(model, inputs: Mapping[str, np.ndarray], threads: int = 1,
                    optimize: bool = True) -> dict[str, np.ndarray]:
    """onnxruntime's outputs by name for the same inputs."""
    from byoc.backends.onnxruntime.run import run_region
    from byoc.backends.onnxruntime.values import from_ort, to_ort

    session = onnxruntime_session(model, threads, optimize)
    names = [o.name for o in session.get_outputs()]
    # Through byoc's own OrtValue conversions: numpy's fixed-width strings become the object
    # arrays ONNX strings are held in (onnxruntime cuts a ``<U`` array at the first NUL), and
    # bfloat16, float8 and int4 tensors go in and come out (numpy() knows none of them).
    values = [to_ort(np.asarray(v, order="C")) for v in inputs.values()]
    outs = run_region(session, names, list(inputs), values, interruptible=True)
    return {name: from_ort(v) for name, v in zip(names, outs)}


@functools.cache
def onnxruntime_u8s8_saturates() -> bool:
    """Whether onnxruntime's u8 x s8 integer products saturate on this machine: on x86 without
    VNNI (AVX2, as an AMD Zen 3) its kernels add pairs of u8 x s8 products in int16 with
    saturation (vpmaddubsw), so 255 * -128 twice reads -32768, not -65280. byoc's integer
    kernels are exact everywhere (docs/decisions.md, "Quantized models"). One QLinearMatMul
    of two products, run once per process."""
    from onnx import TensorProto, helper

    t = helper.make_tensor
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    inits = [t("as", TensorProto.FLOAT, [], [1.0]), t("az", TensorProto.UINT8, [], [0]),
             t("b", TensorProto.INT8, [2, 1], [-128, -128]), t("bs", TensorProto.FLOAT, [], [1.0]),
             t("bz", TensorProto.INT8, [], [0]), t("ys", TensorProto.FLOAT, [], [1024.0]),
             t("yz", TensorProto.UINT8, [], [128])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "probe", [vi("a", TensorProto.UINT8, [1, 2])],
                              [vi("y", TensorProto.UINT8, [1, 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    y = onnxruntime_session(model).run(None, {"a": np.full((1, 2), 255, np.uint8)})[0]
    return int(y[0, 0]) != 128 + round(-65280 / 1024)
