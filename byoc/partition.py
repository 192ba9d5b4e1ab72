"""partition: which backend runs which part of a model, as external functions main calls.

    mod = byoc.load_onnx("model.onnx")
    part = byoc.partition(mod, backends=["mine", "reference"])   # priority order
    byoc.explain(part)                   # {node name: why it stayed on the host}
    byoc.build(part).run({"input": x})   # main on the host, regions on their backends

    part = byoc.partition(byoc.annotate_range(mod, "reference", "conv1", "relu5"), annotated=True)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .analysis import (HOST_REASONS, Scope, annotate, completed, find_regions, host_calls,
                       is_annotation, is_control_flow, map_bodies, node_key, recorded,
                       walk_orders)
from .backend import Backend, resolve
from .errors import ByocError, ModelError
from .ir import Expr, Function, IRModule, post_order
from .ir.collector import collector_paused
from .passes.annotate import target_regions
from .passes.annotate_range import range_regions
from .passes.infer_types import infer_function
from .passes.merge import merge_regions
from .passes.merge_composite import composite_function
from .passes.partition_graph import bind_policy, lift_function
from .passes.reject import reject_regions
from .passes.whole_control_flow import whole_control_flow


def partition(mod: IRModule, backends: str | Backend | Iterable[str | Backend] = (), *,
              annotated: bool | None = None, merge: bool = True,
              no_fallback: bool = False, plan=None, whole_control_flow: bool = True
              ) -> IRModule:
    """Partition main and every body in it for ``backends`` (names or Backend objects, in
    priority order).

    Each function (main, each If branch, Loop and Scan body, nested to any depth) runs
    infer_types, merge_composite, annotate_target, merge_compiler_regions (unless
    ``merge=False``), partition_graph and reject_regions. A module already annotated (by hand or
    by annotate_range; ``annotated=None`` looks) keeps its regions as marked: only
    partition_graph and reject_regions run. ``no_fallback=True`` makes any node left on the host
    an error (control-flow nodes aside: they always stay, and their bodies are checked). Why
    each node stayed on the host is kept for ``byoc.explain``. An If, Loop or Scan whose bodies
    one backend registered with ``control_flow=True`` (onnxruntime) takes whole goes to it whole
    (``passes/whole_control_flow.py``), unless ``whole_control_flow=False``: then the host runs
    every control-flow call and its bodies are partitioned (as a tuned plan places them).

    ``plan`` (a ``byoc.Plan``, its JSON dict or a path to a plan file from ``byoc tune``)
    places every node as the plan says, measuring nothing (``byoc/tuning/apply.py``).
    """
    if plan is not None:
        if backends or annotated or no_fallback:
            raise ByocError("partition takes a plan or backends (and annotated, no_fallback), "
                            "not both")
        from .tuning import apply_plan

        with collector_paused():
            return apply_plan(mod, plan)
    with collector_paused():
        chosen = resolve(backends)
        out = _partition(mod, chosen, annotated, merge, no_fallback, whole_control_flow)
        out.attrs["partition_backends"] = [b.name for b in chosen]
        return out


def _partition(mod: IRModule, chosen: list[Backend], annotated: bool | None, merge: bool,
               no_fallback: bool, whole: bool = True) -> IRModule:
    # main's nodes are walked once here and the walk shared by the passes below (it was walked
    # four times, a fifth of the partition at 100,000 nodes).
    order = post_order(mod.main.body)
    if annotated is None:
        annotated = any(is_annotation(e) for _, _, f_order in walk_orders(mod.main, (), order)
                        for e in f_order)
    if not annotated and not chosen:
        raise ByocError("partition needs at least one backend (backends=[...])")
    reasons = dict(mod.attrs.get(HOST_REASONS, {})) if annotated else {}
    lifting = _Lifting(chosen, annotated, merge, set(mod.functions), reasons, whole)
    main = lifting.function(mod.main, (), order)
    staged = IRModule({**mod.functions, "main": main, **lifting.funcs},
                      {**mod.attrs, HOST_REASONS: completed(lifting.host, reasons)})
    out = reject_regions(staged)
    if no_fallback:
        _refuse_host_nodes(out)
    return out


class _Lifting:
    """One partition of a module: every function (main, then each body) through the same
    passes, sharing the region names taken, the lifted functions and the host reasons.

    Bodies go first, deepest first: a control-flow call is then rebuilt once with its final
    bodies, and the function holding it is annotated, merged and lifted around it (it stays on
    the host, so no region ever crosses a body's boundary). Each function is swept a constant
    number of times, so the whole partition is linear in the nodes of all functions.

        def @main(%c, %x) {                        def @main(%c, %x) {
          If(%c, %x) {                               If(%c, %x) {
            then_branch=fn(%x) {(Relu(%x),)},  ->      then_branch=fn(%x) {
            else_branch=...}                              (@reference_if_then_relu_<hash>(%x),)},
        }                                              else_branch=...}
                                                   }
                                                   def @reference_if_then_relu_<hash>(%x)
                                                     attrs={Compiler="reference", ...} { Relu(%x) }
    """

    def __init__(self, chosen: list[Backend], annotated: bool, merge: bool, taken: set[str],
                 reasons: dict[str, str], whole: bool = True):
        self.chosen, self.annotated, self.merge = chosen, annotated, merge
        self.taken = taken
        self.reasons = reasons
        self.funcs: dict[str, Function] = {}
        self.host: list[Expr] = []  # every node left on the host, in every function
        self.binds = bind_policy(None)
        self.whole = whole and not annotated
        self.verdicts: dict[tuple[int, str], bool] = {}  # whole_control_flow's, per body

    def function(self, func: Function, scope: Scope, order: list[Expr] | None = None
                 ) -> Function:
        """``func`` partitioned; ``order`` is its ``post_order`` if the caller has it."""
        if order is None:
            order = post_order(func.body)
        # control flow a backend runs whole keeps its bodies as they are
        whole = whole_control_flow(order, self.chosen, self.verdicts) if self.whole else {}
        mapped = map_bodies(func, lambda body, inner: body if inner[-2] in whole
                            else self.function(body, inner), scope, order)
        if mapped is not func:
            order = post_order(mapped.body)
        func, order = infer_function(mapped, order)
        if self.annotated:
            # A body nobody annotated has no markers: it is all host, as marked.
            regions = find_regions(func)
        else:
            func, order = composite_function(func, order, self.chosen)
            regions, reasons = target_regions(func, order, self.chosen, whole)
            self.reasons.update(reasons)
            if self.merge:
                regions = merge_regions(regions, [b.name for b in self.chosen])
        lifted, host = lift_function(regions, self.taken, self.funcs, self.binds, scope,
                                     self.reasons)
        self.host.extend(host)
        return lifted


def _refuse_host_nodes(mod: IRModule) -> None:
    # A control-flow call is only a container here: the nodes of its bodies are checked instead.
    host = [c for _, _, order in walk_orders(mod.main) for c in host_calls(order)
            if not is_control_flow(c)]
    if host:
        first = host[0]
        why = mod.attrs[HOST_REASONS].get(node_key(first), "")
        more = f" ({len(host) - 1} other node(s) would too)" if len(host) > 1 else ""
        raise ModelError(f"would run on the host, and no_fallback is set: {why}{more}",
                         node_key(first), first.op_name)


def explain(mod: IRModule) -> dict[str, str]:
    """Why each node of a partitioned module stayed on the host: {node name: reason}, for the
    nodes of main and of every If, Loop and Scan body in it."""
    return recorded(mod)


def annotate_range(mod: IRModule, backend: str | Backend, start: str | int | re.Pattern,
                   end: str | int | None = None) -> IRModule:
    """main with one region of ``backend`` over a node range (see ``passes.annotate_range``).

    ``start`` and ``end`` are ONNX node names or indices into main's topological order ("" or
    None: the first/last node); or ``start`` is a compiled regex picking nodes by name.
    """
    (chosen,) = resolve(backend)
    func, order = infer_function(mod.main, post_order(mod.main.body))
    regions, reasons = range_regions(func, order, chosen, start, end)
    return IRModule({**mod.functions, "main": annotate(regions)},
                    {**mod.attrs, HOST_REASONS: reasons})
