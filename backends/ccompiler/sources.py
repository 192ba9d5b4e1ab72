"""Write the C of a partitioned module's ccompiler regions into a folder, one file per region.

    write_c_sources(byoc.partition(mod, backends=["ccompiler"]), "out/")

Each file starts with a comment naming the region and the ONNX nodes it came from. A region
whose parameters have static shapes is generated for them; one with dynamic dims gets its C only
at its first call, so pass the ``Executable`` that ran it to write what it built.
"""

from __future__ import annotations

import os
from pathlib import Path

from byoc.codegen import CSource, Names, shorten
from byoc.files.outputs import OutputFolder
from byoc.ir import Call, IRModule, TensorType, post_order

from .codegen import Generated, generate
from .fold import fold_constants
from .runtime import CompiledRegion

COMPILER = "ccompiler"


def write_c_sources(mod: IRModule, directory: str | os.PathLike, executable=None, *,
                    force: bool = False) -> list[Path]:
    """Write each ccompiler region's C into ``directory``; returns the files written. The
    folder follows byoc's output rules (``byoc/files/outputs.py``): one that exists and is not
    empty only with ``force``, and then only byoc's files in it are replaced."""
    names = Names("region_", max_len=80)
    built = dict(getattr(executable, "external", {}) or {})
    with OutputFolder(directory, force=force) as out:
        for name, func in mod.functions.items():
            if name == "main" or func.attrs.get("Compiler") != COMPILER:
                continue
            stem = names.unique(name)
            sources = _sources(func, built.get(name))
            if not sources:
                Path(out.path(f"{stem}.c")).write_text(_pending(name, func))
            for k, gen in enumerate(sources):
                Path(out.path(f"{stem}.c" if k == 0 else f"{stem}__{k + 1}.c")).write_text(gen.source)
    return [Path(directory) / rel for rel in out.files]


def _sources(func, compiled) -> list[Generated]:
    if isinstance(compiled, CompiledRegion) and compiled.specializations:
        return compiled.specializations
    if all(isinstance(p.type, TensorType) and p.type.is_static for p in func.params):
        return [generate(fold_constants(func))]
    return []


def _pending(name: str, func) -> str:
    """A file for a region whose shapes are not known yet: what it holds, and why no code."""
    src = CSource()
    src.comment(f"byoc ccompiler: region {shorten(name)}")
    nodes = [e for e in post_order(func.body) if isinstance(e, Call)]
    src.comment(f"ONNX nodes ({len(nodes)}):")
    for call in nodes:
        label = call.span.name if call.span is not None else ""
        src.comment(f"  {shorten(label)} ({call.op_name})")
    for p in func.params:
        src.comment(f"input {shorten(p.name)}: {p.type}")
    src.comment("Its inputs have dynamic dims: the C is generated for the shapes of its first "
                "call. Run the model, then pass the executable to write_c_sources.")
    return src.text()
