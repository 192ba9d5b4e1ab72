"""The host executor: run a module's main, node by node, calling kernels and external functions.

    exe = byoc.build(mod)
    outputs = exe.run({"input": x})     # {onnx output name: array}

Inputs are checked against main's parameters before anything runs; a kernel that fails is
reported with the ONNX node's name and op.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import InputError, KernelError, RegionError
from ..ir import DEFAULTS, Call, Function, GlobalVar, IRModule, TensorType, TupleType
from ..op import registry
from ..op.host_kernels import KernelContext
from .capture import DebugRun, check_wanted, complete
from .devices import HOST, CopyStats, get_device
from .owned import owned_outputs
from .plan import CALL, GETITEM, Plan, make_plan
from .pycode import compile_plan
from .region_call import checked_region, compile_error, said
from .threads import BLAS, building
from .threads import resolve as resolve_threads


class Executable:
    """A module built for running: kernels made, plans laid out, external functions compiled."""

    def __init__(self, mod: IRModule, external: Mapping[str, Callable] | None = None,
                 threads: int | None = None):
        self.mod = mod
        # every engine's thread count (byoc.runtime.threads): host kernels' BLAS here, the
        # regions' by their backends at build()
        self.threads = resolve_threads(threads)
        opsets = dict(mod.attrs.get("opset_imports", {"": registry.CANONICAL_OPSET}))
        self.copy_stats = CopyStats({}, {})
        # Kernels reach back to run bodies through a weak method: a bound one would make every
        # executable a reference cycle, freed only by a full collection (a tune builds
        # hundreds; their engines' memory piled up to the machine's 24 GB).
        run_function = weakref.WeakMethod(self.run_function)
        self.ctx = KernelContext(opsets, run_function=lambda func, args: run_function()(func, args),
                                 copy_stats=self.copy_stats, threads=self.threads)
        self.external: dict[str, Callable] = dict(external or {})
        self.fallbacks: dict[str, str] = {}  # regions run on the host: build(fallback="host")
        self.moves: dict[str, str] = {}  # regions run on another backend: fallback="next"
        self._plans: dict[Function, Plan] = {}
        self._pycode: dict[int, Callable | None] = {}
        # Holds .probe only while run(..., capture=...) runs, in that run's thread: other
        # threads running the executable then feed no probe of theirs into it.
        self._local = threading.local()
        self.main_plan = self.plan(mod.main)
        self.output_names: list[str] = list(mod.main.attrs.get("output_names") or
                                            [f"output_{i}" for i in range(len(self.main_plan.output_slots))])

    # -- building ---------------------------------------------------------------------------
    def plan(self, func: Function) -> Plan:
        if func not in self._plans:
            self._plans[func] = make_plan(func, self.kernel_for)
        return self._plans[func]

    def kernel_for(self, call: Call) -> Callable:
        op = call.op
        if isinstance(op, GlobalVar):
            if op.name in self.external:
                return self._region_kernel(op.name)
            func = self.mod[op.name]
            return lambda *args, f=func: tuple(self._execute(self.plan(f), list(args)))
        if isinstance(op, Function):  # a composite: one node to a probe, as before
            return lambda *args, f=op: tuple(self._execute(self.plan(f), list(args)))
        entry = registry.lookup(op)
        span = call.span.name if call.span else None
        if entry is None:
            raise KernelError(f"no host kernel for op {op!r}", span, op)
        try:
            return entry.make_kernel(call, self.ctx)
        except Exception as exc:
            raise KernelError(f"cannot build its kernel: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}", span, op) from exc

    def _region_kernel(self, name: str) -> Callable:
        """The built region, its errors named and its results checked (region_call.py)."""
        func = self.mod[name]
        describe = None
        compiler = func.attrs.get("Compiler")
        if compiler:
            from ..backend import get_backend

            describe = get_device(get_backend(compiler).device).describe
        return checked_region(name, func, self.external[name], describe)

    # -- running ----------------------------------------------------------------------------
    def run_function(self, func: Function, args: list) -> list:
        """Run any function of the module (a body, a composite) on positional arrays.

        During ``run(..., capture=...)`` the If, Loop and Scan kernels' body runs (they call
        this) feed the probe too, each body's runs counted (see ``Probe.enter``)."""
        probe = getattr(self._local, "probe", None)
        if probe is None:
            return self._execute(self.plan(func), args)
        outer = probe.enter(func)
        # Captured parameters carry outer values under their outer names: the outer scope
        # recorded those, maybe from another run; only the body's own record gets them.
        n_formal = len(func.params) - int(func.attrs.get("captures", 0))
        try:
            for k, (p, a) in enumerate(zip(func.params, args)):
                probe.keep(p.name, a, flat=k < n_formal)
            return self._execute(self.plan(func), args, probe)
        finally:
            probe.recording, probe.current = outer

    def _host_value(self, call: Call, value: Any) -> Any:
        """A captured value that lives on a backend's device (an OrtValue), as an array."""
        device = HOST
        if call.op == "device_copy":
            device = call.attrs["dst_device"]
        elif isinstance(call.op, GlobalVar) and call.op.name in self.mod.functions:
            compiler = self.mod[call.op.name].attrs.get("Compiler")
            if compiler:
                from ..backend import get_backend

                device = get_backend(compiler).device
        return value if device == HOST else get_device(device).to_host(value)

    def _execute(self, plan: Plan, args: list, probe: Probe | None = None) -> list:
        if probe is None:
            compiled = self._compiled(plan)
            if compiled is not None:
                run, quiet, constants, kernels = compiled
                try:
                    if quiet:  # no numpy kernel to warn (a model in one C region)
                        return run(args, constants, kernels)
                    with np.errstate(all="ignore"):
                        return run(args, constants, kernels)
                except Exception:  # re-run interpreted: it reports (or recovers) per node
                    pass
        with np.errstate(all="ignore"):  # IEEE results (inf, nan) without warnings, once a run
            if probe is None:
                slots = self._slots(plan, args)
                self._loop(plan, slots)
            else:
                slots = self._slots(plan, args)
                self._probed_loop(plan, slots, probe)
                complete(plan.func, probe)  # named constants: no kernel computes them
        return [slots[s] for s in plan.output_slots]

    @staticmethod
    def _slots(plan: Plan, args: list) -> list:
        """The interpreter's value slots, parameters and constants filled in."""
        slots: list[Any] = [None] * plan.n_slots
        for s, a in zip(plan.param_slots, args):
            slots[s] = a
        for s, v in plan.constants:
            slots[s] = v
        return slots

    def _compiled(self, plan: Plan) -> tuple | None:
        """The plan as one Python function (pycode.py) with what it takes: (run, quiet,
        constants, kernels); quiet when every kernel is a region that says numpy warns of
        nothing in it (``fp_quiet``), so that the run needs no np.errstate. None if too big."""
        key = id(plan)
        if key not in self._pycode:
            run = compile_plan(plan)
            kernels = [c[1] for c in plan.code]
            quiet = all(getattr(c[1], "fp_quiet", False) for c in plan.code if c[0] == CALL)
            self._pycode[key] = None if run is None else (
                run, quiet, [v for _, v in plan.constants], kernels)
        return self._pycode[key]

    def _loop(self, plan: Plan, slots: list) -> None:
        """The hot loop: kept small, the rare paths (errors, fallbacks) are methods."""
        code = plan.code
        for kind, fn, args, out, free, unpack, k in code:
            if kind == CALL:
                try:
                    result = fn(*[slots[a] for a in args])
                except Exception as exc:
                    result = self._recover(plan, k, exc, [slots[a] for a in args])
                slots[out] = result[0] if unpack else result
            elif kind == GETITEM:
                slots[out] = slots[args[0]][fn]
            else:
                slots[out] = tuple([slots[a] for a in args])
            for s in free:
                slots[s] = None

    def _probed_loop(self, plan: Plan, slots: list, probe: Probe) -> None:
        clock = time.perf_counter
        for kind, fn, args, out, free, unpack, k in plan.code:
            if kind == CALL:
                vals = [slots[a] for a in args]
                started = clock()
                try:
                    result = plan.code[k][1](*vals)
                except Exception as exc:
                    result = self._recover(plan, k, exc, vals)
                value = result[0] if unpack else result
                slots[out] = value
                probe.record(plan.instrs[k].call, value, started, clock() - started)
            elif kind == GETITEM:
                slots[out] = slots[args[0]][fn]
            else:
                slots[out] = tuple([slots[a] for a in args])
            for s in free:
                slots[s] = None

    def _recover(self, plan: Plan, k: int, exc: Exception, vals: list) -> tuple:
        """A kernel raised: a numpy kernel declining (NotImplementedError) hands the call to
        onnx.reference for good; anything else becomes a KernelError naming the node."""
        call = plan.instrs[k].call
        entry = registry.lookup(call.op) if isinstance(call.op, str) else None
        if isinstance(exc, NotImplementedError) and entry is not None and entry.kernel_source == "numpy":
            from ..op.host_kernels import reference

            fn = reference(call, self.ctx)
            plan.instrs[k].fn = fn
            plan.code[k] = (CALL, fn, *plan.code[k][2:])
            self._pycode.pop(id(plan), None)  # its kernels list held the one replaced
            try:
                return fn(*vals)
            except Exception as again:
                exc = again
        if isinstance(exc, (KernelError, RegionError)):
            raise exc
        raise KernelError(f"{type(exc).__name__}: {_first_line(exc)}",
                          call.span.name if call.span else None, call.op_name) from exc

    def run(self, inputs: Mapping[str, Any], capture: str | Iterable[str] | None = None, *,
            iteration: int = 0):
        """Run main on ``inputs`` (by ONNX input name); outputs by ONNX output name.

        With ``capture="all"`` (or a list of ONNX value names) it returns a ``DebugRun``: the
        outputs, a copy of every (or each named) tensor main computed, by its ONNX value name,
        and the time each node or region took, by span. Tensors of If, Loop and Scan bodies
        are captured from one run of each body: its ``iteration``-th (from 0; an If branch
        counts the times it was taken), parameters included; times add up over all runs.
        """
        args = check_inputs(self.mod.main, inputs)
        try:
            if capture is None:
                outs = owned_outputs(self._execute(self.main_plan, args), args)
                return dict(zip(self.output_names, outs))
            return self._debug_run(args, capture, iteration)
        finally:
            if BLAS.changed:  # a host kernel held numpy's BLAS: the program's count back
                BLAS.restore()

    def _debug_run(self, args: list, capture: str | Iterable[str], iteration: int) -> DebugRun:
        wanted = None if capture == "all" else set([capture] if isinstance(capture, str) else capture)
        if wanted:
            check_wanted(self.mod, wanted)
        probe = Probe(wanted, iteration, self._host_value)
        for p, a in zip(self.mod.main.params, args):
            probe.keep(p.name, a)
        self._local.probe = probe
        try:
            outs = owned_outputs(self._execute(self.main_plan, args, probe), args)
        finally:
            self._local.probe = None
        # A captured outer constant is a value only inside its body: its record has it.
        missing = [] if wanted is None else sorted(
            wanted - probe.tensors.keys() - set().union(*probe.bodies.values()))
        if missing:
            raise InputError(f"capture: no value named {missing[0]!r} is computed in main, or "
                             f"in run {iteration} of a body on these inputs")
        return DebugRun(dict(zip(self.output_names, outs)), probe.tensors, probe.times,
                        probe.events, probe.bodies)


class Probe:
    """Collects what a debug run sees: copies of tensors by ONNX name, times by span.

    Tensors are copied as they are made, so nothing a kernel or backend later reuses or
    overwrites can change what was captured.
    """

    def __init__(self, wanted: set[str] | None, iteration: int = 0,
                 to_host: Callable[[Call, Any], Any] | None = None):
        self.wanted = wanted
        self.to_host = to_host  # a value on a backend's device (an OrtValue) as an array
        self.iteration = iteration
        self.runs: dict[Function, int] = {}  # body -> how many times it started
        self.recording = True  # False inside a body run other than the chosen one
        self.bodies: dict[Function, dict[str, np.ndarray]] = {}  # each body's chosen run
        self.current: dict[str, np.ndarray] | None = None  # the record of the running body
        self.tensors: dict[str, np.ndarray] = {}
        self.times: dict[str, float] = {}
        self.events: list[tuple[str, str, float, float]] = []  # (span, op, start, seconds)

    def enter(self, body: Function) -> tuple[bool, dict[str, np.ndarray] | None]:
        """A run of ``body`` starts: count it, record its tensors only if it is the chosen
        run of this body (whichever run of an outer body holds it), and return the recording
        state to restore when it ends."""
        k = self.runs.get(body, 0)
        self.runs[body] = k + 1
        outer = self.recording, self.current
        self.recording = k == self.iteration
        self.current = self.bodies.setdefault(body, {}) if self.recording else None
        return outer

    def keep(self, name: str, value: Any, flat: bool = True, copy: bool = True) -> None:
        """Copy ``value`` into the record of the body running (if it is the chosen run) and,
        unless ``flat`` is False, into the flat ``tensors``."""
        if not self.recording:
            return
        if name and (self.wanted is None or name in self.wanted) and isinstance(value, np.ndarray):
            kept = np.array(value, copy=True) if copy else value  # a constant: lent read-only
            if flat:
                self.tensors[name] = kept
            if self.current is not None:
                self.current[name] = kept

    def record(self, call: Call, value: Any, started: float, seconds: float) -> None:
        span = call.span
        if span is None:
            return
        self.times[span.name] = self.times.get(span.name, 0.0) + seconds
        self.events.append((span.name, call.op_name, started, seconds))
        if isinstance(call.type, TupleType):
            for name, v in zip(span.outputs, value):
                self.keep(name, self._on_host(call, v))
        elif span.outputs:
            self.keep(span.outputs[0], self._on_host(call, value))

    def _on_host(self, call: Call, value: Any) -> Any:
        if isinstance(value, np.ndarray) or self.to_host is None or value is None:
            return value
        return self.to_host(call, value)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


def check_inputs(func: Function, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Main's arguments from named inputs, refused with a clear error when they do not fit; a
    parameter with a default (``DEFAULTS``) takes it when not fed."""
    args = _fitting_arrays(func, inputs)
    if args is not None:
        return args
    names = [p.name for p in func.params]
    unknown = [k for k in inputs if k not in names]
    if unknown:
        raise InputError(f"unknown input {unknown[0]!r}; the model's inputs are {names}")
    defaults = func.attrs.get(DEFAULTS) or {}
    missing = [n for n in names if n not in inputs and n not in defaults]
    if missing:
        raise InputError(f"missing input {missing[0]!r}; the model's inputs are {names}")
    bound: dict[str, tuple[int, str]] = {}
    args = []
    for p in func.params:
        value = inputs[p.name] if p.name in inputs else defaults[p.name]
        t = p.type
        if not isinstance(t, TensorType):  # sequences, optionals: passed through as they are
            args.append(value)
            continue
        value = _as_array(p.name, value, t)
        if not value.dtype.isnative:  # big-endian data: C and onnxruntime read native bytes
            value = value.astype(value.dtype.newbyteorder("="))
        if isinstance(t, TensorType):
            if t.dtype is not None and value.dtype != _np_dtype(t.dtype) and not (
                    t.dtype == "object" and value.dtype.kind in "OUS"):
                raise InputError(f"input {p.name!r} must be {t.dtype}, got {value.dtype.name}")
            if t.dtype == "object" and value.dtype.kind in "US":  # strings as ONNX holds them
                value = value.astype(object)
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


_SPECS: dict[int, tuple[Function, list | None]] = {}


def _fitting_arrays(func: Function, inputs: Mapping[str, Any]) -> list[np.ndarray] | None:
    """The common case, checked in a few comparisons a parameter: every input fed as a native
    array of the declared dtype and shape. None sends anything else through the full check
    (which converts, takes defaults or says what is wrong)."""
    entry = _SPECS.get(id(func))
    if entry is None or entry[0] is not func:
        if len(_SPECS) > 64:
            _SPECS.clear()
        entry = _SPECS[id(func)] = (func, _array_spec(func))
    spec = entry[1]
    if spec is None or len(inputs) != len(spec):
        return None
    bound: dict[str, int] = {}
    args = []
    for name, dtype, shape in spec:
        value = inputs.get(name)
        if type(value) is not np.ndarray or value.dtype is not dtype or value.ndim != len(shape):
            return None
        for want, got in zip(shape, value.shape):
            if want != got and (type(want) is not str or bound.setdefault(want, got) != got):
                return None
        args.append(value)
    return args


def _array_spec(func: Function) -> list | None:
    """(name, numpy dtype, shape) per parameter, or None if one is not a plain tensor."""
    spec = []
    for k, p in enumerate(func.params):
        t = p.type
        if not isinstance(t, TensorType) or t.shape is None or t.dtype in (None, "object") \
                or any(d is not None and not isinstance(d, (int, str)) for d in t.shape) \
                or not isinstance(_np_dtype(t.dtype), np.dtype):
            return None
        # an unknown dim ("?") binds a name no other dim has: any size fits
        shape = tuple(f"?{k}.{i}" if d is None else d for i, d in enumerate(t.shape))
        spec.append((p.name, _np_dtype(t.dtype), shape))
    return spec


@functools.lru_cache(maxsize=64)
def _np_dtype(name: str) -> np.dtype | str:
    """The numpy dtype an ONNX dtype name means (compared in C: a dtype's ``.name`` is built
    in Python on each read); the name itself where numpy has no such dtype."""
    try:
        return np.dtype(name)
    except TypeError:
        return name


def _as_array(name: str, value: Any, t: TensorType) -> np.ndarray:
    """An input's value as an array; one no array of its type comes from (None, a dict, a
    Python scalar, a string for numbers, a ragged list) refused in one line naming the input,
    what it got, and what it wants."""
    if isinstance(value, np.ndarray):
        return value
    wants = (f"it wants an array of {t.dtype or 'any dtype'}, shape "
             f"{'any' if t.shape is None else _fmt(t.shape)}")
    if value is None:
        raise InputError(f"input {name!r} is None; {wants}")
    if isinstance(value, np.generic):  # a numpy scalar has its dtype: a rank-0 array
        return np.asarray(value)
    kind = type(value).__name__
    kind = f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"
    numbers = t.dtype is not None and t.dtype != "object"
    if isinstance(value, (bool, int, float, complex)):  # onnxruntime takes none either
        hint = f" (np.array(value, dtype={t.dtype!r}))" if numbers and t.shape == () else ""
        raise InputError(f"input {name!r} is a Python {type(value).__name__}; {wants}{hint}")
    if isinstance(value, (str, bytes)) and numbers:
        raise InputError(f"input {name!r} is a string; {wants}")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # a ragged list, objects numpy cannot hold
        raise InputError(f"input {name!r} cannot be made into an array: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                         ) from None
    if array.dtype == object and numbers:  # a dict, a set, a list of them: Python objects
        raise InputError(f"input {name!r} is {kind}, which numpy holds only as a Python object; "
                         f"{wants}")
    if numbers and array.dtype.name != t.dtype:
        raise InputError(f"input {name!r} is {kind} numpy reads as {array.dtype.name}; {wants} "
                         f"(np.asarray(value, dtype={t.dtype!r}))")
    return array


def _fmt(shape) -> str:
    """A declared shape in a message: a dim's name shown escaped, so no newline in it cuts
    the message's one line short."""
    from ..ir.types import dims_text
    from ..report import show

    return dims_text(shape, show)


def build(mod: IRModule, *, fallback: str | None = None, threads: int | None = None,
          **options: Any) -> Executable:
    """Build a module for running on the host (external functions by their backends).

    ``threads``: how many threads every engine may use (default: ``byoc.set_threads``, else
    ``$BYOC_THREADS``, else the physical cores; see ``byoc/runtime/threads.py``). Backends
    read it in their compile with ``byoc.runtime.threads.build_threads()``.

    ``fallback="host"``: a region its backend cannot build runs on the host instead, with a
    warning; ``exe.fallbacks`` says which and why (see ``runtime/fallback.py``).
    ``fallback="next"``: first the next backend the module was partitioned for that takes the
    region (at build or at its first run); ``exe.moves`` says which and why.
    """
    from ..backend import get_backend
    from ..passes.reject import inline_regions  # as a rejected region: back into its caller
    from .fallback import (HostOnFailure, NextOnFailure, build_elsewhere, cannot_build,
                           check_fallback)

    check_fallback(fallback)
    threads = resolve_threads(threads)
    external: dict[str, Callable] = {}
    fallbacks: dict[str, str] = {}
    moves: dict[str, str] = {}
    retargeted: dict[str, Function] = {}
    listed = list(mod.attrs.get("partition_backends", ()))
    off_host = False
    for name, func in mod.functions.items():
        compiler = func.attrs.get("Compiler")
        if name != "main" and compiler:
            backend = get_backend(compiler)
            try:
                with building(threads):
                    external[name] = backend.compile(func)
            except Exception as exc:  # any backend's failure is its own, named
                if fallback is None:
                    raise compile_error(compiler, name, func, exc) from exc
                found = None
                if fallback == "next":
                    with building(threads):
                        found = build_elsewhere(name, func, compiler, listed, exc)
                if found is None:
                    fallbacks[name] = cannot_build(name, compiler, said(exc))
                    continue
                backend, func, external[name], moves[name] = found
                retargeted[name] = func
            if fallback == "host":  # a backend building per shape may fail at a call
                external[name] = HostOnFailure(name, compiler, func, external[name], fallbacks,
                                               threads)
            elif fallback == "next":
                external[name] = NextOnFailure(name, func.attrs["Compiler"], func,
                                               external[name], listed, moves, fallbacks,
                                               threads)
            off_host = off_host or backend.device != HOST
    if retargeted:
        mod = IRModule({**mod.functions, **retargeted}, dict(mod.attrs))
    mod = inline_regions(mod, fallbacks)
    if off_host:
        from .device_plan import plan_devices

        mod = plan_devices(mod)
    exe = Executable(mod, external, threads)
    exe.fallbacks = fallbacks
    exe.moves = moves
    return exe
