"""Candidates: main's nodes cut into atoms, and any run of consecutive atoms as a function of
its own, fed the real tensors that cross its boundary.

    atoms = cut_atoms(view, tensors, target=32)    # [0, a1, a2, ..., n]: cut positions
    func = segment_function(view, atoms[2], atoms[5])   # nodes a2..a5-1, a function of them

Every run of a topological order is convex (a path between two of its nodes only passes nodes
between them), so any segment can be lifted, measured alone and placed without a cycle.

Where to cut: each atom gets about the same share of the model's work (elements read and
written, plus multiply-adds for Conv/MatMul/Gemm), and within a few nodes of that point the cut
crossed by the fewest live tensors is taken (between residual blocks, between layers): fewer
tensors to move when neighbouring segments run on different devices. Cuts depend only on the
graph and the tensors' shapes, never on timings, so they are the same on every tune.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..analysis import node_key, unique, value_name
from ..ir import (
    Call,
    Constant,
    Expr,
    Function,
    Span,
    Tuple,
    TupleGetItem,
    Var,
    with_children,
)
from .view import ModelView

_MAC_OPS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "ConvInteger", "MatMulInteger",
            "QLinearConv", "QLinearMatMul", "FusedMatMul"}


def _size(tensors: Mapping[str, np.ndarray], expr: Expr) -> int:
    if isinstance(expr, Constant):
        return 0  # weights are read, but not in proportion to the work
    value = tensors.get(value_name(expr))
    return int(getattr(value, "size", 0) or 0)


def node_work(view: ModelView, tensors: Mapping[str, np.ndarray]) -> list[int]:
    """A rough, deterministic measure of each node's work: elements in and out, plus
    multiply-adds/8 for the ops that do many per element."""
    work = []
    for k in range(len(view.calls)):
        call = view.call(k)
        outs = call.span.outputs if call.span is not None else ()
        out = sum(int(getattr(tensors.get(n), "size", 0) or 0) for n in outs if n)
        ins = sum(_size(tensors, a) for a in call.args if a is not None)
        w = 1 + out + ins
        if call.op in _MAC_OPS and len(call.args) > 1 and call.args[1] is not None:
            weight = call.args[1].type
            shape = getattr(weight, "shape", None) or ()
            if call.op in ("MatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "FusedMatMul"):
                first = call.args[0].type if call.args[0] is not None else None
                k_dim = (getattr(first, "shape", None) or (1,))[-1]
                k_dim = k_dim if isinstance(k_dim, int) else 1
            else:
                k_dim = int(np.prod([d for d in shape[1:] if isinstance(d, int)] or [1]))
            w += out * k_dim // 8
        work.append(w)
    return work


def cut_atoms(view: ModelView, tensors: Mapping[str, np.ndarray], target: int = 24) -> list[int]:
    """Cut positions ``[0, ..., n]`` making ``target`` atoms (fewer only for a smaller model) of
    similar work, each cut where the fewest tensors cross within a short look-ahead."""
    n = len(view.calls)
    if n == 0:
        return [0]
    target = max(1, min(target, n))
    if target == n:
        return list(range(n + 1))
    work = node_work(view, tensors)
    left = [0] * (n + 1)  # work from each position to the end
    for k in range(n - 1, -1, -1):
        left[k] = left[k + 1] + work[k]
    width = cut_widths(view)
    look = n // (2 * target)
    cuts, p = [0], 0
    while len(cuts) < target:
        share = left[p] / (target - len(cuts) + 1)
        q, acc = p, 0
        while q < n and (q == p or acc + work[q] <= share):
            acc += work[q]
            q += 1
        # at least one node per atom still to come
        q = min(q, n - (target - len(cuts)))
        if q <= p:
            break
        p = min(range(q, min(n - (target - len(cuts)), q + look) + 1),
                key=lambda c: (width[c], c))
        cuts.append(p)
    cuts.append(n)
    return cuts


def cut_widths(view: ModelView) -> list[int]:
    """For each cut position p (before node p; p = 0..n), how many values of nodes before p are
    still read at or after p (by a node, or as an output of main)."""
    n = len(view.calls)
    node_of = {pos: k for k, pos in enumerate(view.calls)}
    kids = view.graph.kids
    producer: dict[int, int] = {}  # position of a value -> the node that made it
    for i, e in enumerate(view.order):
        if i in node_of:
            producer[i] = node_of[i]
        elif isinstance(e, TupleGetItem) and kids[i][0] in node_of:
            producer[i] = node_of[kids[i][0]]
    last = [-1] * n
    body = len(view.order) - 1
    for i in range(len(view.order)):
        reader = node_of.get(i, n if i == body else None)
        if reader is None:
            continue
        for k in kids[i]:
            src = producer.get(k)
            if src is not None:
                last[src] = max(last[src], reader)
    if body not in node_of:  # main returns a tuple: what it holds is read at the end
        for k in kids[body]:
            src = producer.get(k)
            if src is not None:
                last[src] = n
    delta = [0] * (n + 2)
    for k in range(n):
        if last[k] > k:
            delta[k + 1] += 1
            delta[last[k] + 1] -= 1
    out, running = [], 0
    for p in range(n + 1):
        running += delta[p]
        out.append(running)
    return out


def segment_positions(view: ModelView, start: int, stop: int) -> list[int]:
    """Positions in ``view.order`` of nodes ``start..stop-1`` and of their tuple items,
    producers first."""
    items = view.items()
    out: list[int] = []
    for i in view.calls[start:stop]:
        out.append(i)
        out.extend(items.get(i, ()))
    return sorted(out)


def segment_function(view: ModelView, start: int, stop: int) -> tuple[Function, list[str]]:
    """Nodes ``start..stop-1`` as a function, and the tensor each parameter takes: a parameter
    per value entering (named as in the model), a result per value leaving (``output_names``
    as in the model); weights bound. Nodes keep the names the view gives them."""
    order, kids = view.order, view.graph.kids
    positions = segment_positions(view, start, stop)
    inside = set(positions)
    new: dict[int, Expr] = {}
    params: list[Var] = []
    tensors: list[str] = []
    taken: set[str] = set()
    for i in positions:
        for k in kids[i]:
            if k in inside or k in new or isinstance(order[k], Constant):
                continue
            v = order[k]
            tensors.append(value_name(v))
            new[k] = Var(unique(tensors[-1] or f"p{len(params)}", taken), v.type)  # type: ignore
            params.append(new[k])  # type: ignore[arg-type]
    renamed = {view.calls[k]: view.names[k] for k in range(start, stop)
               if view.names[k] != node_key(view.call(k))}
    for i in positions:
        e = with_children(order[i], [new.get(k, order[k]) for k in kids[i]])
        if i in renamed:  # a repeated name, numbered: the plan must tell the nodes apart
            span = e.span or Span("", e.op_name, ())  # type: ignore[union-attr]
            e = Call(e.op, e.args, e.attrs, e.type, span._replace(name=renamed[i]))  # type: ignore
        new[i] = e
    readers = view.readers()
    body = len(order) - 1
    outs = [i for i in positions
            if i == body or any(r not in inside for r in readers.get(i, ()))]
    results = [new[i] for i in outs]
    result = results[0] if len(results) == 1 else Tuple(tuple(results))
    func = Function(tuple(params), result,
                    {"output_names": [value_name(order[i]) for i in outs]})
    return func, tensors
