"""``byoc report``: the partition as a page people look at: one self-contained HTML file."""

from __future__ import annotations

import os
import sys

from .common import (
    backend_list,
    build_exe,
    fallback_arg,
    force_arg,
    hint_made_up,
    input_args,
    load_model,
    model_arg,
    model_inputs,
    path_arg,
    plan_arg,
    read_paths,
    settled,
    show,
    whole,
)


def cmd_report(args) -> int:
    from ..errors import ByocError, InputError
    from ..files.outputs import check_output_file, output_file
    from ..report.page import render_page, report_data

    if not args.output.lower().endswith((".html", ".htm")):
        raise InputError(f"-o wants a .html file, got {args.output!r}")
    check_output_file(args.output, args.force, read_paths(args))  # before the work
    path, mod = load_model(args)
    backends = backend_list(args.backend)
    plan = None
    if args.plan:
        if backends:
            raise InputError("--plan places every node: drop --backend")
        from ..partition import partition
        from ..tuning.plan import Plan

        plan = Plan.load(args.plan)
        part, backends = partition(mod, plan=plan), list(plan.backends)
    elif backends and backends != ["host"]:
        from ..partition import partition

        part = partition(mod, backends=backends)
    else:
        part = mod
    from ..inputs import parse_dims

    dims = parse_dims(args.dim, mod.main)
    prof = None
    if args.profile:
        from ..profile import profile

        inputs = model_inputs(args, mod)
        dims = {**_dims_of(mod, inputs), **dims}
        runs = f"{args.repeat} runs" if args.repeat else "runs for half a second or more"
        print(f"byoc: profiling ({runs} after a warm-up)...", file=sys.stderr)
        exe = build_exe(part, args)
        try:
            exe.run(inputs)
        except ByocError as exc:
            raise hint_made_up(exc, args, mod) from None
        exe = settled(exe, part, args)
        prof = profile(exe, inputs, repeat=args.repeat)
    elif args.input:
        dims = {**_dims_of(mod, model_inputs(args, mod)), **dims}
    data = report_data(part, model=os.path.basename(path), backends=backends, profile=prof,
                       plan=plan, dims=dims)
    page = render_page(data)
    with output_file(args.output, force=args.force, protect=read_paths(args)) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
    nodes = sum(1 for n in data["view"]["nodes"] if n["kind"] == "op")
    regions = len(data["summary"]["regions"])
    print(f"wrote {show(args.output)}: {nodes} nodes, {regions} region(s); open it in any browser "
          "(one file, no server)")
    return 0


def _dims_of(mod, inputs: dict) -> dict[str, int]:
    """Values of the model's symbolic input dims, read off the inputs a run used."""
    from ..ir import TensorType

    found: dict[str, int] = {}
    for p in mod.main.params:
        value = inputs.get(p.name)
        if isinstance(p.type, TensorType) and p.type.shape is not None and value is not None \
                and len(p.type.shape) == getattr(value, "ndim", -1):
            for d, n in zip(p.type.shape, value.shape):
                if isinstance(d, str):
                    found.setdefault(d, int(n))
    return found


def register(sub) -> None:
    p = sub.add_parser("report", help="the partition as one HTML page: graph, times, reasons")
    model_arg(p, optional=True)
    input_args(p)
    plan_arg(p)
    p.add_argument("--profile", action="store_true",
                   help="run the model and show every node's and region's time")
    p.add_argument("--repeat", type=whole(1), default=None,
                   help="timed runs for --profile (median; default: at least 5, for 0.5 s)")
    fallback_arg(p)
    p.add_argument("-o", "--output", metavar="REPORT.html", required=True, type=path_arg)
    force_arg(p)
    p.set_defaults(fn=cmd_report)
