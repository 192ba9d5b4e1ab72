"""A compiled region: called with numpy arrays, specialized and built per shape signature.

    run = CompiledRegion(func)      # what the backend's compile(func) returns
    outputs = run(x, w)             # a tuple of arrays

The first call with given shapes and dtypes generates C for them, builds it (or finds it in the
cache) and keeps it; later calls with the same signature go straight to C. Arrays are passed
with ``ffi.from_buffer`` (made C-contiguous first, without a copy when they are); outputs are
allocated with numpy and filled by C; the workspace is reused from call to call, and so is a
large output once nothing but the region refers to it (``_Recycler``).
A region the generator cannot specialize for some shapes runs on the host for those, with a
warning; a C compile error is raised (``byoc.codegen.CompileError``).
"""

from __future__ import annotations

import math
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from byoc.codegen import build_cache, c_type
from byoc.ir import Function, TensorType
from byoc.runtime.threads import build_threads, building

from . import pool, runtime_c
from .codegen import SYMBOL, Generated, generate, node_labels, prepared, region_name
from .emitter import Unsupported

Signature = tuple[tuple[tuple[int, ...], np.dtype], ...]


def _decl(dtype: str) -> str:
    return c_type(dtype) + "[]"


class _Recycler:
    """The outputs of at least ``min_bytes`` of the last call, handed out again once nothing
    else refers to them. A fresh array costs its page faults when first written (about 4 ms for
    64 MB, half of the 8-op chain's time), and malloc maps arrays that big anew on every call;
    an array only this holds (no reference, view or weak reference elsewhere) is one no caller
    can see being reused. The count such an array shows is measured, not assumed.

    What all regions keep between calls is capped (``budget``, process-wide): a model of many
    regions must not hold every big intermediate alive, undoing the executor's frees."""

    min_bytes = 1 << 20
    budget = 1 << 26  # 64 MiB: one 16M-float output
    _held = 0  # bytes kept by all recyclers, under _budget_lock
    _budget_lock = threading.Lock()

    def __init__(self) -> None:
        self._kept: list[np.ndarray | None] = []
        self._kept_bytes = 0
        self._lock = threading.Lock()
        self._alone = self._count([np.empty(0)], 0)

    @staticmethod
    def _count(kept: list, k: int) -> int:
        return sys.getrefcount(kept[k])

    def outputs(self, specs: Sequence[tuple[tuple[int, ...], np.dtype, str]]) -> list[np.ndarray]:
        with self._lock:  # a concurrent call finds nothing kept and allocates
            kept, self._kept = self._kept, []
            self._release()
        outs = []
        for k, (shape, dtype, _) in enumerate(specs):
            if (k < len(kept) and kept[k] is not None and self._count(kept, k) == self._alone
                    and not weakref.getweakrefcount(kept[k])):
                outs.append(kept[k])
            else:
                outs.append(np.empty(shape, dtype))
        return outs

    def keep(self, outs: Sequence[np.ndarray]) -> None:
        big = [o if o.nbytes >= self.min_bytes else None for o in outs]
        size = sum(o.nbytes for o in big if o is not None)
        if not size:
            return
        with self._lock, _Recycler._budget_lock:
            if _Recycler._held - self._kept_bytes + size > self.budget:
                return  # over the cap: these are freed as usual
            _Recycler._held += size - self._kept_bytes
            self._kept, self._kept_bytes = big, size

    def __del__(self) -> None:  # a region dropped with outputs kept: their bytes come back
        self._release()

    def _release(self) -> None:
        """Forget what is kept (under self._lock) and give its bytes back to the budget."""
        with _Recycler._budget_lock:
            _Recycler._held -= self._kept_bytes
        self._kept_bytes = 0


@dataclass(frozen=True)
class KernelTimes:
    """One profiled call of a region: its kernels (label, ONNX nodes), when the first started
    (seconds on ``time.perf_counter``'s clock) and how long each took."""

    kernels: tuple[tuple[str, tuple[str, ...]], ...]
    start: float
    seconds: np.ndarray


class Specialization:
    """One build of a region for one signature: the C function and its constant pointers.

    A call costs a few microseconds: the C types of every argument are worked out here once,
    and workspaces are kept with their cffi pointers for the next call.
    """

    def __init__(self, generated: Generated, module: ModuleType, sig: Signature, threads: int):
        self.generated = generated
        self.threads = threads
        self.module = module
        self.on_stamps: Callable[[Generated, np.ndarray], None] | None = None
        pool.attach(module)
        self._use_threads = pool.module().lib.byoc_pool_set_threads
        self._fn = getattr(module.lib, SYMBOL)
        self._ffi = ffi = module.ffi
        self._keep = [np.asarray(c, order="C") for c in generated.constants]
        self._buffers = [ffi.from_buffer(_decl(c.dtype.name), c) for c in self._keep]
        self._consts = ffi.new("void *[]", [ffi.cast("void *", b) for b in self._buffers]
                               or [ffi.NULL])  # the buffers stay alive beside the table
        # cffi types, not their names: from_buffer looks a name up on every call
        self._in_decls = [ffi.typeof(_decl(dtype.name)) for _, dtype in sig]
        self._outs = [(tuple(t.shape), np.dtype(t.dtype), ffi.typeof(_decl(t.dtype)))
                      for t in generated.out_types]
        self._spare: list[tuple[np.ndarray, object]] = []
        self._arg_table = generated.arg_table  # inputs and outputs in one array (many)
        # Only outputs of min_bytes or more are ever kept: regions with none skip the recycler
        # (and its locks) on every call.
        big = any(math.prod(shape) * dtype.itemsize >= _Recycler.min_bytes
                  for shape, dtype, _ in self._outs)
        self._recycler = _Recycler() if big else None

    def __call__(self, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        recycler = self._recycler
        if recycler is None:
            return self.run_into(arrays, [np.empty(shape, dtype) for shape, dtype, _ in self._outs])
        outs = recycler.outputs(self._outs)
        result = self.run_into(arrays, outs)
        recycler.keep(outs)
        return result

    def run_into(self, arrays: Sequence[np.ndarray], outs: Sequence[np.ndarray]
                 ) -> tuple[np.ndarray, ...]:
        """The call into given C-contiguous outputs of the right shapes and dtypes (the
        benchmarks time the kernel alone this way, without a fresh array's page faults)."""
        ptr = self._ffi.from_buffer
        try:  # one workspace per concurrent call, reused afterwards (list.pop is atomic)
            ws = self._spare.pop()
        except IndexError:
            ws = self._workspace()
        try:
            self._use_threads(self.threads)  # the pool's count for this thread's call
            pointers = [ptr(d, a) for d, a in zip(self._in_decls, arrays)]
            pointers += [ptr(d, o) for (_, _, d), o in zip(self._outs, outs)]
            if self._arg_table:  # the buffers stay alive in ``pointers`` beside the table
                self._fn(self._ffi.new("void *[]", pointers), self._consts, ws[1])
            else:
                self._fn(*pointers, self._consts, ws[1])
            if self.on_stamps is not None:  # built for --profile: the kernels' clock reads
                g = self.generated
                self.on_stamps(g, np.frombuffer(ws[0], np.int64, len(g.kernels) + 1, g.stamps))
        finally:
            self._spare.append(ws)
        return tuple(outs)

    def _workspace(self) -> tuple[np.ndarray, object]:
        array = np.empty(self.generated.workspace, np.uint8)
        return array, self._ffi.from_buffer("char[]", array)


class CompiledRegion:
    """The callable a region compiles to (see the module docstring).

    ``generate`` writes the C for one signature; a backend with its own generator (native)
    subclasses and sets it, keeping the specialization, the cache and the calling convention.
    ``value_params`` names the parameters whose values, not only shapes, key a specialization
    (native's shape values), and ``specialize`` rewrites the function for one such key.

    With ``profiling`` on (``byoc.profile`` sets it), calls run a build with each kernel timed
    (``Stamps``) and append ``KernelTimes`` to ``kernel_log``; off, the plain build runs.
    """

    generate: Callable[[Function, Sequence[TensorType]], Generated] = staticmethod(generate)
    value_params: Callable[[Function], tuple[int, ...]] = staticmethod(lambda func: ())
    specialize: Callable[[Function, Sequence[TensorType], dict[int, np.ndarray]], Function] = \
        staticmethod(lambda func, types, values: func)
    prepare: Callable[[Function], Function] = staticmethod(lambda func: func)  # before folding
    # Its calls leave numpy nothing to warn of: C, or a host fallback whose executor quiets
    # numpy itself; the executor then runs a plan of such regions without np.errstate.
    fp_quiet = True

    def __init__(self, func: Function, threads: int | None = None):
        self.func = self._folded(func)
        self.name = region_name(func)
        self.threads = build_threads() if threads is None else threads
        self.profiling = False
        self.kernel_log: list[KernelTimes] = []
        self._variants: dict[object, Callable[[Sequence[np.ndarray]], tuple]] = {}
        self._lock = threading.Lock()
        self._by_value = self.value_params(self.func)
        declared = [p.type for p in func.params]
        if not self._by_value and all(isinstance(t, TensorType) and t.is_static and t.dtype
                                      for t in declared):
            # Known shapes: build now, so that build() reports compile errors and the cache
            # is warm before the first run.
            sig = tuple((tuple(t.shape), np.dtype(t.dtype))  # type: ignore[union-attr]
                        for t in declared)
            self._specialize(sig, sig, ())

    @classmethod
    def _folded(cls, func: Function) -> Function:
        """``func`` prepared, its constant calls folded and its wide ops made trees
        (``codegen.prepared``), its ONNX nodes listed first (the C's header names them all,
        folded or not)."""
        return prepared(cls.prepare(func.with_attrs(onnx_nodes=node_labels(func))))

    @classmethod
    def source_for(cls, func: Function, arrays: Sequence[np.ndarray]) -> Generated:
        """The C this backend generates for ``func`` called with ``arrays`` (their shapes,
        dtypes and, for value parameters, values), without building it; ``Unsupported`` if it
        would run them on the host."""
        func = cls._folded(func)
        arrays = [np.asarray(a, order="C") for a in arrays]
        types = [TensorType(a.shape, a.dtype.name) for a in arrays]
        values = {k: arrays[k] for k in cls.value_params(func)}
        return cls.generate(cls.specialize(func, types, values), types)

    def __call__(self, *arrays) -> tuple[np.ndarray, ...]:
        # np.asarray(order="C") rather than ascontiguousarray, which makes a 0-d array 1-d.
        arrays = [np.asarray(a, order="C") for a in arrays]  # a list: no generator to run
        return self.variant(arrays)(arrays)

    def variant(self, arrays: Sequence[np.ndarray]) -> Callable[[Sequence[np.ndarray]], tuple]:
        """What runs these (C-contiguous) arrays: a ``Specialization``, built on first use, or
        the host's fallback."""
        sig = tuple([(a.shape, a.dtype) for a in arrays])
        key = (sig, *(arrays[k].tobytes() for k in self._by_value)) if self._by_value else sig
        if self.profiling:
            key = ("profile", key)
        return self._variants.get(key) or self._specialize(sig, key, arrays)

    @property
    def signatures(self) -> int:
        """How many shape signatures it was specialized for so far (in C or on the host)."""
        return len(self._variants)

    @property
    def specializations(self) -> list[Generated]:
        """The C generated so far, one per signature built."""
        return [v.generated for v in self._variants.values() if isinstance(v, Specialization)]

    def _specialize(self, sig: Signature, key: object, arrays: Sequence[np.ndarray]
                    ) -> Callable[[Sequence[np.ndarray]], tuple]:
        with self._lock:
            if key in self._variants:
                return self._variants[key]
            types = [TensorType(shape, dtype.name) for shape, dtype in sig]
            try:
                self._check_dtypes(types)
                values = {k: np.array(arrays[k]) for k in self._by_value}
                func = self.specialize(self.func, types, values)
                # a generator of one's own may not time kernels: asked only when profiling
                generated = (self.generate(func, types, profile=True) if self.profiling
                             else self.generate(func, types))
            except Unsupported as exc:
                variant = self._host(sig, exc)
            else:
                objects = ((build_cache.build_object(runtime_c.LIBRARY),)
                           if generated.library else ())
                module = build_cache.build(generated.source,
                                           f"{generated.cdef}\n{runtime_c.ATTACH_CDEF}",
                                           region=self.name, objects=objects)
                variant = Specialization(generated, module, sig, self.threads)
                if generated.stamps >= 0:
                    variant.on_stamps = self._log
            self._variants[key] = variant
            return variant

    def _log(self, generated: Generated, stamps: np.ndarray) -> None:
        self.kernel_log.append(KernelTimes(generated.kernels, stamps[0] * 1e-9,
                                           np.diff(stamps) * 1e-9))

    def _check_dtypes(self, types: list[TensorType]) -> None:
        """The support checks saw the declared dtypes; arrays of others are not what they took."""
        for p, t in zip(self.func.params, types):
            declared = getattr(p.type, "dtype", None)
            if declared is not None and declared != t.dtype:
                raise Unsupported(f"input {p.name!r} is {t.dtype}, the region takes {declared}")

    def _host(self, sig: Signature, why: Exception) -> Callable[[Sequence[np.ndarray]], tuple]:
        from byoc.backends.reference import compile_region

        shapes = ", ".join(f"{d.name}{list(s)}" for s, d in sig)
        warnings.warn(f"ccompiler: region {self.name!r} runs on the host for ({shapes}): {why}",
                      RuntimeWarning, stacklevel=3)
        with building(self.threads):  # a call, not build(): the region's own count
            run = compile_region(self.func)
        return lambda arrays: tuple(run(*arrays))


def compile_region(func: Function) -> CompiledRegion:
    """The backend's compile: a callable from arrays to a tuple of arrays."""
    return CompiledRegion(func)
