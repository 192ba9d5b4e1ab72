"""A compiled native region: ccompiler's runtime (specialized per shape signature, built
through the cffi cache) over the native generator, after BatchNormalization folding (once the
constant calls are folded: weights a graph builds with ConstantOfShape are constants then), with
the shapes the graph computes made constants first (``shape_values``)."""

from __future__ import annotations

from byoc.backends.ccompiler.fold import fold_constants
from byoc.backends.ccompiler.runtime import CompiledRegion

from byoc.ir import Function

from .codegen import generate as native_generate
from .fold_bn import fold_batch_norm
from .shape_values import specialize, value_params


class NativeRegion(CompiledRegion):
    """``CompiledRegion`` whose C comes from ``backends.native.codegen``."""

    generate = staticmethod(native_generate)
    value_params = staticmethod(value_params)
    specialize = staticmethod(specialize)
    prepare = staticmethod(lambda func: fold_batch_norm(fold_constants(func)))


def compile_region(func: Function) -> NativeRegion:
    """The backend's compile: a callable from arrays to a tuple of arrays."""
    return NativeRegion(func)
