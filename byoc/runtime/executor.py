"""The host executor: run a module's main, node by node, calling kernels and external functions.

    exe = byoc.build(mod)
    outputs = exe.run({"input": x})     # {onnx output name: array}

Inputs are checked against main's parameters before anything runs; a kernel that fails is
reported with the ONNX node's name and op.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import InputError, KernelError
from ..ir import Call, Function, GlobalVar, IRModule, TensorType, TupleType
from ..op import registry
from ..op.host_kernels import KernelContext
from .plan import CALL, GETITEM, Plan, make_plan


class Executable:
    """A module built for running: kernels made, plans laid out, external functions compiled."""

    def __init__(self, mod: IRModule, external: Mapping[str, Callable] | None = None):
        self.mod = mod
        opsets = dict(mod.attrs.get("opset_imports", {"": registry.CANONICAL_OPSET}))
        self.ctx = KernelContext(opsets, run_function=self.run_function)
        self.external: dict[str, Callable] = dict(external or {})
        self._plans: dict[int, Plan] = {}
        self.main_plan = self.plan(mod.main)
        self.output_names: list[str] = list(mod.main.attrs.get("output_names") or
                                            [f"output_{i}" for i in range(len(self.main_plan.output_slots))])

    # -- building ---------------------------------------------------------------------------
    def plan(self, func: Function) -> Plan:
        key = id(func)
        if key not in self._plans:
            self._plans[key] = make_plan(func, self.kernel_for)
        return self._plans[key]

    def kernel_for(self, call: Call) -> Callable:
        op = call.op
        if isinstance(op, GlobalVar):
            if op.name in self.external:
                return _as_tuple_fn(self.external[op.name])
            func = self.mod[op.name]
            return lambda *args, f=func: tuple(self.run_function(f, list(args)))
        if isinstance(op, Function):
            return lambda *args, f=op: tuple(self.run_function(f, list(args)))
        entry = registry.lookup(op)
        span = call.span.name if call.span else None
        if entry is None:
            raise KernelError(f"no host kernel for op {op!r}", span, op)
        try:
            return entry.make_kernel(call, self.ctx)
        except Exception as exc:
            raise KernelError(f"cannot build its kernel: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}", span, op) from exc

    # -- running ----------------------------------------------------------------------------
    def run_function(self, func: Function, args: list) -> list:
        """Run any function of the module (a body, a composite) on positional arrays."""
        return self._execute(self.plan(func), args)

    def _execute(self, plan: Plan, args: list) -> list:
        slots: list[Any] = [None] * plan.n_slots
        for s, a in zip(plan.param_slots, args):
            slots[s] = a
        for s, v in plan.constants:
            slots[s] = v
        for ins in plan.instrs:
            if ins.kind == CALL:
                vals = [None if a < 0 else slots[a] for a in ins.args]
                try:
                    result = ins.fn(*vals)
                except KernelError:
                    raise
                except Exception as exc:
                    call = ins.call
                    raise KernelError(f"{type(exc).__name__}: {_first_line(exc)}",
                                      call.span.name if call.span else None, call.op_name) from exc
                if isinstance(ins.call.type, TupleType):
                    slots[ins.out] = result
                else:
                    slots[ins.out] = result[0]
            elif ins.kind == GETITEM:
                slots[ins.out] = slots[ins.args[0]][ins.fn]
            else:
                slots[ins.out] = tuple(slots[a] for a in ins.args)
            for s in ins.free:
                slots[s] = None
        return [slots[s] for s in plan.output_slots]

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run main on ``inputs`` (by ONNX input name); outputs by ONNX output name."""
        args = check_inputs(self.mod.main, inputs)
        outs = self._execute(self.main_plan, args)
        return dict(zip(self.output_names, outs))


def _as_tuple_fn(fn: Callable) -> Callable:
    def call(*args):
        out = fn(*args)
        return out if isinstance(out, tuple) else tuple(out) if isinstance(out, list) else (out,)

    return call


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


def check_inputs(func: Function, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Main's arguments from named inputs, refused with a clear error when they do not fit."""
    names = [p.name for p in func.params]
    unknown = [k for k in inputs if k not in names]
    if unknown:
        raise InputError(f"unknown input {unknown[0]!r}; the model's inputs are {names}")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise InputError(f"missing input {missing[0]!r}; the model's inputs are {names}")
    bound: dict[str, tuple[int, str]] = {}
    args = []
    for p in func.params:
        value = inputs[p.name]
        t = p.type
        if not isinstance(t, TensorType):  # sequences, optionals: passed through as they are
            args.append(value)
            continue
        if not isinstance(value, np.ndarray):
            value = np.asarray(value)
        if isinstance(t, TensorType):
            if t.dtype is not None and value.dtype.name != t.dtype and not (
                    t.dtype == "object" and value.dtype.kind in "OUS"):
                raise InputError(f"input {p.name!r} must be {t.dtype}, got {value.dtype.name}")
            if t.shape is not None:
                if value.ndim != len(t.shape):
                    raise InputError(f"input {p.name!r} must have rank {len(t.shape)} "
                                     f"(shape {_fmt(t.shape)}), got shape {value.shape}")
                for axis, (want, got) in enumerate(zip(t.shape, value.shape)):
                    if isinstance(want, int) and want != got:
                        raise InputError(f"input {p.name!r} must have shape {_fmt(t.shape)}, "
                                         f"got {value.shape} (dim {axis})")
                    if isinstance(want, str):
                        if want in bound and bound[want][0] != got:
                            other = bound[want][1]
                            raise InputError(f"input {p.name!r} dim {axis} is {got}, but dim "
                                             f"{want!r} is {bound[want][0]} in {other!r}")
                        bound.setdefault(want, (got, p.name))
        args.append(value)
    return args


def _fmt(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def build(mod: IRModule, **options: Any) -> Executable:
    """Build a module for running on the host (external functions by their backends)."""
    external: dict[str, Callable] = {}
    for name, func in mod.functions.items():
        compiler = func.attrs.get("Compiler")
        if name != "main" and compiler:
            from ..backend import get_backend

            external[name] = get_backend(compiler).compile(func)
    return Executable(mod, external)
