"""annotate_target: each call a backend takes becomes a region of its own, marked in the IR.

       x   w                 begin(x)  begin(w)
        \\ /                       \\  /
        Conv     (ref)    ->        Conv
         |                           |
        Softmax  (host)             end
                                     |
                                   Softmax

Rules:
1. Each call goes to the first backend in the list that takes it; a composite call goes to the
   backend whose pattern made it. TupleGetItems go with their call.
2. compiler_begin goes on every argument entering a region (constants and graph inputs too),
   compiler_end on every value leaving one; regions of neighbouring calls meet as
   ``begin(end(v))``, for merge_compiler_regions to join.
3. A call no backend takes stays on the host, and each backend's reason is recorded for
   ``byoc.explain``. So does a call with no inputs (nothing to mark it by), and a call of an
   external function.
4. A control-flow call (If, Loop, Scan: a call with a body) stays on the host whatever the
   backends say: ``byoc.partition`` partitions its bodies instead, and the host calls their
   regions with the tensors of the branch or iteration it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..analysis import HOST_REASONS, IndexGraph, Regions, annotate, is_control_flow, node_key
from ..analysis.annotation import MARKERS
from ..backend import Backend
from ..errors import ModelError
from ..ir import Call, Expr, Function, GlobalVar, IRModule, TupleGetItem, post_order


CONTROL_FLOW = "control flow stays on the host; the regions of its bodies are offloaded"


def annotate_target(mod: IRModule, backends: Sequence[Backend]) -> IRModule:
    """main with one annotated region per call a backend takes; host reasons in the attrs."""
    func = mod.main
    regions, reasons = target_regions(func, post_order(func.body), backends)
    return IRModule({**mod.functions, "main": annotate(regions)},
                    {**mod.attrs, HOST_REASONS: reasons})


def target_regions(func: Function, order: list[Expr], backends: Sequence[Backend],
                   whole: dict[str, str] | None = None) -> tuple[Regions, dict[str, str]]:
    """One region per call a backend takes, and why each other call stays on the host.
    ``whole``: the control-flow calls a backend runs whole (``whole_control_flow``), by name."""
    owner = {entry.name: b.name for b in backends for entry in b.patterns}
    graph = IndexGraph.of(order)
    region = [-1] * len(order)
    targets: list[str] = []
    reasons: dict[str, str] = {}
    if any(b.prefetch for b in backends):  # one that asks its engine asks about all at once
        calls = [e for e in order if isinstance(e, Call) and isinstance(e.op, str)]
        for b in backends:
            b.prepare(calls)
    for i, e in enumerate(order):
        if isinstance(e, TupleGetItem):
            region[i] = region[graph.kids[i][0]]
        elif isinstance(e, Call):
            target, reason = _choose(e, backends, owner, whole)
            if target is None:
                reasons[node_key(e)] = reason
            else:
                region[i] = len(targets)
                targets.append(target)
    return Regions(func, order, region, targets, graph), reasons


def _choose(call: Call, backends: Sequence[Backend], owner: dict[str, str],
            whole: dict[str, str] | None = None) -> tuple[str | None, str]:
    """The backend that takes ``call``, or None and why none does."""
    op = call.op
    if not isinstance(op, str):  # the rarer calls first, so that ops by name test less
        if isinstance(op, GlobalVar):
            return None, f"calls the external function @{op.name}"
        if is_control_flow(call):
            return None, CONTROL_FLOW
        name = op.attrs.get("Composite")
        if name in owner:
            return owner[name], ""
        return None, f"composite {name!r} belongs to none of the backends"
    if call.attrs and is_control_flow(call):
        taker = (whole or {}).get(node_key(call))
        return (taker, "") if taker else (None, CONTROL_FLOW)
    if op in MARKERS:
        raise ModelError("main is already annotated: partition it with annotated=True, or "
                         "annotate a module without compiler_begin/compiler_end",
                         node_key(call.args[0]) if isinstance(call.args[0], Call) else None, op)
    if call.args.count(None) == len(call.args):
        return None, "takes no inputs, so no region can begin at it"
    refusals = []
    for b in backends:
        verdict = b.check(call)
        if verdict is True:
            return b.name, ""
        named = verdict.startswith(f"{b.name}: ")  # a backend naming itself (ccompiler does)
        refusals.append(verdict if named else f"{b.name}: {verdict}")
    return None, "; ".join(refusals)
