"""Where a host kernel comes from: a hand-written numpy kernel, onnx.reference, or onnxruntime.

A kernel factory turns one Call into a callable ``(*arrays) -> tuple of arrays`` once, at build
time; the executor then calls it for every run. Omitted optional inputs arrive as None.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from ..ir import (Call, Constant, Function, Span, TensorType, Tuple, TupleGetItem, TupleType,
                  Var)
from . import onnx_bridge

Kernel = Callable[..., tuple]


@dataclass
class KernelContext:
    """What a kernel factory may need beyond the call: opsets, and a way to run a body."""

    opsets: dict[str, int]
    run_function: Callable[[Function, list], list] | None = None
    cache: dict[Any, Any] = field(default_factory=dict)
    copy_stats: Any = None  # byoc.runtime.devices.CopyStats of the executable, for device_copy
    threads: int | None = None  # the executable's thread count (None: leave BLAS alone)


KernelFactory = Callable[[Call, KernelContext], Kernel]


# numpy has no arithmetic of its own for these (ml_dtypes stores them); onnx.reference
# implements their ONNX semantics (saturation, rounding) exactly, so it takes them.
EXOTIC_DTYPES = {"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                 "float8_e8m0fnu", "uint4", "int4", "float4_e2m1fn", "uint2", "int2",
                 "float6_e2m3fn", "float6_e3m2fn"}


def _dtypes(call: Call) -> set[str]:
    types = [a.type for a in call.args if a is not None]
    types += list(call.type.fields) if isinstance(call.type, TupleType) else [call.type]
    out = {t.dtype for t in types if isinstance(t, TensorType) and t.dtype}
    if "to" in call.attrs and isinstance(call.attrs["to"], int):
        out.add(onnx_bridge.dtype_name(call.attrs["to"]) or "")
    return out


def hand(fn: Callable[..., tuple]) -> KernelFactory:
    """Factory for a numpy kernel ``fn(attrs, *inputs)``.

    A kernel declines a configuration it does not implement by raising NotImplementedError;
    the executor then runs that call on onnx.reference from then on. Exotic dtypes go there
    directly.
    """

    def factory(call: Call, ctx: KernelContext) -> Kernel:
        if _dtypes(call) & EXOTIC_DTYPES:
            return reference(call, ctx)
        attrs = dict(call.attrs)
        attrs["_num_outputs"] = onnx_bridge.num_outputs(call)
        attrs["_threads"] = ctx.threads  # for numpy's BLAS (hold_blas)
        # Which inputs are constants of the graph: a kernel may prepare those once (``once``).
        attrs["_constant"] = tuple(isinstance(a, Constant) for a in call.args)
        return functools.partial(fn, attrs)

    return factory


def device_copy(call: Call, ctx: KernelContext) -> Kernel:
    """Move a tensor between devices (see byoc.runtime.devices), counting what it moves."""
    from ..runtime.devices import copy_kernel

    return copy_kernel(call.attrs["src_device"], call.attrs["dst_device"], ctx.copy_stats)


def guarded(op: str, factory: KernelFactory) -> KernelFactory:
    """``factory``'s kernel, refusing outputs bigger than byoc may allocate (see limits.py)."""
    from ..runtime import limits

    def make(call: Call, ctx: KernelContext) -> Kernel:
        kernel = factory(call, ctx)
        out_t = call.type.fields[0] if isinstance(call.type, TupleType) else call.type
        itemsize = np.dtype(out_t.dtype).itemsize if isinstance(out_t, TensorType) and \
            out_t.dtype and out_t.dtype != "object" else 8

        def run(*arrays):
            shape = limits.requested_shape(op, call.attrs, arrays)
            why = shape is not None and limits.too_big(shape, itemsize)
            if why:
                raise MemoryError(f"refused to allocate: {why}")
            return kernel(*arrays)

        return run

    return make


def one_node_model(call: Call, opsets: dict[str, int]) -> tuple[onnx.ModelProto, list[str]]:
    """A model of just this call, inputs i0.. and outputs o0.., dtypes fixed, shapes free."""
    from ..frontends.onnx.exporter import export_function

    params = [Var(f"i{k}", _loose(a.type)) for k, a in enumerate(call.args) if a is not None]
    it = iter(params)
    args = tuple(None if a is None else next(it) for a in call.args)
    n_out = onnx_bridge.num_outputs(call)
    outs = tuple(f"o{k}" for k in range(n_out))
    out_type = (TupleType(tuple(_loose(t) for t in call.type.fields))
                if isinstance(call.type, TupleType) else _loose(call.type))
    op = call.op if isinstance(call.op, str) else call.op_name
    node = Call(op, args, call.attrs, out_type, Span(call.span.name if call.span else "", op, outs))
    body = Tuple(tuple(TupleGetItem(node, i) for i in range(n_out))) if n_out > 1 else node
    func = Function(tuple(params), body, {"output_names": list(outs)})
    imports = dict(opsets)
    imports.setdefault(onnx_bridge.split_op(op)[0], 1)
    return export_function(func, imports), [p.name for p in params]


def _loose(t):
    """A type without its shape: kernels are reused across shapes, only dtypes are fixed."""
    return TensorType(None, t.dtype) if isinstance(t, TensorType) else t


def reference(call: Call, ctx: KernelContext) -> Kernel:
    """onnx.reference's implementation of the op: correct and slow, for the long tail."""
    from onnx.reference import ReferenceEvaluator

    model, names = one_node_model(call, ctx.opsets)
    evaluator = ReferenceEvaluator(model)

    def run(*arrays):
        feeds = {n: a for n, a in zip(names, (a for a in arrays if a is not None))}
        return tuple(np.asarray(r) if not isinstance(r, (list, dict)) else r
                     for r in evaluator.run(None, feeds))

    return run


def onnxruntime(call: Call, ctx: KernelContext) -> Kernel:
    """onnxruntime's kernel for the op, for contrib domains that onnx.reference lacks."""
    from ..runtime.ort_sessions import run_options
    from ..runtime.ort_sessions import session as ort_session

    model, names = one_node_model(call, ctx.opsets)
    session = ort_session(model, threads=ctx.threads or 1)
    quiet = run_options()

    def run(*arrays):
        feeds = {n: a for n, a in zip(names, (a for a in arrays if a is not None))}
        return tuple(session.run(None, feeds, quiet))

    return run
