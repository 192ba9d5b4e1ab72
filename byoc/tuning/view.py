"""The model as tuning and plans see it: main typed, its nodes in one topological order, each
with a unique name and a fingerprint.

    view = model_view(mod, backends)
    view.names[k], view.fingerprints[k]      # the k-th node (call) of main, producers first
    view.digest                              # of every fingerprint: the model a plan is for

A node's fingerprint covers its op, attributes (bodies included), the names of the values it
reads and writes, and the content of the weights it reads, so a plan made for another model, or
for one that has changed since, is caught at the first node that differs. The order is main's
post-order, deterministic for a given graph, the same for tune and for applying a plan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..analysis import IndexGraph, node_key, value_name
from ..backend import Backend
from ..ir import Call, Constant, Expr, Function, IRModule, TupleGetItem, post_order
from ..passes.annotate import _choose
from ..passes.infer_types import infer_function
from ..passes.merge_composite import composite_function
from .digest import Digests


@dataclass
class ModelView:
    """main's nodes for tuning and plans."""

    func: Function  # main, typed, composites of the backends merged
    order: list[Expr]  # post_order(func.body): leaves, calls, tuple items, the body last
    graph: IndexGraph
    calls: list[int]  # position in ``order`` of each node (call), producers first
    names: list[str]  # each node's name, unique (node_key, numbered where it repeats)
    fingerprints: list[str]
    digest: str
    owner: dict[str, str]  # composite name -> the backend whose pattern made it
    _items: dict[int, list[int]] | None = field(default=None, repr=False)
    _readers: dict[int, list[int]] | None = field(default=None, repr=False)

    def index(self) -> dict[str, int]:
        """Node name -> its index in ``calls``."""
        return {n: k for k, n in enumerate(self.names)}

    def call(self, k: int) -> Call:
        return self.order[self.calls[k]]  # type: ignore[return-value]

    def items(self) -> dict[int, list[int]]:
        """Position of a multi-output call -> positions of its tuple items."""
        if self._items is None:
            kids = self.graph.kids
            self._items = {}
            for i, e in enumerate(self.order):
                if isinstance(e, TupleGetItem):
                    self._items.setdefault(kids[i][0], []).append(i)
        return self._items

    def readers(self) -> dict[int, list[int]]:
        """Position -> positions of what reads it (the body included)."""
        if self._readers is None:
            self._readers = {}
            for i, ks in enumerate(self.graph.kids):
                for k in ks:
                    self._readers.setdefault(k, []).append(i)
        return self._readers


def model_view(mod: IRModule, backends: Sequence[Backend], digests: Digests | None = None
               ) -> ModelView:
    """main as tune and plans see it (composites of ``backends`` merged, as partition does)."""
    func, order = infer_function(mod.main, post_order(mod.main.body))
    func, order = composite_function(func, order, list(backends))
    graph = IndexGraph.of(order)
    calls = [i for i, e in enumerate(order) if isinstance(e, Call)]
    digests = digests or Digests()
    names: list[str] = []
    taken: dict[str, int] = {}
    fingerprints: list[str] = []
    whole = hashlib.sha256(b"byoc-model-view-1")
    for i in calls:
        call: Call = order[i]  # type: ignore[assignment]
        name = node_key(call)
        if name in taken:  # hand-built graphs may repeat names; imported ones never do
            taken[name] += 1
            name = f"{name}#{taken[name]}"
        taken.setdefault(name, 0)
        names.append(name)
        fp = _fingerprint(call, digests)
        fingerprints.append(fp)
        whole.update(f"{name}\0{fp}\0".encode())
    for p in func.params:
        whole.update(f"in:{p.name}:{p.type}\0".encode())
    owner = {entry.name: b.name for b in backends for entry in b.patterns}
    return ModelView(func, order, graph, calls, names, fingerprints, whole.hexdigest()[:32], owner)


def _fingerprint(call: Call, digests: Digests) -> str:
    h = hashlib.sha256(call.op_name.encode())
    h.update(b"\0")
    if isinstance(call.op, Function):
        h.update(digests.function(call.op).encode())
    for k, v in sorted(call.attrs.items()):
        h.update(f"{k}={digests.value(v)}\0".encode())
    for a in call.args:
        if a is None:
            h.update(b"-\0")
        elif isinstance(a, Constant):
            h.update(f"const:{a.name}:{digests.constant(a)}\0".encode())
        else:
            h.update(f"in:{value_name(a)}\0".encode())
    if call.span is not None:
        h.update(("out:" + ",".join(call.span.outputs)).encode())
    return h.hexdigest()[:12]


def takes(backend: Backend, call: Call, owner: dict[str, str]) -> bool | str:
    """True if ``backend`` can hold ``call`` in a region, else why not (as partition says)."""
    target, why = _choose(call, [backend], owner)
    return True if target == backend.name else why or f"{backend.name}: not supported"
