"""The ``native`` backend: ccompiler plus operator fusion and a static memory plan.

    mod = byoc.partition(byoc.load_onnx("model.onnx"), backends=["native"])
    byoc.build(mod).run(inputs)

Each region is folded (constants, BatchNormalization into conv weights), split by FuseOps
(``byoc.passes.fuse_ops``) into kernels (``kernels``: one loop per elementwise chain, Conv /
MatMul / Gemm with their epilogue), and written as C (``codegen``) whose intermediate buffers
sit in one workspace laid out by ``byoc.runtime.memory_plan``. It takes what ccompiler takes
(same support rules and reasons) and declines the rest to the host or the next backend.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from byoc.backend import Backend, fewer_than, register_backend
from byoc.backends.ccompiler.support import supports as _ccompiler_supports
from byoc.ir import Call, Constant

from .codegen import generate
from .runtime import NativeRegion, compile_region
from .shape_values import computes_shape, shape_inputs

NAME = "native"
_PLACEHOLDER = Constant(np.zeros(0, np.int64))


def supports(call: Call) -> bool | str:
    """True if native takes ``call``, else why not: ccompiler's rules, but a shape input may
    be computed from shapes (``shape_values``), and so may all of a Range's inputs."""
    if call.op == "Range":
        return all(map(computes_shape, call.args)) or \
            "native: Range's inputs must be computed from shapes and constants"
    args = list(call.args)
    for j in shape_inputs(call):
        if not isinstance(args[j], Constant) and computes_shape(args[j]):
            args[j] = _PLACEHOLDER  # a constant once the region is specialized
    if args != list(call.args):  # asked of every node: a copy only when an input was swapped
        call = dataclasses.replace(call, args=tuple(args))
    verdict = _ccompiler_supports(call)
    return True if verdict is True else "native: " + verdict.removeprefix("ccompiler: ")


def c_source(func, arrays) -> str:
    """The C of region ``func`` specialized to ``arrays`` (what ``byoc extract`` writes)."""
    return NativeRegion.source_for(func, arrays).source


def register() -> Backend:
    """Register the backend (``byoc.get_backend("native")`` calls this on first use)."""
    return register_backend(NAME, supports=supports, compile=compile_region,
                            reject_region=fewer_than(1))


__all__ = ["NAME", "NativeRegion", "c_source", "compile_region", "generate", "register", "supports"]
