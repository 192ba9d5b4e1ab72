"""Subgraph bodies: the Function-valued attrs of If, Loop and Scan, and the path to each.

    %c = Greater(%s, %zero)  /* span=positive */
    %y = If(%c, %x) attrs={then_branch=fn(%x) {(Relu(%x),)}, else_branch=fn(%x) {(Neg(%x),)}}

The then branch lives at scope ``("if", "then_branch")``: the chain of node spans and attribute
names leading to it, ``()`` for main. Nested bodies extend their parent's scope, so a body at any
depth is named by its scope alone (ONNX node names are unique across a model and its subgraphs).

Every walk here visits each body once, however deep it is, so anything built on them stays
linear in the total number of nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..ir import Call, Expr, Function, children, post_order, with_children
from .names import node_key

Scope = tuple[str, ...]  # (span, attr, span, attr, ...): the path from main to a body

_SHORT = {"then_branch": "then", "else_branch": "else", "body": "body"}


def bodies(call: Expr) -> list[tuple[str, Function]]:
    """A call's bodies (its Function-valued attrs) by attr name; [] for any other node."""
    if not isinstance(call, Call) or not call.attrs:
        return []
    return [(k, v) for k, v in call.attrs.items() if isinstance(v, Function)]


def is_control_flow(call: Expr) -> bool:
    """An If, Loop or Scan (any call with a body): the host runs it and calls into its body."""
    return isinstance(call, Call) and bool(call.attrs) and any(
        isinstance(v, Function) for v in call.attrs.values())


def inner_scope(scope: Scope, call: Call, attr: str) -> Scope:
    """The scope of body ``attr`` of ``call``, itself in ``scope``."""
    return (*scope, node_key(call), attr)


def scope_label(scope: Scope) -> str:
    """``If_0_then_loop_body``: a scope for a region name (each span clipped, attrs shortened)."""
    parts = []
    for k in range(0, len(scope), 2):
        parts.append(scope[k][:48])
        parts.append(_SHORT.get(scope[k + 1], scope[k + 1]))
    return "_".join(parts)


def walk_functions(func: Function, scope: Scope = ()) -> Iterator[tuple[Scope, Function]]:
    """``func`` and every body nested in it, each with its scope, parents before children and
    in the order the parent's nodes run. A body shared by several calls is visited once."""
    for scope, f, _ in walk_orders(func, scope):
        yield scope, f


def walk_orders(func: Function, scope: Scope = (), order: list[Expr] | None = None
                ) -> Iterator[tuple[Scope, Function, list[Expr]]]:
    """``walk_functions`` with each function's ``post_order`` (walked once anyway to find its
    bodies; ``order`` is ``func``'s if the caller has it)."""
    seen: set[Expr] = set()
    stack: list[tuple[Scope, Function]] = [(scope, func)]
    while stack:
        scope, f = stack.pop()
        f_order = order if order is not None and f is func else post_order(f.body)
        yield scope, f, f_order
        inner = []
        for e in f_order:
            for attr, body in bodies(e):
                if body not in seen:
                    seen.add(body)
                    inner.append((inner_scope(scope, e, attr), body))  # type: ignore[arg-type]
        stack.extend(reversed(inner))


def map_bodies(func: Function, fn: Callable[[Function, Scope], Function], scope: Scope = (),
               order: list[Expr] | None = None) -> Function:
    """``func`` with each body of its control-flow calls replaced by ``fn(body, its scope)``.

    Only ``func``'s own calls are visited; ``fn`` decides whether and when to go deeper (call
    map_bodies again on the body). The graph is rebuilt only where a body changed, and a body
    several calls share is mapped once. ``order`` is ``post_order(func.body)`` if the caller
    has it already.

        If(%c, %x) {then_branch=fn(%x) {(Relu(%x),)}}
          ->  If(%c, %x) {then_branch=fn(%x) {(@reference_if_then_relu_1a2b3c4d(%x),)}}
    """
    if order is None:
        order = post_order(func.body)
    if not any(is_control_flow(e) for e in order if isinstance(e, Call) and e.attrs):
        return func
    mapped: dict[Expr, Function] = {}
    new: dict[Expr, Expr] = {}
    for e in order:
        kids = [new[k] for k in children(e)]
        rebuilt = with_children(e, kids) if kids else e
        found = bodies(e)
        if found:
            attrs = dict(rebuilt.attrs)  # type: ignore[union-attr]
            for attr, body in found:
                if body not in mapped:
                    mapped[body] = fn(body, inner_scope(scope, e, attr))  # type: ignore
                attrs[attr] = mapped[body]
            if any(attrs[a] is not b for a, b in found):
                c: Call = rebuilt  # type: ignore[assignment]
                rebuilt = Call(c.op, c.args, attrs, c.type, c.span)
        new[e] = rebuilt
    body = new[func.body]
    return func if body is func.body else Function(func.params, body, func.attrs)

