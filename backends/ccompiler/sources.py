"""Write the C of a partitioned module's C regions (ccompiler's and native's) into a folder, one
file per region and shape signature.

    write_c_sources(byoc.partition(mod, backends=["ccompiler"]), "out/")   # static shapes
    exe = byoc.build(part); exe.run(inputs)
    write_c_sources(part, "out/", exe)          # what each region was built for in that run

Each file starts with a comment naming the region, the ONNX nodes it came from and the shapes
it is specialized to. A region with dynamic dims has C only for the shapes of a run: without
an executable that ran it, ``write_c_sources`` refuses (a ``ByocError`` naming the region and
its dims), never writes a file without code.
"""

from __future__ import annotations

import os
from pathlib import Path

from byoc.codegen import Names
from byoc.errors import ByocError
from byoc.files.outputs import OutputFolder
from byoc.ir import IRModule, TensorType

from .codegen import Generated

C_BACKENDS = ("ccompiler", "native")


def c_regions(mod: IRModule) -> list[str]:
    """The names of ``mod``'s regions whose backend writes C."""
    return [name for name, func in mod.functions.items()
            if name != "main" and func.attrs.get("Compiler") in C_BACKENDS]


def write_c_sources(mod: IRModule, directory: str | os.PathLike, executable=None, *,
                    force: bool = False) -> list[Path]:
    """Write each C region's source into ``directory``; returns the files written. The
    folder follows byoc's output rules (``byoc/files/outputs.py``): one that exists and is not
    empty only with ``force``, and then only byoc's files in it are replaced. Every region's
    C is found (or refused) before anything is written."""
    built = dict(getattr(executable, "external", {}) or {})
    sources: list[tuple[str, list[Generated]]] = []
    for name in c_regions(mod):
        found = region_sources(mod, name, built.get(name))
        if found:
            sources.append((name, found))
    names = Names("region_", max_len=80)
    with OutputFolder(directory, force=force) as out:
        for name, found in sources:
            stem = names.unique(name)
            for k, gen in enumerate(found):
                Path(out.path(f"{stem}.c" if k == 0 else f"{stem}__{k + 1}.c")).write_text(
                    gen.source)
    return [Path(directory) / rel for rel in out.files]


def region_sources(mod: IRModule, name: str, compiled=None) -> list[Generated]:
    """The C of region ``name``: what ``compiled`` (its built callable) generated so far, else,
    for static shapes, what its backend generates for them. A region with dynamic dims and no
    run behind it is refused; one its backend runs on the host for every shape it saw has none."""
    func = mod[name]
    specializations = getattr(compiled, "specializations", None)
    if isinstance(specializations, list) and (specializations or getattr(compiled, "signatures", 0)):
        return specializations
    dynamic = [f"{p.name}: {p.type}" for p in func.params
               if not (isinstance(p.type, TensorType) and p.type.is_static)]
    if dynamic:
        raise ByocError(f"region {name!r} has dynamic dims ({'; '.join(dynamic)}): its C is "
                        "specialized to the shapes of a run; run the model first and pass its "
                        "executable (byoc build --input/--dim)")
    from byoc.backend import get_backend

    compiled = get_backend(func.attrs["Compiler"]).compile(func)
    return list(getattr(compiled, "specializations", []))

