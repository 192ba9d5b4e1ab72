"""The ``ccompiler`` backend: C generated per region, built with cffi, cached by content.

    mod = byoc.partition(byoc.load_onnx("model.onnx"), backends=["ccompiler"])
    byoc.build(mod).run(inputs)

Each region becomes one C function (``codegen``), specialized to the shapes of its first call
and rebuilt for new ones (``runtime``), compiled through ``byoc.codegen.build_cache``. What it
takes and why it declines the rest is in ``support``; ``emit_c`` and ``write_c_sources`` show
the code.
"""

from __future__ import annotations

from byoc.backend import Backend, fewer_than, register_backend

from .codegen import emit_c, generate
from .runtime import CompiledRegion, compile_region
from .sources import write_c_sources
from .support import supports

NAME = "ccompiler"


def c_source(func, arrays) -> str:
    """The C of region ``func`` specialized to ``arrays`` (what ``byoc extract`` writes)."""
    return CompiledRegion.source_for(func, arrays).source


def register() -> Backend:
    """Register the backend (``byoc.get_backend("ccompiler")`` calls this on first use)."""
    # A region of views alone (a lone Reshape) is not worth a compile.
    return register_backend(NAME, supports=supports, compile=compile_region,
                            reject_region=fewer_than(1))


__all__ = ["CompiledRegion", "NAME", "c_source", "compile_region", "emit_c", "generate", "register",
           "supports", "write_c_sources"]
