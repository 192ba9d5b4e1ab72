"""Applying a plan: the model partitioned exactly as the plan says, nothing measured.

    part = apply_plan(mod, "plan.json")        # or byoc.partition(mod, plan="plan.json")

The plan may have been edited by hand. What it says is applied where it is legal, and refused
in one line naming the node and the reason where it is not:

- the plan was made for another model, or the model has changed: the first node that differs;
- a node the plan names is not in the model;
- a node's entry in ``nodes`` and the region lists disagree (an edit made in one place only);
- a region's backend is unknown, or does not take one of its nodes (its own words why);
- a region would not be convex: a path leaves it and comes back, so its call would wait for
  its own result (the nodes that would have to join it are named);
- a region's backend rejects it as a whole (its ``reject_region`` hook).

Nodes placed on the host need no backend; If, Loop and Scan stay on the host and their bodies
are partitioned for the backends the plan lists for them under ``bodies``.
"""

from __future__ import annotations

from ..analysis import (
    HOST_REASONS,
    Regions,
    completed,
    contract,
    host_calls,
    node_key,
    unit_order,
)
from ..backend import BackendError, find_backend, resolve
from ..errors import ModelError
from ..ir import Function, IRModule, TupleGetItem, post_order
from ..passes.partition_graph import bind_policy, lift_function
from ..passes.reject import reject_regions
from .plan import HOST, Plan, PlanError
from .view import ModelView, model_view, takes

PLACED_ON_HOST = "placed on the host by the plan"
BACKENDS_ATTR = "partition_backends"  # the listed backends, in order: fallback="next" reads it


def apply_plan(mod: IRModule, plan) -> IRModule:
    """``mod`` partitioned as ``plan`` (a Plan, its JSON dict or a path) says."""
    plan = Plan.load(plan)
    data = plan.data
    try:
        listed = resolve(data["backends"])
    except BackendError as exc:
        raise PlanError(f"{plan.source}: \"backends\": {exc}") from None
    view = model_view(mod, listed)
    _check_model(view, data, plan.source)
    where = _assignment(view, data, plan.source)
    regions = {r["id"]: r for r in data["regions"]}
    backend_of = {}
    for rid, r in regions.items():
        if r["backend"] == HOST:
            continue
        backend = find_backend(r["backend"])
        if backend is None:
            raise PlanError(f"{plan.source}: region {rid}: unknown backend {r['backend']!r}")
        backend_of[rid] = backend
    index = view.index()
    for k, rid in enumerate(where):
        if rid in backend_of:
            verdict = takes(backend_of[rid], view.call(k), view.owner)
            if verdict is not True:
                raise ModelError(f"the plan puts it in region {rid} on {backend_of[rid].name}, "
                                 f"which does not take it: {verdict}", view.names[k],
                                 view.call(k).op_name)
    taken = set(mod.functions)
    funcs: dict[str, Function] = {}
    reasons: dict[str, str] = {}
    body_host: list = []
    func = _with_bodies(view, data, taken, funcs, reasons, body_host)
    order = post_order(func.body)
    assert len(order) == len(view.order), "bodies changed the shape of main"
    used = [rid for rid in dict.fromkeys(where) if rid in backend_of]
    number = {rid: r for r, rid in enumerate(used)}
    region = [-1] * len(order)
    for k, rid in enumerate(where):
        if rid in number:
            region[view.calls[k]] = number[rid]
    kids = view.graph.kids
    for i, e in enumerate(order):
        if isinstance(e, TupleGetItem) and region[kids[i][0]] >= 0:
            region[i] = region[kids[i][0]]
    marked = Regions(func, order, region, [backend_of[rid].name for rid in used], view.graph)
    try:
        unit_order(contract(marked), marked)
    except ModelError as exc:
        raise ModelError(f"the plan's regions cannot run in any order: {exc}") from None
    before = len(funcs)
    main, host = lift_function(marked, taken, funcs, bind_policy(None))
    lifted = list(funcs)[before:]
    for rid, name in zip(used, lifted):
        hook = backend_of[rid].reject_region
        verdict = hook(funcs[name]) if hook is not None else None
        if verdict:
            why = verdict if isinstance(verdict, str) else "it rejects it"
            first = regions[rid]["nodes"][0] if regions[rid]["nodes"] else None
            k = index.get(first) if first else None
            raise ModelError(f"region {rid} on {backend_of[rid].name} is rejected by its "
                             f"backend: {why}", first, view.call(k).op_name if k is not None
                             else None)
    reasons.update((node_key(c), PLACED_ON_HOST) for c in host_calls(host))
    attrs = {**mod.attrs, HOST_REASONS: completed([*host, *body_host], reasons),
             BACKENDS_ATTR: list(data["backends"])}
    return reject_regions(IRModule({**mod.functions, "main": main, **funcs}, attrs))


def _check_model(view: ModelView, data: dict, source: str) -> None:
    """Refuse a plan made for another model, naming the first node that differs."""
    if data["model"]["digest"] == view.digest:
        return
    entries = data["nodes"]
    for k in range(max(len(entries), len(view.names))):
        mine = (view.names[k], view.call(k).op_name, view.fingerprints[k]) \
            if k < len(view.names) else None
        theirs = entries[k] if k < len(entries) else None
        if theirs is None:
            raise ModelError(f"the plan was made for another model: this node is not in it "
                             f"(the plan has {len(entries)} nodes, the model "
                             f"{len(view.names)})", mine[0], mine[1])  # type: ignore[index]
        if mine is None:
            raise ModelError("the plan was made for another model: the plan has this node, "
                             "the model does not", theirs["node"], theirs["op"])
        if mine[0] != theirs["node"]:
            raise ModelError(f"the plan was made for another model: node {k} is "
                             f"{theirs['node']!r} ({theirs['op']}) in the plan", mine[0],
                             mine[1])
        if (mine[1], mine[2]) != (theirs["op"], theirs["fingerprint"]):
            what = (f"{theirs['op']} in the plan" if mine[1] != theirs["op"] else
                    "its attributes, inputs, outputs or weights")
            raise ModelError(f"the model has changed since the plan was made: {what} differ",
                             mine[0], mine[1])
    raise PlanError(f"{source}: \"model.digest\" does not match the model, though every node "
                    "does (was the digest edited?)")


def _assignment(view: ModelView, data: dict, source: str) -> list[str]:
    """Each node's region id (or "host"), from the nodes table and the region lists, which
    must agree wherever both speak."""
    index = view.index()
    ids = {r["id"] for r in data["regions"]}
    where: list[str | None] = [None] * len(view.names)
    for entry in data["nodes"]:
        k = index.get(entry["node"])
        if k is None:
            raise ModelError("the plan names this node, but the model has no node of that name",
                             entry["node"], entry.get("op"))
        if entry["region"] != HOST and entry["region"] not in ids:
            raise ModelError(f"the plan's nodes table puts it in region {entry['region']!r}, "
                             "which the plan does not have", entry["node"], entry.get("op"))
        where[k] = entry["region"]
    listed: dict[int, str] = {}
    for r in data["regions"]:
        for name in r["nodes"]:
            k = index.get(name)
            if k is None:
                raise ModelError(f"region {r['id']} lists this node, but the model has no node "
                                 "of that name", name)
            if k in listed and listed[k] != r["id"]:
                raise ModelError(f"regions {listed[k]} and {r['id']} both list it",
                                 name, view.call(k).op_name)
            listed[k] = r["id"]
            if where[k] is not None and where[k] != r["id"]:
                raise ModelError(f"region {r['id']} lists it but the nodes table puts it in "
                                 f"{where[k]}: a move must be made in both places", name,
                                 view.call(k).op_name)
    for k, rid in enumerate(where):
        if rid is not None and rid != HOST and listed.get(k) != rid:
            raise ModelError(f"the nodes table puts it in region {rid}, which does not list "
                             "it: a move must be made in both places", view.names[k],
                             view.call(k).op_name)
    return [rid if rid is not None else listed.get(k, HOST) for k, rid in enumerate(where)]


def _with_bodies(view: ModelView, data: dict, taken: set[str], funcs: dict[str, Function],
                 reasons: dict[str, str], host: list) -> Function:
    """main with each listed control-flow node's bodies partitioned for its backends (the
    regions lifted from them go into ``funcs``, their names into ``taken``, the nodes left on
    the host into ``host`` and why into ``reasons``)."""
    from ..analysis import map_bodies
    from ..partition import _Lifting

    bodies = data.get("bodies", {})
    if not bodies:
        return view.func
    index = view.index()
    for name in bodies:
        if name not in index:
            raise ModelError("the plan lists bodies for this node, but the model has no node "
                             "of that name", name)
    liftings: dict[str, _Lifting] = {}

    def body(f: Function, scope) -> Function:
        names = bodies.get(scope[0])
        if not names:
            return f
        key = ",".join(names)
        if key not in liftings:
            try:
                chosen = resolve(names)
            except BackendError as exc:
                raise ModelError(f"bodies: {exc}", scope[0]) from None
            liftings[key] = _Lifting(chosen, False, True, taken, reasons)
            liftings[key].funcs = funcs
            liftings[key].host = host
        return liftings[key].function(f, scope)

    return map_bodies(view.func, body, (), view.order)
