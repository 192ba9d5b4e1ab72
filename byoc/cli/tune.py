"""``byoc tune``: measure where each part of a model runs fastest; write the plan."""

from __future__ import annotations

import sys
import time

from .common import (
    amount,
    backend_list,
    force_arg,
    load_model,
    model_arg,
    model_inputs,
    one_line,
    path_arg,
    read_paths,
    shape_args,
    show,
    threads_arg,
    threads_of,
    whole,
)


class _Progress:
    """One line per step on stderr: rewritten in place on a terminal, at most every few
    seconds otherwise (a log stays short)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, p) -> None:
        if self.quiet:
            return
        best = f", best {p.best_s * 1e3:.3f} ms" if p.best_s is not None else ""
        text = (f"byoc tune [{p.elapsed_s:6.1f} s, {p.measured} measured, {p.cached} cached"
                f"{best}] {one_line(p.message)}")
        now = time.monotonic()
        final = p.message.startswith("done")
        if self.tty:
            print("\r\033[K" + text[:200], end="\n" if final else "", file=sys.stderr,
                  flush=True)
        elif final or now - self.last >= 5.0:
            print(text, file=sys.stderr, flush=True)
            self.last = now


def cmd_tune(args) -> int:
    import os

    from ..errors import InputError
    from ..files.outputs import check_output_file
    from ..tuning import MeasurementCache, tune

    check_output_file(args.output, args.force, read_paths(args))  # before the work
    path, mod = load_model(args)
    backends = backend_list(args.backend)
    if not backends:
        raise InputError("tune needs --backend NAME[,NAME...]")
    if args.budget is not None and args.budget <= 0:
        raise InputError(f"--budget must be positive, got {args.budget}")
    if args.atoms < 1:
        raise InputError(f"--atoms must be at least 1, got {args.atoms}")
    inputs = model_inputs(args, mod)
    plan = tune(mod, backends, inputs, budget=args.budget, atoms=args.atoms,
                progress=_Progress(args.quiet), name=os.path.basename(path),
                cache=MeasurementCache(enabled=not args.no_cache), threads=threads_of(args),
                fallback=args.fallback)
    plan.save(args.output, force=args.force, protect=read_paths(args))
    print(plan.show())
    print(f"wrote {show(args.output)}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("tune", help="measure where each part of a model runs fastest; write a "
                                    "plan (JSON) that partition/run/bench/build --plan replay")
    model_arg(p, optional=True)
    p.add_argument("--backend", metavar="NAME[,NAME]", required=True,
                   help="the backends to consider (and the host); this order is also the "
                        "priority order measured as a baseline")
    shape_args(p)
    p.add_argument("--seed", type=whole(0), default=0)
    threads_arg(p)
    p.add_argument("--budget", type=amount(0.0, above=True), metavar="SECONDS", default=600.0,
                   help="stop the search after this long with the best plan measured so far "
                        "(default 600)")
    p.add_argument("--atoms", type=whole(1), default=24,
                   help="how finely to cut the model (more: finer placement, more to measure)")
    p.add_argument("--no-cache", action="store_true", help="measure everything again")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--fallback", choices=["host", "next"],
                   help="build and run the chosen plan once so; a region that has to move "
                        "is moved in the plan, and its moves list says why")
    p.add_argument("-o", "--output", metavar="PLAN.json", required=True, type=path_arg)
    force_arg(p)
    p.set_defaults(fn=cmd_tune)
