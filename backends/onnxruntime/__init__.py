"""The ``onnxruntime`` backend: each region becomes an ONNX model run by an InferenceSession.

A real engine standing in for an accelerator. It takes a call exactly when onnxruntime's CPU
provider can build a session for that one node (asked once per op, attributes and input
dtypes, and cached), so what it declines it declines with onnxruntime's own reason.

Threads: the build's (``byoc.build(mod, threads=N)``, ``$BYOC_THREADS``, else the physical cores;
read with ``byoc.runtime.threads.build_threads()``). Graph optimizations are on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from byoc.analysis import walk_orders
from byoc.backend import Backend, register_backend
from byoc.ir import Call, Constant, Function, TensorType, Tuple
from byoc.op import CANONICAL_OPSET, onnx_bridge
from byoc.op.host_kernels import one_node_model
from byoc.runtime.devices import Device, register_device
from byoc.runtime.ort_sessions import session
from byoc.runtime.threads import build_threads

from .run import run_region
from .values import describe, from_ort, to_ort

_verdicts: dict[tuple, bool | str] = {}
_lock = threading.Lock()


def _session(model_bytes: bytes, optimize: bool = True, threads: int = 1):
    return session(model_bytes, threads, optimize)  # quiet: byoc/runtime/ort_sessions.py


def _key(call: Call) -> tuple | None:
    attrs = []
    for k, v in sorted(call.attrs.items()):
        if isinstance(v, Function):
            return None  # bodies: ask each time (rare), no cheap key
        attrs.append((k, v.tobytes() if isinstance(v, np.ndarray) else repr(v)))
    types = tuple((a.type.dtype, a.type.rank) if a is not None and isinstance(a.type, TensorType)
                  else None for a in call.args)
    return (call.op, tuple(attrs), types, onnx_bridge.num_outputs(call))


def _opsets(ops: set[str]) -> dict[str, int]:
    opsets = {"": CANONICAL_OPSET}
    for op in ops:
        domain = onnx_bridge.split_op(op)[0]
        if domain:
            opsets.setdefault(domain, 1)
    return opsets


def onnxruntime_runs(call: Call) -> bool | str:
    """True if onnxruntime's CPU provider has a kernel for this call, else its reason."""
    if not isinstance(call.op, str) or call.op.startswith("annotation."):
        return "onnxruntime: only ONNX ops"
    if any(isinstance(a.type, TensorType) and a.type.dtype is None for a in call.args if a is not None):
        return "onnxruntime: an input's dtype is unknown"
    why = _integer_division_refusal(call)
    if why:
        return why
    key = _key(call)
    with _lock:
        if key is not None and key in _verdicts:
            return _verdicts[key]
    try:
        model, _ = one_node_model(call, _opsets({call.op}))
        _session(model.SerializeToString(), optimize=False)
        verdict: bool | str = True
    except Exception as exc:  # onnxruntime's refusal is the reason
        text = str(exc).replace("\n", " ")
        verdict = "onnxruntime: " + (text.split(" : ")[-1] if " : " in text else text)[:200]
    if key is not None:
        with _lock:
            _verdicts[key] = verdict
    return verdict


def _integer_division_refusal(call: Call) -> str | None:
    """Integer Div and Mod only by a constant divisor without 0 (nor -1 for Div): onnxruntime
    fails the run on x / 0 and x % 0 and dies of SIGFPE on INT_MIN / -1, where byoc gives
    every backend one answer (0, 0 and INT_MIN; docs/decisions.md)."""
    if call.op not in ("Div", "Mod") or len(call.args) < 2 or call.args[1] is None:
        return None
    t = call.args[1].type
    if not isinstance(t, TensorType) or t.dtype is None or np.dtype(t.dtype).kind not in "iu":
        return None
    bad = [0, -1] if call.op == "Div" and np.dtype(t.dtype).kind == "i" else [0]
    b = call.args[1]
    if isinstance(b, Constant) and not np.isin(b.value, bad).any():
        return None
    return (f"onnxruntime: integer {call.op} by a divisor that may be "
            f"{' or '.join(map(str, bad))} (onnxruntime fails or traps there; byoc answers)")


def compile_region(func: Function) -> Callable[..., tuple]:
    """An InferenceSession for the region; OrtValues in, a tuple of OrtValues out.

    The region's tensors stay onnxruntime's between regions on this device; the executor's
    device_copy turns them into numpy arrays only where a host op or an output needs them.
    """
    from byoc.frontends.onnx.exporter import export_function

    calls = [e for _, _, order in walk_orders(func) for e in order  # bodies' calls too
             if isinstance(e, Call) and isinstance(e.op, str)]
    ops = {c.op for c in calls}
    # an If, Loop or Scan it was given whole (control_flow=True): a Loop may run for ever
    loops = any(c.op == "Loop" for c in calls)
    n_out = len(func.body.fields) if isinstance(func.body, Tuple) else 1
    outs = [f"out_{k}" for k in range(n_out)]
    model = export_function(func.with_attrs(output_names=outs), _opsets(ops))
    session = _session(model.SerializeToString(), threads=build_threads())
    # The exporter writes one graph input per parameter, in order (names made unique).
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(func.params), (names, [p.name for p in func.params])

    def run(*values):
        return run_region(session, outs, names, values, interruptible=loops)

    return run


DEVICE = Device("onnxruntime", to_device=to_ort, to_host=from_ort, describe=describe)


def register() -> Backend:
    register_device(DEVICE)
    return register_backend("onnxruntime", supports=onnxruntime_runs, compile=compile_region,
                            device=DEVICE.name, control_flow=True)
