"""partition: which backend runs which part of a model, as external functions main calls.

    mod = byoc.load_onnx("model.onnx")
    part = byoc.partition(mod, backends=["mine", "reference"])   # priority order
    byoc.explain(part)                   # {node name: why it stayed on the host}
    byoc.build(part).run({"input": x})   # main on the host, regions on their backends

    part = byoc.partition(byoc.annotate_range(mod, "reference", "conv1", "relu5"), annotated=True)
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable
from contextlib import contextmanager

from .analysis import (HOST_REASONS, annotate, find_regions, host_calls, is_annotation, node_key,
                       recorded)
from .backend import Backend, resolve
from .errors import ByocError, ModelError
from .ir import IRModule, post_order
from .passes.annotate import target_regions
from .passes.annotate_range import range_regions
from .passes.infer_types import infer_function
from .passes.merge import merge_regions
from .passes.merge_composite import composite_function
from .passes.partition_graph import lift_regions
from .passes.reject import reject_regions


def partition(mod: IRModule, backends: str | Backend | Iterable[str | Backend] = (), *,
              annotated: bool | None = None, merge: bool = True,
              no_fallback: bool = False) -> IRModule:
    """Partition main for ``backends`` (names or Backend objects, in priority order).

    Runs infer_types, merge_composite, annotate_target, merge_compiler_regions (unless
    ``merge=False``), partition_graph and reject_regions. A module already annotated (by hand or
    by annotate_range; ``annotated=None`` looks) keeps its regions as marked: only
    partition_graph and reject_regions run. ``no_fallback=True`` makes any node left on the host
    an error. Why each node stayed on the host is kept for ``byoc.explain``.
    """
    with _collector_paused():
        return _partition(mod, resolve(backends), annotated, merge, no_fallback)


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector: the passes build hundreds of thousands of small
    acyclic IR nodes, and each collection would walk them all again (a third of the time at
    100,000 nodes). Reference counting still frees everything as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _partition(mod: IRModule, chosen: list[Backend], annotated: bool | None, merge: bool,
               no_fallback: bool) -> IRModule:
    func = mod.main
    func, order = infer_function(func, post_order(func.body))
    if annotated is None:
        annotated = any(is_annotation(e) for e in order)
    if annotated:
        regions = find_regions(func)
        reasons = dict(mod.attrs.get(HOST_REASONS, {}))
    else:
        if not chosen:
            raise ByocError("partition needs at least one backend (backends=[...])")
        func, order = composite_function(func, order, chosen)
        regions, reasons = target_regions(func, order, chosen)
        if merge:
            regions = merge_regions(regions, [b.name for b in chosen])
    staged = IRModule({**mod.functions, "main": func}, {**mod.attrs, HOST_REASONS: reasons})
    out = reject_regions(lift_regions(staged, regions))
    if no_fallback:
        _refuse_host_nodes(out)
    return out


def _refuse_host_nodes(mod: IRModule) -> None:
    host = host_calls(post_order(mod.main.body))
    if host:
        first = host[0]
        why = mod.attrs[HOST_REASONS].get(node_key(first), "")
        more = f" ({len(host) - 1} other node(s) would too)" if len(host) > 1 else ""
        raise ModelError(f"would run on the host, and no_fallback is set: {why}{more}",
                         node_key(first), first.op_name)


def explain(mod: IRModule) -> dict[str, str]:
    """Why each node of a partitioned module's main stayed on the host: {node name: reason}."""
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
