"""The seed's "mirror": cheap forward values recomputed in the backward pass, not kept alive.

A forward value that the backward pass reads lives from its forward step to its last backward
use, which for early layers is nearly the whole run. An elementwise value (FusePattern ELEMWISE
or BROADCAST) is cheap to make again, so the backward reads a copy (a mirror) computed next to
its use, and the original dies after its last forward use: time for memory.

A mirror reads the mirror's inputs instead, which only saves memory if it keeps no more tensors
alive than it frees. So a value is mirrored when its mirror, with the mirrors of its elementwise
inputs, reads at most one stored tensor (parameters and constants are held anyway): chains such
as ``x * Sigmoid(x + b)`` come back from x alone.
"""

from __future__ import annotations

from ..ir import (Call, Constant, Expr, Span, TupleType, Var, children, post_order,
                  with_children)
from ..op import FusePattern, registry

CHEAP = (FusePattern.ELEMWISE, FusePattern.BROADCAST)
# Elementwise by shape but not by value: a second run would draw a different mask.
NOT_REPEATABLE = frozenset({"Dropout"})


def _cheap(e: Expr) -> bool:
    if not (isinstance(e, Call) and isinstance(e.op, str)) or isinstance(e.type, TupleType):
        return False
    entry = registry.lookup(e.op)
    return entry is not None and entry.fuse_pattern in CHEAP and e.op not in NOT_REPEATABLE


def mirrorable(forward: list[Expr]) -> set[Expr]:
    """The forward calls worth mirroring: each one's mirror (with those of its cheap
    inputs) reads at most one stored tensor. ``forward`` is a post-order."""
    reads: dict[Expr, frozenset[Expr]] = {}  # call -> stored tensors the mirror reads
    for e in forward:
        if not _cheap(e):
            continue
        stored: set[Expr] = set()
        for a in children(e):
            if isinstance(a, (Var, Constant)):
                continue
            stored |= reads.get(a, {a})
        if len(stored) <= 1:
            reads[e] = frozenset(stored)
    return set(reads)


def recompute_elementwise(forward_outs: list[Expr], grads: list[Expr]) -> list[Expr]:
    """``grads`` with every read of a mirrorable forward value replaced by its mirror."""
    forward = post_order(forward_outs)
    in_forward = set(forward)
    cheap = mirrorable(forward)
    mirrors: dict[Expr, Expr] = {}

    def mirror(root: Call) -> Expr:
        stack: list[Call] = [root]
        while stack:  # iterative: a long elementwise chain must not recurse
            e = stack[-1]
            if e in mirrors:
                stack.pop()
                continue
            todo = [a for a in children(e) if a in cheap and a not in mirrors]
            if todo:
                stack.extend(todo)  # type: ignore[arg-type]
                continue
            stack.pop()
            args = tuple(None if a is None else mirrors.get(a, a) for a in e.args)
            base = e.span.name if e.span is not None else e.op_name
            mirrors[e] = Call(e.op, args, e.attrs, e.type, Span(f"{base}/recompute", e.op_name))
        return mirrors[root]

    new: dict[Expr, Expr] = {}
    for e in post_order(grads):
        if e in in_forward:
            new[e] = e
            continue
        kids = children(e)
        swapped = [mirror(k) if k in cheap else new[k] for k in kids]  # type: ignore
        new[e] = with_children(e, swapped) if kids else e
    return [new[g] for g in grads]
