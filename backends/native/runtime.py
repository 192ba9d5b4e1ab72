"""A compiled native region: ccompiler's runtime (specialized per shape signature, built
through the cffi cache) over the native generator, after BatchNormalization folding."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from byoc.backends.ccompiler import runtime_c
from byoc.backends.ccompiler.emitter import Unsupported
from byoc.backends.ccompiler.runtime import CompiledRegion, Signature, Specialization
from byoc.codegen import build_cache
from byoc.ir import Function, TensorType

from .codegen import generate
from .fold_bn import fold_batch_norm


class NativeRegion(CompiledRegion):
    """``CompiledRegion`` whose C comes from ``backends.native.codegen``."""

    def __init__(self, func: Function):
        super().__init__(fold_batch_norm(func))

    # ccompiler's _specialize calls its module's generate(); until CompiledRegion takes the
    # generator as a hook (asked for in the report), this mirrors it with native's.
    def _specialize(self, sig: Signature) -> Callable[[Sequence[np.ndarray]], tuple]:
        with self._lock:
            if sig in self._variants:
                return self._variants[sig]
            types = [TensorType(tuple(shape), np.dtype(dtype).name) for shape, dtype in sig]
            try:
                self._check_dtypes(types)
                generated = generate(self.func, types)
            except Unsupported as exc:
                variant = self._host(sig, exc)
            else:
                objects = (build_cache.build_object(runtime_c.LIBRARY),) if generated.library \
                    else ()
                module = build_cache.build(generated.source, generated.cdef, region=self.name,
                                           objects=objects)
                variant = Specialization(generated, module, sig)
            self._variants[sig] = variant
            return variant


def compile_region(func: Function) -> NativeRegion:
    """The backend's compile: a callable from arrays to a tuple of arrays."""
    return NativeRegion(func)
