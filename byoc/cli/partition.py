"""``byoc partition``: what runs where, as a table, JSON or ONNX file."""

from __future__ import annotations

import json

from .common import (
    backend_list,
    force_arg,
    load_model,
    model_arg,
    path_arg,
    plan_arg,
    read_paths,
    report_hint,
    save_model,
    shape_args,
    shaped_model,
)


def cmd_partition(args) -> int:
    from ..partition import annotate_range, partition
    from ..report import format_table, partition_report

    if args.output:
        from ..files.outputs import check_output_file

        check_output_file(args.output, args.force, read_paths(args))  # before the work
    path, mod = load_model(args)
    backends = backend_list(args.backend)
    if args.plan:
        if backends or args.range:
            from ..errors import InputError

            raise InputError("--plan places every node: drop --backend and --range")
        part = partition(mod, plan=args.plan)
    elif not backends:
        from ..errors import InputError

        raise InputError("partition needs --backend NAME[,NAME]")
    elif args.range:
        start, sep, end = args.range.partition(":")
        if not sep:
            from ..errors import InputError

            raise InputError(f"--range wants START:END, got {args.range!r}")
        mod = annotate_range(mod, backends[0], start, end)
        part = partition(mod, backends=backends, annotated=True)
    else:
        part = partition(mod, backends=backends)
    report = partition_report(part, shaped_model(args, path, mod))
    if args.output:
        from ..frontends.onnx.exporter import module_to_onnx

        save_model(module_to_onnx(part), args.output, args.force, read_paths(args))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_table(report, explain=args.explain))
        print(report_hint(args))
    return 0


def register(sub) -> None:
    p = sub.add_parser("partition", help="what runs where: regions per backend")
    model_arg(p, optional=True)
    p.add_argument("--backend", metavar="NAME[,NAME]", help="backends in priority order")
    shape_args(p)
    plan_arg(p)
    p.add_argument("--explain", action="store_true", help="say why each host node stayed there")
    p.add_argument("--range", metavar="START:END", help="annotate a node range by hand")
    p.add_argument("--json", action="store_true")
    p.add_argument("-o", "--output", metavar="OUT.onnx", type=path_arg,
                   help="also write the partitioned model, one local function per region")
    force_arg(p)
    p.set_defaults(fn=cmd_partition)
