"""A small pattern language over the IR, for composite ops a backend fuses (TVM's dataflow
patterns, cut down):

    conv = is_op("Conv")(wildcard(), is_const()) | is_op("Conv")(wildcard(), is_const(), is_const())
    pat = is_op("Relu")(conv).optional(lambda p: is_op("Clip")(p, wildcard(), wildcard()))

``is_op(*names)(*args)`` matches a call of one of the ops whose arguments match ``args``
exactly (an uncalled ``is_op`` takes any arguments); ``wildcard()`` matches any value,
``is_const()`` a constant, ``is_var()`` a graph input, ``is_tuple_get_item(p, i)`` output i of
a multi-output op. ``a | b`` tries ``a`` first; ``p.optional(f)`` is ``f(p) | p``. One pattern
object used twice must match one value twice. Matching recurses over the pattern, never over
the graph, so it is as deep as the pattern.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ir import Call, Constant, Expr, TensorType, TupleGetItem, Var, children


@dataclass
class Match:
    """What a pattern matched at ``root``: the calls and TupleGetItems it covers (producers
    first, root last) and the values it reads from outside, in order of first use."""

    root: Expr
    nodes: list[Expr]
    inputs: list[Expr]


class Pattern:
    """A pattern over IR values."""

    def __or__(self, other: Pattern) -> Pattern:
        return _Alt(self, other)

    def optional(self, wrap: Callable[[Pattern], Pattern]) -> Pattern:
        """``wrap(self)`` where it matches, else ``self``.

        ``p.optional(lambda x: is_op("Relu")(x))`` matches ``Relu(p)`` or ``p``."""
        return wrap(self) | self

    def has_attr(self, **attrs: Any) -> Pattern:
        """The matched call must have these attribute values."""
        return _Where(self, lambda e: isinstance(e, Call) and all(
            _same(e.attrs.get(k), v) for k, v in attrs.items()))

    def has_dtype(self, *dtypes: str) -> Pattern:
        """The matched value must have one of these dtypes."""
        return _Where(self, lambda e: isinstance(getattr(e, "type", None), TensorType)
                      and e.type.dtype in dtypes)  # type: ignore[attr-defined]

    def match(self, expr: Expr) -> Match | None:
        """The match rooted at ``expr``, or None."""
        env: dict[int, Expr] = {}
        nodes: set[Expr] = set()
        if not self._match(expr, env, nodes) or expr not in nodes:
            return None
        return _finish(expr, nodes)

    def _match(self, e: Expr | None, env: dict[int, Expr], nodes: set[Expr]) -> bool:
        raise NotImplementedError

    def _bind(self, e: Expr, env: dict[int, Expr]) -> bool:
        """One pattern object matches one value: the first it met, or fail."""
        seen = env.get(id(self))
        if seen is not None:
            return seen is e
        env[id(self)] = e
        return True


class _Wildcard(Pattern):
    def _match(self, e, env, nodes):
        return e is not None and self._bind(e, env)


class _Const(Pattern):
    def _match(self, e, env, nodes):
        return isinstance(e, Constant) and self._bind(e, env)


@dataclass(eq=False)
class _Var(Pattern):
    name: str | None

    def _match(self, e, env, nodes):
        return isinstance(e, Var) and self.name in (None, e.name) and self._bind(e, env)


@dataclass(eq=False)
class OpPattern(Pattern):
    """A call of one of ``ops``, whatever its arguments; call it to constrain them."""

    ops: frozenset[str]

    def __call__(self, *args: Pattern | None) -> Pattern:
        return _Call(self, args)

    def accepts(self, e: Expr | None) -> bool:
        return isinstance(e, Call) and isinstance(e.op, str) and e.op in self.ops

    def _match(self, e, env, nodes):
        if not self.accepts(e) or not self._bind(e, env):
            return False
        nodes.add(e)
        return True


@dataclass(eq=False)
class _Call(Pattern):
    op: OpPattern
    args: tuple[Pattern | None, ...]

    def _match(self, e, env, nodes):
        if not self.op.accepts(e) or not self._bind(e, env):
            return False
        nodes.add(e)
        args = list(e.args)
        while args and args[-1] is None:
            args.pop()
        if len(args) != len(self.args):
            return False
        for p, a in zip(self.args, args):
            if p is None:
                if a is not None:
                    return False
            elif not p._match(a, env, nodes):
                return False
        return True


@dataclass(eq=False)
class _GetItem(Pattern):
    tuple_pattern: Pattern
    index: int | None

    def _match(self, e, env, nodes):
        if not isinstance(e, TupleGetItem) or self.index not in (None, e.index):
            return False
        nodes.add(e)
        return self._bind(e, env) and self.tuple_pattern._match(e.tuple_value, env, nodes)


@dataclass(eq=False)
class _Alt(Pattern):
    first: Pattern
    second: Pattern

    def _match(self, e, env, nodes):
        for p in (self.first, self.second):
            env2, nodes2 = dict(env), set(nodes)
            if p._match(e, env2, nodes2):
                env.update(env2)
                nodes |= nodes2
                return True
        return False


@dataclass(eq=False)
class _Where(Pattern):
    inner: Pattern
    test: Callable[[Expr], bool]

    def _match(self, e, env, nodes):
        return self.inner._match(e, env, nodes) and bool(self.test(e))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a == b


def _finish(root: Expr, nodes: set[Expr]) -> Match:
    """Order the matched nodes producers first and collect what they read from outside."""
    order: list[Expr] = []
    inputs: dict[Expr, None] = {}  # an ordered set: first read first
    seen: set[Expr] = {root}
    stack = [(root, iter(children(root)))]
    while stack:
        node, it = stack[-1]
        for k in it:
            if k in nodes:
                if k not in seen:
                    seen.add(k)
                    stack.append((k, iter(children(k))))
                    break
            else:
                inputs[k] = None
        else:
            stack.pop()
            order.append(node)
    return Match(root, order, list(inputs))


def is_op(*names: str) -> OpPattern:
    """A call of one of the ops ``names`` ("Conv", "com.microsoft.Gelu")."""
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError("is_op wants one or more op names")
    return OpPattern(frozenset(names))


def wildcard() -> Pattern:
    """Any value."""
    return _Wildcard()


def is_const() -> Pattern:
    """A constant (an initializer)."""
    return _Const()


def is_var(name: str | None = None) -> Pattern:
    """A graph input (of that name, if given)."""
    return _Var(name)


def is_tuple_get_item(tuple_pattern: Pattern, index: int | None = None) -> Pattern:
    """Output ``index`` (any, if None) of a multi-output op matched by ``tuple_pattern``."""
    return _GetItem(tuple_pattern, index)
