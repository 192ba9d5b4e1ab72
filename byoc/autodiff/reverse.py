"""Reverse-mode differentiation of main: ``gradient(mod, loss, wrt)``.

The seed's algorithm. Walk the graph once in reverse topological order; at each node, sum the
partial derivatives its outputs received from their uses (Add, or Sum for more than two), hand
them to the op's gradient rule (``OpDef.gradient``), and pass the input gradients it returns on
to the inputs. Every step builds IR with byoc.op builders; nothing is computed. The walk is one
loop over one post-order, so it is linear in the graph and never recurses.

    def @main(%x, %w) { %0 = MatMul(%x, %w); ReduceSum(%0) }           loss = output 0
      ->
    def @main(%x, %w) {
      %0 = MatMul(%x, %w);  %1 = ReduceSum(%0);
      %2 = Expand(1f, [2, 4]) /* span=ReduceSum/grad */;                 d loss / d %0
      %3 = Gemm(%x, %2, transA=1) /* span=MatMul/grad */;               d loss / d %w
      (%1, %3)                                  output_names = [loss, "grad:w"]
    }
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..errors import ModelError
from ..ir import (DEFAULTS, Call, Constant, Expr, Function, IRModule, Span, TensorType, Tuple,
                  TupleGetItem, TupleType, Type, Var, children, post_order, rewrite)
from ..op import make_call, registry
from .recompute import recompute_elementwise
from .rule import Backward, GradientError
from .shapes import dims_of

FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
RECOMPUTE = (None, "elementwise")


def gradient(mod: IRModule, loss: str, wrt: Sequence[str], *,
             recompute: str | None = None) -> IRModule:
    """The module whose main returns main's outputs, then d loss / d w for each w in ``wrt``,
    named ``grad:<w>`` in ``output_names``.

    ``wrt`` names parameters of main or initializers (named Constants). Initializers named in
    ``wrt`` become parameters of the new main, with the same names and types, after the
    original parameters, their stored values kept as defaults (``DEFAULTS``, as ONNX has an
    initializer that is also a graph input): a run with only the data inputs uses them, and a
    training loop feeds the current weights each step instead. Gradients
    follow the outputs in the order they are complete (``completion_order``), so find them by
    name. The loss is seeded with ones of its shape: a non-scalar loss differentiates the sum
    of its elements.
    ``recompute="elementwise"`` recomputes cheap forward values in the backward pass instead of
    keeping them alive (see ``recompute.py``).
    """
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, not {recompute!r}")
    main = mod.main
    outs = _outputs(main)
    names = list(main.attrs.get("output_names") or [f"output_{i}" for i in range(len(outs))])
    if loss not in names:
        raise ModelError(f"the loss {loss!r} is not an output of main; outputs: {names}")
    wrt = list(wrt)
    if len(set(wrt)) != len(wrt):
        raise ModelError(f"wrt names a value twice: {wrt}")
    outs, params, targets, stored = _lift_initializers(main, outs, wrt)
    for v in targets:
        if not _is_float(v.type):
            raise ModelError(f"wrt {v.name!r} is {v.type}: only floating-point values have "
                             "gradients")
    loss_expr = outs[names.index(loss)]
    t = loss_expr.type
    if not isinstance(t, TensorType) or t.dtype not in FLOATS:
        raise ModelError(f"the loss {loss!r} must be a floating-point tensor, not {t}")
    grads = backprop(loss_expr, targets, loss)
    if recompute == "elementwise":
        grads = recompute_elementwise(outs, grads)
    order = completion_order(loss_expr, targets)
    attrs = {**main.attrs, "output_names": names + [f"grad:{wrt[k]}" for k in order]}
    if stored:
        attrs[DEFAULTS] = {**(main.attrs.get(DEFAULTS) or {}), **stored}
    body = Tuple(tuple(outs + [grads[k] for k in order]))
    return mod.with_function("main", Function(tuple(params), body, attrs))


def completion_order(loss: Expr, wrt: Sequence[Var]) -> list[int]:
    """Indices of ``wrt``, the value whose gradient is complete first (read nearest the loss)
    first; unread values last, ties in ``wrt`` order.

    The executor schedules main by a post-order from its outputs in turn. Asked first for
    the gradient of the first layer, it would walk the whole backward chain and only then
    come back for the other layers' weight gradients, keeping every layer's output gradient
    alive to the end. In this order each weight gradient is made, and its inputs freed, as
    soon as the backward pass reaches its layer.
    """
    first_read: dict[Expr, int] = {}
    for k, e in enumerate(post_order(loss)):
        for c in children(e):
            first_read.setdefault(c, k)
    return sorted(range(len(wrt)), key=lambda k: -first_read.get(wrt[k], -1))


def _outputs(main: Function) -> list[Expr]:
    body, names = main.body, main.attrs.get("output_names")
    if isinstance(body, Tuple) and names is not None and len(names) == len(body.fields):
        return list(body.fields)
    return [body]


def _lift_initializers(main: Function, outs: list[Expr], wrt: list[str]
                       ) -> tuple[list[Expr], list[Var], list[Var], dict[str, np.ndarray]]:
    """Outputs and parameters with the initializers in ``wrt`` turned into parameters, the
    Var of every ``wrt`` name, and the stored value of each initializer lifted."""
    by_name = {p.name: p for p in main.params}
    wanted = {n for n in wrt if n not in by_name}
    lifted: dict[str, Var] = {}
    stored: dict[str, np.ndarray] = {}
    if wanted:
        for e in post_order(outs):
            if isinstance(e, Constant) and e.name in wanted and e.name not in lifted:
                lifted[e.name] = Var(e.name, e.type)
                stored[e.name] = e.value
        missing = [n for n in wrt if n not in by_name and n not in lifted]
        if missing:
            raise ModelError(f"wrt {missing[0]!r} is neither a parameter of main nor an "
                             f"initializer the outputs read; parameters: {sorted(by_name)}")

        def swap(orig: Expr, rebuilt: Expr) -> Expr:
            if isinstance(orig, Constant) and orig.name in lifted:
                return lifted[orig.name]
            return rebuilt

        outs, _ = rewrite(outs, swap)
    params = list(main.params) + [lifted[n] for n in wrt if n in lifted]
    targets = [by_name[n] if n in by_name else lifted[n] for n in wrt]
    return outs, params, targets, stored


def _is_float(t: Type) -> bool:
    """Whether a value of type t can carry a gradient (an unknown dtype might)."""
    if isinstance(t, TupleType):
        return any(_is_float(f) for f in t.fields)
    return isinstance(t, TensorType) and (t.dtype in FLOATS or t.dtype is None)


def _key(e: Expr) -> tuple[Expr, int]:
    """Which output a value is: (the call, output index); plain values are output 0."""
    while isinstance(e, TupleGetItem) and isinstance(e.tuple_value, Tuple):
        e = e.tuple_value.fields[e.index]
    if isinstance(e, TupleGetItem):
        return e.tuple_value, e.index
    return e, 0


def _emit(where: str, op: str, *args: object, **attrs: object) -> Call:
    return make_call(op, *args, span=Span(f"{where}/grad", op), **attrs)


def _name(e: Expr) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Call):
        return e.span.name if e.span is not None else e.op_name
    return type(e).__name__


def _total(parts: list[Expr] | None, where: str) -> Expr | None:
    """The sum of the partial derivatives a value received from its uses."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return _emit(where, "Add" if len(parts) == 2 else "Sum", *parts)


def _fill(value: float, like: Expr, where: str) -> Expr:
    """A tensor of like's shape and dtype, all ``value``, without a constant of its size."""
    t = like.type
    assert isinstance(t, TensorType)
    scalar = Constant(np.asarray(value, dtype=t.dtype))
    if t.shape == ():
        return scalar
    shape = (Constant(np.asarray(t.shape, dtype=np.int64)) if t.is_static else
             _emit(where, "Shape", like))
    return _emit(where, "Expand", scalar, shape)


def backprop(loss: Expr, wrt: Sequence[Var], loss_name: str = "loss") -> list[Expr]:
    """d loss / d v for each v in ``wrt``, as IR over the graph of ``loss``."""
    order = post_order(loss)
    targets = set(wrt)
    # needs[e]: e is a float value that depends on some wrt; only those carry gradients.
    needs: dict[Expr, bool] = {}
    for e in order:
        if isinstance(e, Var):
            needs[e] = e in targets
        elif isinstance(e, (Call, Tuple, TupleGetItem)):
            needs[e] = _is_float(e.type) and any(needs[c] for c in children(e))
        else:
            needs[e] = False
    adjoint: dict[tuple[Expr, int], list[Expr]] = defaultdict(list)
    retyped: dict[tuple[Expr, Type], Expr] = {}
    if needs[loss]:
        adjoint[_key(loss)].append(_fill(1.0, loss, loss_name))
    for e in reversed(order):
        if not (isinstance(e, Call) and needs[e]):
            continue
        where = _name(e)
        n_out = len(e.type.fields) if isinstance(e.type, TupleType) else 1
        grads = tuple(_total(adjoint.pop((e, i), None), where) for i in range(n_out))
        if all(g is None for g in grads):
            continue  # e feeds the loss only through values that carry no gradient
        wants = tuple(a is not None and needs[a] for a in e.args)
        for a, g in zip(e.args, _apply_rule(e, grads, wants, loss_name)):
            if a is not None and g is not None and needs[a]:
                adjoint[_key(a)].append(_typed(g, a, grads, e, retyped))
    return [_total(adjoint.get((v, 0)), v.name) or _fill(0.0, v, v.name) for v in wrt]


def _apply_rule(call: Call, grads: tuple[Expr | None, ...], wants: tuple[bool, ...],
                loss_name: str) -> Sequence[Expr | None]:
    node = call.span.name if call.span is not None else None
    entry = registry.lookup(call.op) if isinstance(call.op, str) else None
    if entry is None or entry.gradient is None:
        what = "a call of an external function" if not isinstance(call.op, str) else call.op
        raise ModelError(f"no gradient rule for {what}, which lies between the loss "
                         f"{loss_name!r} and the values differentiated", node, call.op_name)
    try:
        return entry.gradient(Backward(call, grads, wants))
    except GradientError as exc:
        raise ModelError(f"cannot differentiate: {exc}", node, call.op_name) from None


def _typed(g: Expr, x: Expr, passed: tuple[Expr | None, ...], call: Call,
           memo: dict[tuple[Expr, Type], Expr]) -> Expr:
    """g with x's type: a gradient has exactly its value's shape, which a Reshape to a
    run-time shape cannot tell inference. A rule that contradicts it is a bug in the rule.
    ``memo`` keeps one retyped copy per node, so a node given to two inputs is not doubled."""
    gt, xt = g.type, x.type
    if gt == xt or not isinstance(xt, TensorType) or not isinstance(gt, TensorType):
        return g
    gd, xd = dims_of(g), dims_of(x)
    clash = gt.dtype not in (None, xt.dtype) or (
        gd is not None and xd is not None and (len(gd) != len(xd) or any(
            isinstance(a, int) and isinstance(c, int) and a != c for a, c in zip(gd, xd))))
    if clash:
        raise RuntimeError(f"the gradient rule of {call.op_name} gave {gt} for an input of "
                           f"type {xt} (node {_name(call)!r})")
    if not isinstance(g, Call) or any(g is p for p in passed):
        return g  # retyping would copy a node another value also uses
    key = (g, xt)
    if key not in memo:
        memo[key] = Call(g.op, g.args, g.attrs, xt, g.span)
    return memo[key]
