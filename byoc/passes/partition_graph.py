"""partition_graph: each annotated region becomes an external function that main calls.

    %0 = compiler_begin(%x, "ref")           def @main(%x) {
    %1 = Relu(%0)  /* span=relu */     ->       %0 = @ref_relu_5d41402a(%x);
    %2 = compiler_end(%1, "ref")                Abs(%0)
    %3 = Abs(%2)                             }
                                             def @ref_relu_5d41402a(%x) attrs={Compiler="ref",
                                                 global_symbol="ref_relu_5d41402a", Primitive=1,
                                                 output_names=["relu"]} { Relu(%x) }

Rules:
1. Parameters are the values entering the region, in order of first use, named by their ONNX
   names. Constants are bound into the body, or passed as parameters where the backend says
   ``bind_constants=False``.
2. Results are the values leaving the region (read by the host, by another region, or returned
   by main), each once, producers first. Several come back as a Tuple that main unpacks with
   TupleGetItem; ``output_names`` lists their ONNX names.
3. A region is named ``<backend>_<its first node's span>_<8 hex digits of a hash of its
   nodes>``, backend and span in [A-Za-z0-9_] (a C identifier whatever the backend's name, a
   name starting with a digit prefixed ``region_``): stable, blind to the rest of the graph,
   and made unique in the module. A region inside an If, Loop or Scan body has the body's path
   after the backend (``<backend>_<If span>_then_<first node>_<hash>``).
4. main calls each region after every value it reads; every host call of main gets a reason
   for ``byoc.explain`` (the one recorded, else "not in any annotated region").
5. A region annotated for ``"default"`` (TVM's name for the host) is not lifted: its nodes stay
   on the host, as in TVM's PartitionGraph.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from ..analysis import (HOST_REASONS, MARKED_HOST, Regions, Scope, Units, completed, contract,
                        find_regions, host_marked, node_key, scope_label, unique, unit_order,
                        value_name)
from ..backend import find_backend
from ..ir import (NO_ATTRS, Call, Constant, Expr, Function, GlobalVar, IRModule, Span, Tuple,
                  TupleGetItem, Var, with_children)


def partition_graph(mod: IRModule, bind_constants: bool | None = None) -> IRModule:
    """Lift main's annotated regions into external functions.

    ``bind_constants`` overrides each backend's own setting (True for unregistered names)."""
    return lift_regions(mod, find_regions(mod.main), bind_constants)


def lift_regions(mod: IRModule, regions: Regions, bind_constants: bool | None = None) -> IRModule:
    """The module with ``regions`` of main lifted (see the module docstring)."""
    taken = set(mod.functions)
    funcs: dict[str, Function] = {}
    reasons = dict(mod.attrs.get(HOST_REASONS, {}))
    main, host = lift_function(regions, taken, funcs, bind_policy(bind_constants), (), reasons)
    reasons = completed(host, reasons)
    return IRModule({**mod.functions, "main": main, **funcs}, {**mod.attrs, HOST_REASONS: reasons})


def lift_function(regions: Regions, taken: set[str], funcs: dict[str, Function],
                  binds: Callable[[str], bool], scope: Scope = (),
                  reasons: dict[str, str] | None = None) -> tuple[Function, list[Expr]]:
    """``regions.func`` calling its regions, each lifted into ``funcs`` under a name not in
    ``taken`` (both updated), and the nodes left on the host. ``scope`` is the path of the body
    the function is (``()`` for main); region names carry it. Works the same for main and for
    any If, Loop or Scan body, so ``byoc.partition`` lifts every body with one shared ``taken``.
    The nodes of regions annotated for the host get their reason in ``reasons``.

        fn(%x) {(Relu(%x),)}   ->   fn(%x) {(@reference_if_then_relu_1a2b3c4d(%x),)}
    """
    regions, marked = host_marked(regions)
    if reasons is not None:
        reasons.update((node_key(regions.order[i]), MARKED_HOST) for i in marked
                       if isinstance(regions.order[i], Call))
    units = contract(regions)
    schedule = unit_order(units, regions)
    order, kids = regions.order, regions.index_graph().kids
    assert order[-1] is regions.func.body, "Regions.order must end with the body"
    members = regions.members()
    inputs, outputs = _boundary(regions, units, members)
    calls: list[tuple[Function, list[int], list[int]]] = []
    for r, target in enumerate(regions.targets):
        name = unique(region_name(target, [order[i] for i in members[r]], scope), taken)
        params_of = inputs[r]
        if binds(target):
            params_of = [i for i in params_of if not isinstance(order[i], Constant)]
        func = funcs[name] = _function(name, target, order, kids, members[r], params_of,
                                       outputs[r])
        calls.append((func, params_of, outputs[r]))
    new = list(order)  # each node's replacement in the function; leaves stay themselves
    n_regions, host = units.n_regions, units.host
    for u in schedule:
        if u >= n_regions:
            i = host[u - n_regions]
            new[i] = with_children(order[i], [new[k] for k in kids[i]])
            continue
        func, args, outs = calls[u]
        name = func.attrs["global_symbol"]
        span = Span(name, "", tuple(func.attrs["output_names"]))
        call = Call(GlobalVar(name), tuple([new[a] for a in args]), NO_ATTRS, func.ret_type, span)
        if len(outs) == 1:
            new[outs[0]] = call
        else:
            for k, i in enumerate(outs):
                new[i] = TupleGetItem(call, k)
    func = regions.func
    return Function(func.params, new[-1], func.attrs), [order[i] for i in host]


_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def region_name(target: str, nodes: list[Expr], scope: Scope = ()) -> str:
    """``<backend>_<first node>_<hash of the nodes>``: the same for the same region anywhere.

    In a body, the body's path comes after the backend: ``reference_if_then_relu_1a2b3c4d``
    for a region of the then branch of If ``if`` (``analysis.scope_label``)."""
    parts, indices, first = [target], [], None  # one loop: this runs once per region
    for n in nodes:
        if isinstance(n, Call):
            key = node_key(n)
            parts.append(f"{n.op_name}\0{key}")
            first = key if first is None else first
        elif isinstance(n, TupleGetItem):
            indices.append(f"[{n.index}]")
    digest = hashlib.sha1("\0".join(parts + indices).encode()).hexdigest()[:8]
    first = _UNSAFE.sub("_", first if first is not None else "region")[:48]
    where = _UNSAFE.sub("_", scope_label(scope)) + "_" if scope else ""
    backend = _UNSAFE.sub("_", target)[:48]
    if not backend[:1].isalpha() and backend[:1] != "_":  # "" or a digit: not a C identifier
        backend = "region_" + backend
    return f"{backend}_{where}{first}_{digest}"


def _boundary(regions: Regions, units: Units, members: list[list[int]]
              ) -> tuple[list[list[int]], list[list[int]]]:
    """Per region: the nodes whose values enter it (first use first) and leave it (producers
    first), as positions."""
    unit_of, kids, n_regions = units.unit_of, regions.index_graph().kids, units.n_regions
    entering: list[list[int]] = []
    for r, nodes in enumerate(members):  # a region's own small set, not one for the graph
        mine: list[int] = []
        seen: set[int] = set()
        for i in nodes:
            for k in kids[i]:
                if unit_of[k] != r and k not in seen:
                    seen.add(k)
                    mine.append(k)
        entering.append(mine)
    leaves = bytearray(len(unit_of))  # a node's value leaves the region holding it
    for i, u in enumerate(unit_of):
        for k in kids[i]:
            uk = unit_of[k]
            if uk != u and 0 <= uk < n_regions:
                leaves[k] = 1
    leaves[-1] = 1  # main's result leaves whatever region holds it
    return entering, [[i for i in nodes if leaves[i]] for nodes in members]


def bind_policy(override: bool | None) -> Callable[[str], bool]:
    """Whether each backend wants constants bound into its regions (asked once per name)."""
    cache: dict[str, bool] = {}

    def binds(target: str) -> bool:
        if override is not None:
            return override
        if target not in cache:
            backend = find_backend(target)
            cache[target] = True if backend is None else backend.bind_constants
        return cache[target]

    return binds


def _function(name: str, target: str, order: list[Expr], kids: list[tuple[int, ...]],
              nodes: list[int], params_of: list[int], outputs: list[int]) -> Function:
    taken: set[str] = set()
    inner: dict[int, Expr] = {}
    for k, a in enumerate(params_of):
        param = unique(value_name(order[a]) or f"p{k}", taken)
        inner[a] = Var(param, order[a].type)  # type: ignore[attr-defined]
    for i in nodes:
        inner[i] = with_children(order[i], [inner.get(k) or order[k] for k in kids[i]])
    results = [inner[o] for o in outputs]
    body = results[0] if len(results) == 1 else Tuple(tuple(results))
    attrs = {"Compiler": target, "global_symbol": name, "Primitive": 1,
             "output_names": [value_name(order[o]) for o in outputs]}
    return Function(tuple(inner[a] for a in params_of), body, attrs)
