"""``byoc extract``, ``repro`` and ``bisect``: a backend's bug as a small test case."""

from __future__ import annotations

import sys

from .common import (
    force_arg,
    input_args,
    load_model,
    model_arg,
    model_inputs,
    one_backend,
    path_arg,
    read_paths,
    show,
    threads_arg,
    tolerance_args,
    whole,
)


def cmd_extract(args) -> int:
    from ..errors import InputError
    from ..extract import extract
    from ..files.outputs import check_output_folder

    check_output_folder(args.output, args.force)  # before the work, not after it
    path, mod = load_model(args)
    nodes = None
    if args.nodes:
        first, sep, last = args.nodes.partition(":")
        if not sep:
            raise InputError(f"--nodes wants FIRST:LAST, got {args.nodes!r}")
        nodes = (first, last)
    case = extract(mod, one_backend(args), args.output, model_inputs(args, mod), region=args.region,
                   nodes=nodes, name_regex=args.name_regex, iteration=args.iteration,
                   force=args.force, protect=read_paths(args))
    print(f"wrote {show(str(case.out_dir))}: region {case.region.name} ({len(case.region.nodes)} nodes, "
          f"{len(case.region.input_names)} inputs, {len(case.region.output_names)} outputs)")
    for f in case.files:
        print(f"  {f}")
    print(f"replay: byoc repro {case.out_dir}")
    return 0


def cmd_repro(args) -> int:
    from ..extract import repro

    checks = repro(args.case, one_backend(args) if args.backend else None, atol=args.atol,
                   rtol=args.rtol)
    for c in checks:
        print(f"  {show(c.name)}: {c.summary()}")
    ok = all(c.ok for c in checks)
    print("reproduces the recorded outputs" if ok else "does NOT match the recorded outputs")
    return 0 if ok else 1


def cmd_bisect(args) -> int:
    from ..extract import bisect
    from ..files.outputs import check_output_folder

    check_output_folder(args.output, args.force)
    path, mod = load_model(args)
    result = bisect(mod, one_backend(args), model_inputs(args, mod), out_dir=args.output,
                    progress=lambda line: print(f"  checking {line}", file=sys.stderr, flush=True),
                    force=args.force, protect=read_paths(args),
                    atol=args.atol, rtol=args.rtol)
    if result.region is None:
        print(f"no region differs: all {result.checked} region(s) of main (numbered from 0, as "
              "in byoc partition) match the host")
        if result.in_bodies:
            first = result.checked
            print(f"the {result.in_bodies} region(s) inside If/Loop/Scan bodies ({first} to "
                  f"{first + result.in_bodies - 1}) are not bisected: check one with byoc extract "
                  "--region K and byoc repro")
        return 0
    print(f"first bad region: {result.index} {result.region.name} (regions numbered from 0, "
          f"as in byoc partition and extract --region)")
    if result.error:
        print(f"  the backend failed: {show(result.error)}")
    for c in result.comparisons:
        print(f"  {show(c.name)}: {c.summary()}")
    print(f"first bad node: {show(result.node)} ({result.node_op})")
    if result.case is not None:
        print(f"repro: byoc repro {result.case.out_dir}")
    return 1


def register(sub) -> None:
    p = sub.add_parser("extract", help="one region as a standalone ONNX test case")
    model_arg(p, optional=True)
    input_args(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--region", type=whole(0), metavar="K",
                       help="region K, numbered from 0 as byoc partition and bisect number them")
    which.add_argument("--nodes", metavar="FIRST:LAST", help="a node range by ONNX node names")
    which.add_argument("--name-regex", metavar="RE", help="the nodes whose names match")
    p.add_argument("--iteration", type=whole(0), default=0, metavar="K",
                   help="for a region in a Loop/Scan body or If branch: the tensors of the "
                        "body's K-th run (from 0; default 0)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", type=path_arg)
    force_arg(p)
    p.set_defaults(fn=cmd_extract)

    p = sub.add_parser("repro", help="replay an extracted case on a backend; exit 1 if it differs")
    p.add_argument("case", metavar="DIR", type=path_arg)
    p.add_argument("--backend", help="default: the backend the case was extracted for")
    threads_arg(p)
    tolerance_args(p)
    p.set_defaults(fn=cmd_repro)

    p = sub.add_parser("bisect", help="find the first region and node a backend gets wrong")
    model_arg(p, optional=True)
    input_args(p)
    p.add_argument("-o", "--output", metavar="DIR", default="byoc-bisect", type=path_arg,
                   help="where to extract a repro of the first bad node (default byoc-bisect)")
    force_arg(p)
    tolerance_args(p)
    p.set_defaults(fn=cmd_bisect)
