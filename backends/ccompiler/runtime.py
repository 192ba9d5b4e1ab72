"""A compiled region: called with numpy arrays, specialized and built per shape signature.

    run = CompiledRegion(func)      # what the backend's compile(func) returns
    outputs = run(x, w)             # a tuple of arrays

The first call with given shapes and dtypes generates C for them, builds it (or finds it in the
cache) and keeps it; later calls with the same signature go straight to C. Arrays are passed
with ``ffi.from_buffer`` (made C-contiguous first, without a copy when they are); outputs are
allocated with numpy and filled by C; the workspace is reused from call to call.
A region the generator cannot specialize for some shapes runs on the host for those, with a
warning; a C compile error is raised (``byoc.codegen.CompileError``).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np

from byoc.codegen import build_cache, c_type
from byoc.ir import Function, TensorType

from . import runtime_c
from .codegen import SYMBOL, Generated, generate, region_name
from .emitter import Unsupported

Signature = tuple[tuple[tuple[int, ...], str], ...]


class Specialization:
    """One build of a region for one signature: the C function and its constant pointers."""

    def __init__(self, generated: Generated, module: ModuleType):
        self.generated = generated
        self._fn = getattr(module.lib, SYMBOL)
        self._ffi = module.ffi
        self._keep = [np.ascontiguousarray(c) for c in generated.constants]
        self._consts = [self._ptr(c) for c in self._keep]
        self._outs = [(tuple(t.shape), np.dtype(t.dtype)) for t in generated.out_types]
        self._spare: list[np.ndarray] = []
        self._lock = threading.Lock()

    def _ptr(self, array: np.ndarray):
        return self._ffi.from_buffer(c_type(array.dtype.name) + "[]", array)

    def __call__(self, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        outs = [np.empty(shape, dtype) for shape, dtype in self._outs]
        with self._lock:  # one workspace per concurrent call, reused afterwards
            ws = self._spare.pop() if self._spare else np.empty(self.generated.workspace, np.uint8)
        try:
            self._fn(*[self._ptr(a) for a in arrays], *self._consts,
                     *[self._ptr(o) for o in outs], self._ffi.from_buffer("char[]", ws))
        finally:
            with self._lock:
                self._spare.append(ws)
        return tuple(outs)


class CompiledRegion:
    """The callable a region compiles to (see the module docstring)."""

    def __init__(self, func: Function):
        self.func = func
        self.name = region_name(func)
        self._variants: dict[Signature, Callable[[Sequence[np.ndarray]], tuple]] = {}
        self._lock = threading.Lock()
        declared = [p.type for p in func.params]
        if all(isinstance(t, TensorType) and t.is_static and t.dtype for t in declared):
            # Known shapes: build now, so that build() reports compile errors and the cache
            # is warm before the first run.
            sig = tuple((tuple(t.shape), t.dtype) for t in declared)  # type: ignore[union-attr]
            self._specialize(sig)

    def __call__(self, *arrays) -> tuple[np.ndarray, ...]:
        arrays = tuple(np.ascontiguousarray(a) for a in arrays)
        sig = tuple((a.shape, a.dtype.name) for a in arrays)
        variant = self._variants.get(sig) or self._specialize(sig)
        return variant(arrays)

    @property
    def specializations(self) -> list[Generated]:
        """The C generated so far, one per signature built."""
        return [v.generated for v in self._variants.values() if isinstance(v, Specialization)]

    def _specialize(self, sig: Signature) -> Callable[[Sequence[np.ndarray]], tuple]:
        with self._lock:
            if sig in self._variants:
                return self._variants[sig]
            types = [TensorType(shape, dtype) for shape, dtype in sig]
            try:
                generated = generate(self.func, types)
            except Unsupported as exc:
                variant = self._host(sig, exc)
            else:
                objects = (build_cache.build_object(runtime_c.LIBRARY),) if generated.library else ()
                module = build_cache.build(generated.source, generated.cdef, region=self.name,
                                           objects=objects)
                variant = Specialization(generated, module)
            self._variants[sig] = variant
            return variant

    def _host(self, sig: Signature, why: Exception) -> Callable[[Sequence[np.ndarray]], tuple]:
        from byoc.backends.reference import compile_region

        shapes = ", ".join(f"{d}{list(s)}" for s, d in sig)
        warnings.warn(f"ccompiler: region {self.name!r} runs on the host for ({shapes}): {why}",
                      RuntimeWarning, stacklevel=3)
        run = compile_region(self.func)
        return lambda arrays: tuple(run(*arrays))


def compile_region(func: Function) -> CompiledRegion:
    """The backend's compile: a callable from arrays to a tuple of arrays."""
    return CompiledRegion(func)
