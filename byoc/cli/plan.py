"""``byoc plan show``: a plan file as a table."""

from __future__ import annotations

from .common import path_arg


def cmd_plan_show(args) -> int:
    import json

    from ..tuning import Plan

    plan = Plan.load(args.plan)
    if args.json:
        print(json.dumps(plan.data, indent=1))
    else:
        print(plan.show(nodes=args.nodes))
    return 0


def register(sub) -> None:
    p = sub.add_parser("plan", help="read a plan file from byoc tune")
    verbs = p.add_subparsers(dest="verb")
    show = verbs.add_parser("show", help="the plan as a table: segments, options, regions")
    show.add_argument("plan", metavar="PLAN.json", type=path_arg)
    show.add_argument("--nodes", action="store_true", help="also list every node and its region")
    show.add_argument("--json", action="store_true", help="the plan itself, checked")
    show.set_defaults(fn=cmd_plan_show)
    p.set_defaults(fn=lambda args: (p.print_help(), 2)[1])
