"""Host kernels for If, Loop and Scan: they run their body functions through the executor.

Bodies are imported lambda-lifted: values a body reads from an outer scope ("captures") are
extra trailing parameters of the body and extra trailing arguments of the call, so the call's
arguments name everything it depends on. ``Function.attrs["captures"]`` says how many.
"""

from __future__ import annotations

import numpy as np

from ..ir import Call
from ..runtime import limits
from .host_kernels import Kernel, KernelContext


def _captures(call: Call, attr: str) -> int:
    return int(call.attrs[attr].attrs.get("captures", 0))


def if_kernel(call: Call, ctx: KernelContext) -> Kernel:
    then_f, else_f = call.attrs["then_branch"], call.attrs["else_branch"]
    run = ctx.run_function
    assert run is not None

    def kernel(cond, *captures):
        branch = then_f if bool(np.asarray(cond).reshape(-1)[0]) else else_f
        return tuple(run(branch, list(captures)))

    return kernel


def loop_kernel(call: Call, ctx: KernelContext) -> Kernel:
    body = call.attrs["body"]
    n_captures = _captures(call, "body")
    n_carried = len(call.args) - 2 - n_captures
    run = ctx.run_function
    assert run is not None

    def kernel(trip_count, cond, *rest):
        carried = list(rest[:n_carried])
        captures = list(rest[n_carried:])
        max_trips = None if trip_count is None else int(np.asarray(trip_count).reshape(-1)[0])
        keep_going = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
        scans: list[list[np.ndarray]] | None = None
        growth = limits.Growth("the Loop's scan outputs")
        i = 0
        while keep_going and (max_trips is None or i < max_trips):
            outs = run(body, [np.array(i, np.int64), np.array(keep_going), *carried, *captures])
            keep_going = bool(np.asarray(outs[0]).reshape(-1)[0])
            carried = list(outs[1:1 + n_carried])
            if scans is None:
                scans = [[] for _ in outs[1 + n_carried:]]
            for acc, v in zip(scans, outs[1 + n_carried:]):
                acc.append(v)
            i += 1
            if scans:  # a loop that never stops must not take all memory first
                growth.add(sum(getattr(v, "nbytes", 0) for v in outs[1 + n_carried:]), i)
        n_scan = len(body.body.fields) - 1 - n_carried if hasattr(body.body, "fields") else 0
        if scans is None:  # zero iterations: empty scan outputs of the body's declared dtypes
            scans = [[] for _ in range(n_scan)]
            stacked = [_empty_scan(body, 1 + n_carried + k) for k in range(n_scan)]
        else:
            stacked = [np.stack(acc) for acc in scans]
        return (*carried, *stacked)

    return kernel


def _empty_scan(body, index: int) -> np.ndarray:
    t = body.body.fields[index].type
    dtype = np.dtype(t.dtype or "float32")
    rest = [d if isinstance(d, int) else 0 for d in (t.shape or ())]
    return np.zeros([0, *rest], dtype)


def scan_kernel(call: Call, ctx: KernelContext) -> Kernel:
    body = call.attrs["body"]
    n_captures = _captures(call, "body")
    n_scan_in = int(call.attrs["num_scan_inputs"])
    n_states = len(call.args) - n_captures - n_scan_in
    in_axes = list(call.attrs.get("scan_input_axes", [0] * n_scan_in))
    in_dirs = list(call.attrs.get("scan_input_directions", [0] * n_scan_in))
    run = ctx.run_function
    assert run is not None

    def kernel(*args):
        states = list(args[:n_states])
        scans_in = list(args[n_states:n_states + n_scan_in])
        captures = list(args[n_states + n_scan_in:])
        scans_in = [np.moveaxis(x, ax, 0) for x, ax in zip(scans_in, in_axes)]
        scans_in = [x[::-1] if d else x for x, d in zip(scans_in, in_dirs)]
        length = scans_in[0].shape[0] if scans_in else 0
        for k, x in enumerate(scans_in[1:], 1):
            if x.shape[0] != length:  # onnxruntime refuses it too; never cut or overrun
                raise ValueError(f"scan inputs differ in length: {_scan_input(call, n_states)} "
                                 f"has {length} steps along axis {in_axes[0]}, "
                                 f"{_scan_input(call, n_states + k)} has {x.shape[0]} along "
                                 f"axis {in_axes[k]}")
        out_slices: list[list[np.ndarray]] = []
        for t in range(length):
            outs = run(body, [*states, *(x[t] for x in scans_in), *captures])
            states = list(outs[:n_states])
            if not out_slices:
                out_slices = [[] for _ in outs[n_states:]]
            for acc, v in zip(out_slices, outs[n_states:]):
                acc.append(v)
        n_out = len(out_slices)
        out_axes = list(call.attrs.get("scan_output_axes", [0] * n_out))
        out_dirs = list(call.attrs.get("scan_output_directions", [0] * n_out))
        stacked = []
        for acc, ax, d in zip(out_slices, out_axes, out_dirs):
            y = np.stack(acc[::-1] if d else acc)
            stacked.append(np.moveaxis(y, 0, ax % y.ndim) if ax else y)
        return (*states, *stacked)

    return kernel


def _scan_input(call: Call, index: int) -> str:
    """Scan's input ``index`` as the model names it."""
    from ..analysis import value_name

    return repr(value_name(call.args[index]) or f"input {index}")
