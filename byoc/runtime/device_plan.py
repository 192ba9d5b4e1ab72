"""plan_devices: put a ``device_copy`` wherever a tensor crosses devices, and nowhere else.

Each value of main lives where it was made: parameters and constants on the host, an external
call's results on its backend's device, a host op's results on the host. A reader on another
device gets one copy per (value, device), shared by every reader there; main's outputs come back
to the host.

    %1 = @onnxruntime_conv_1a2b(%x)                  ->  %0 = device_copy(%x, src="cpu", dst="onnxruntime")
    %2 = Softmax(%1)                                     %1 = @onnxruntime_conv_1a2b(%0)
                                                         %2 = device_copy(%1, src="onnxruntime", dst="cpu")
                                                         %3 = Softmax(%2)
"""

from __future__ import annotations

from ..ir import (Call, Constant, Expr, Function, GlobalVar, IRModule, Span, Tuple, TupleGetItem,
                  Var, post_order, with_children)
from ..analysis import map_bodies, value_name
from .devices import HOST


def _device_of_call(call: Call, mod: IRModule) -> str:
    if isinstance(call.op, GlobalVar):
        compiler = mod[call.op.name].attrs.get("Compiler")
        if compiler:
            from ..backend import get_backend

            return get_backend(compiler).device
    return HOST


def plan_devices(mod: IRModule) -> IRModule:
    """A module whose main, and every If, Loop and Scan body in it, copies tensors between
    devices explicitly. A body runs on the host: its parameters arrive there and its results
    go back there, so each body is planned on its own like main."""
    return mod.with_function("main", _plan_function(mod.main, mod))


def _plan_function(main: Function, mod: IRModule, scope: tuple = ()) -> Function:
    # Bodies first: regions inside them (issue 8) return tensors on their backends' devices.
    main = map_bodies(main, lambda body, inner: _plan_function(body, mod, inner), scope)
    body = main.body
    is_tuple = isinstance(body, Tuple) and len(main.attrs.get("output_names", ())) == len(body.fields)
    outputs = list(body.fields) if is_tuple else [body]
    device: dict[Expr, str] = {}
    new: dict[Expr, Expr] = {}
    copies: dict[tuple[Expr, str], Expr] = {}

    def on(value: Expr, dev: str) -> Expr:
        """``value`` (already rewritten) as seen from device ``dev``."""
        here = device[value]
        if here == dev:
            return value
        key = (value, dev)
        if key not in copies:
            name = value_name(value) or "value"
            copies[key] = Call("device_copy", (value,), {"src_device": here, "dst_device": dev},
                               value.type, Span(f"{name}/copy_to_{dev}", "device_copy", (name,)))
            device[copies[key]] = dev
        return copies[key]

    for e in post_order(outputs):
        if isinstance(e, (Var, Constant, GlobalVar)):
            new[e] = e
            device[e] = HOST
        elif isinstance(e, Call):
            dev = _device_of_call(e, mod)
            args = [on(new[a], dev) for a in e.args if a is not None]
            rebuilt = with_children(e, args)
            new[e] = rebuilt
            device[rebuilt] = dev
        elif isinstance(e, TupleGetItem):
            inner = new[e.tuple_value]
            rebuilt = with_children(e, [inner])
            new[e] = rebuilt
            device[rebuilt] = device[inner]
        elif isinstance(e, Tuple):
            rebuilt = Tuple(tuple(on(new[f], HOST) for f in e.fields))
            new[e] = rebuilt
            device[rebuilt] = HOST
    outs = [on(new[o], HOST) for o in outputs]
    new_body = Tuple(tuple(outs)) if is_tuple else outs[0]
    return Function(main.params, new_body, main.attrs)
