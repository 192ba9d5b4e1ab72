"""Compile a plan into straight-line Python, as torch.fx does for a GraphModule's forward.

    def run(a, c, K):
        v0, v1 = a           # parameters
        v2 = c[0]            # constants
        i = 0; v3 = K[0](v0, v2)[0]
        del v0
        i = 1; v4 = K[1](v3)[0]
        ...
        return [v4]

Each value is a local variable and each call one line, so a run pays for the kernels and little
else: no per-node dispatch on instruction kind, no argument lists built in a loop. Names in the
source are slot numbers only; nothing from the model appears in it. ``i`` records the node
being run, so a failure is reported (by the interpreter, which re-runs the plan) at the right
node. Plans above ``MAX_INSTRUCTIONS`` stay interpreted: compiling a huge function costs more
than it saves.
"""

from __future__ import annotations

from collections.abc import Callable

from .plan import CALL, GETITEM, Plan

MAX_INSTRUCTIONS = 20_000


def compile_plan(plan: Plan) -> Callable[[list, list, list], list] | None:
    """``run(args, constants, kernels) -> outputs`` for the plan, or None if it is too big."""
    if len(plan.code) > MAX_INSTRUCTIONS:
        return None
    none = plan.none_slot

    def ref(slot: int) -> str:
        return "None" if slot == none else f"v{slot}"

    lines = ["def run(a, c, K):"]
    if plan.param_slots:
        lines.append("    " + ", ".join(f"v{s}" for s in plan.param_slots) + ", = a")
    for k, (slot, _) in enumerate(plan.constants):
        lines.append(f"    v{slot} = c[{k}]")
    for kind, fn, args, out, free, unpack, k in plan.code:
        if kind == CALL:
            call = f"K[{k}]({', '.join(ref(a) for a in args)})"
            lines.append(f"    i = {k}; v{out} = {call}{'[0]' if unpack else ''}")
        elif kind == GETITEM:
            lines.append(f"    v{out} = v{args[0]}[{int(fn)}]")
        else:
            lines.append(f"    v{out} = ({''.join(ref(a) + ', ' for a in args)})")
        if free:
            lines.append("    del " + ", ".join(f"v{s}" for s in free))
    lines.append("    return [" + ", ".join(f"v{s}" for s in plan.output_slots) + "]")
    namespace: dict = {}
    exec(compile("\n".join(lines), "<byoc plan>", "exec"), namespace)  # noqa: S102
    return namespace["run"]
