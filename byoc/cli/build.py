"""``byoc build``: partition and compile every region; ``--emit-c``."""

from __future__ import annotations

import os
import time

from .common import (
    backend_list,
    build_exe,
    fallback_arg,
    force_arg,
    load_model,
    model_arg,
    plan_arg,
    prepare,
)


def cmd_build(args) -> int:

    from ..codegen.build_cache import STATS
    from ..placement import format_placement, placement

    if args.emit_c:
        from ..files.outputs import check_output_folder

        check_output_folder(args.emit_c, args.force)  # before the work, not after it
    path, mod = load_model(args)
    backends = backend_list(args.backend)
    part = prepare(mod, backends, args)
    start = time.perf_counter()
    exe = build_exe(part, args)
    elapsed = time.perf_counter() - start
    part = exe.mod  # without the regions --fallback host sent back
    regions = [n for n in part.functions if n != "main"]
    print(f"built {os.path.basename(path)} for {', '.join(backends) or 'host'} in {elapsed:.2f} s: "
          f"{len(regions)} region(s); C modules compiled {STATS.compiled}, from cache {STATS.cached}")
    print(format_placement(placement(part)))
    if args.emit_c:
        from ..backends.ccompiler import write_c_sources

        files = write_c_sources(part, args.emit_c, executable=exe, force=args.force)
        print(f"wrote {len(files)} C file(s) to {args.emit_c}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("build", help="partition and compile every region (cached); --emit-c")
    model_arg(p, optional=True)
    p.add_argument("--backend", metavar="NAME[,NAME]", help="backends in priority order")
    p.add_argument("--emit-c", metavar="DIR", help="write each C region's source into DIR")
    force_arg(p)
    fallback_arg(p)
    plan_arg(p)
    p.set_defaults(fn=cmd_build)
