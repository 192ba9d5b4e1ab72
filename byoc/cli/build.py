"""``byoc build``: partition and compile every region; ``--input``/``--dim`` specialize it to
those shapes (one run), ``--emit-c DIR`` writes each C region's source for them."""

from __future__ import annotations

import os
import time

from .common import (
    backend_list,
    build_exe,
    fallback_arg,
    force_arg,
    input_args,
    load_model,
    model_arg,
    model_inputs,
    path_arg,
    plan_arg,
    prepare,
    settled,
    show,
)


def cmd_build(args) -> int:
    from ..codegen.build_cache import STATS
    from ..errors import InputError
    from ..placement import format_placement, placement

    if args.emit_c:
        from ..files.outputs import check_output_folder

        check_output_folder(args.emit_c, args.force)  # before the work, not after it
    path, mod = load_model(args)
    backends = backend_list(args.backend)
    shaped = bool(args.input or args.dim or args.shape)
    inputs = model_inputs(args, mod) if shaped or args.emit_c else None
    if args.emit_c:
        from ..backends.ccompiler.sources import C_BACKENDS

        if not getattr(args, "plan", None) and not set(backends) & set(C_BACKENDS):
            raise InputError(f"--emit-c: {', '.join(backends) or 'the host'} generates no C; "
                             f"use --backend {' or '.join(C_BACKENDS)}")
        unshaped = _dynamic_inputs(mod, args, inputs)
        if unshaped:
            raise InputError(f"--emit-c: the C is specialized to shapes, and {unshaped} "
                             "has dynamic dims: give it with --input NAME=FILE.npy, its "
                             "named dims with --dim NAME=N, or its shape with --shape")
    part = prepare(mod, backends, args)
    start = time.perf_counter()
    exe = build_exe(part, args)
    if shaped or args.emit_c:  # one run builds the regions built per shape, for these shapes
        exe.run(inputs)
        exe = settled(exe, part, args)
    elapsed = time.perf_counter() - start
    part = exe.mod  # without the regions --fallback host sent back
    regions = [n for n in part.functions if n != "main"]
    print(f"built {show(os.path.basename(path))} for {', '.join(backends) or 'host'} in {elapsed:.2f} s: "
          f"{len(regions)} region(s); C modules compiled {STATS.compiled}, from cache {STATS.cached}")
    print(format_placement(placement(part)))
    if args.emit_c:
        return _emit(exe, part, args.emit_c, args.force)
    return 0


def _dynamic_inputs(mod, args, inputs) -> str:
    """The first made-up input whose shape the command line does not fix, described; ''."""
    import numpy as np

    from ..inputs import parse_dims, parse_shapes
    from ..ir import TensorType

    dims = parse_dims(args.dim, mod.main)
    shapes = parse_shapes(args.shape, mod.main, dims)
    for p in mod.main.params:  # dims that given inputs fix, as random_inputs binds them
        if p.name in inputs and p.name not in args.made_up and isinstance(p.type, TensorType):
            for d, n in zip(p.type.shape or (), np.shape(inputs[p.name])):
                if isinstance(d, str):
                    dims.setdefault(d, n)
    for p in mod.main.params:
        t = p.type
        if p.name not in args.made_up or p.name in shapes or not isinstance(t, TensorType):
            continue
        if t.shape is None:
            return f"input {show(p.name)!r} (rank unknown)"
        missing = [d for d in t.shape if d is None or (isinstance(d, str) and d not in dims)]
        if missing:
            shown = ", ".join("?" if d is None else str(d) for d in t.shape)
            return f"input {show(p.name)!r} ({shown})"
    return ""


def _emit(exe, part, folder: str, force: bool) -> int:
    from ..backends.ccompiler.sources import c_regions, write_c_sources

    names = c_regions(part)
    if not names:
        from ..errors import ByocError

        raise ByocError("--emit-c: no region runs on a C backend (every one fell back to the "
                        "host, or none was made)")
    files = write_c_sources(part, folder, executable=exe, force=force)
    skipped = len(names) - len({f.name.split("__")[0] for f in files})
    print(f"wrote {len(files)} C file(s) to {folder}: one per region, specialized to this run's "
          f"shapes, each headed by the ONNX nodes it came from")
    if skipped:
        print(f"  {skipped} C region(s) ran on the host for these shapes: no C for them")
    return 0


def register(sub) -> None:
    p = sub.add_parser("build", help="partition and compile every region (cached); --emit-c")
    model_arg(p, optional=True)
    input_args(p)
    p.add_argument("--emit-c", metavar="DIR", type=path_arg,
                   help="write each C region's source into DIR, specialized to the shapes of "
                        "--input/--dim (needed where the model's dims are dynamic)")
    force_arg(p)
    fallback_arg(p)
    plan_arg(p)
    p.set_defaults(fn=cmd_build)
