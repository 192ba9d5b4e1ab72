"""What a gradient rule is: a function from one forward call and its output gradients to its
input gradients, built as ordinary IR.

For ``Op(x_1..x_m) = [f_1..f_n]`` a rule receives ``dL/df_i`` for every output (None where the
loss does not depend on it) and returns, per argument, ``dL/dx_j = sum_i dL/df_i * df_i/dx_j``
(None where the argument takes no gradient: an integer input, or one nobody asked for).
Rules only build nodes; nothing numeric happens until the module runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import Call, Constant, Expr, Span, TensorType, TupleGetItem, TupleType
from ..op import make_call


class GradientError(ValueError):
    """A rule cannot differentiate this configuration of its op (reported with the node)."""


@dataclass(frozen=True)
class Backward:
    """The view a rule has of one forward call.

    ``grads[i]`` is dL/d(output i) or None; ``needs[j]`` says whether argument j wants a
    gradient (rules may skip the work for the others). ``op`` builds a call whose span points
    at the forward node, so every gradient node says where it came from.
    """

    call: Call
    grads: tuple[Expr | None, ...]
    needs: tuple[bool, ...]

    @property
    def g(self) -> Expr:
        """dL/d(output 0): the gradient most rules start from."""
        g = self.grads[0]
        assert g is not None, "a rule runs only when some output has a gradient"
        return g

    def x(self, j: int) -> Expr | None:
        """Forward argument ``j`` (None when omitted or absent)."""
        args = self.call.args
        return args[j] if j < len(args) else None

    def y(self, i: int = 0) -> Expr:
        """Forward output ``i`` as a value."""
        if isinstance(self.call.type, TupleType):
            return TupleGetItem(self.call, i)
        return self.call

    def need(self, j: int) -> bool:
        return j < len(self.needs) and self.needs[j]

    @property
    def span(self) -> Span:
        base = self.call.span.name if self.call.span is not None else self.call.op_name
        return Span(f"{base}/grad", self.call.op_name)

    def op(self, name: str, *args: Any, n_outputs: int | None = None, **attrs: Any) -> Call:
        """A call of ``name`` spanned ``<forward node>/grad``."""
        return make_call(name, *args, n_outputs=n_outputs,
                         span=Span(self.span.name, name), **attrs)

    def const(self, value: Any, like: Expr) -> Constant:
        """A constant with the dtype of ``like`` (gradients keep their value's dtype)."""
        return Constant(np.asarray(value, dtype=dtype_of(like)))

    def ints(self, values: Sequence[int]) -> Constant:
        """An int64 vector, the form ONNX wants for axes, shapes and pads inputs."""
        return Constant(np.asarray(list(values), dtype=np.int64))

    def int_scalar(self, value: int) -> Constant:
        return Constant(np.asarray(value, dtype=np.int64))

    def attr(self, name: str, default: Any = None) -> Any:
        return self.call.attrs.get(name, default)

    def fail(self, why: str) -> GradientError:
        return GradientError(why)


GradientRule = Callable[[Backward], Sequence[Expr | None]]


def dtype_of(e: Expr) -> str:
    t = e.type
    if not isinstance(t, TensorType) or t.dtype is None:
        raise GradientError(f"the dtype of {e!r} is unknown")
    return t.dtype


def rank_of(e: Expr) -> int:
    t = e.type
    if not isinstance(t, TensorType) or t.shape is None:
        raise GradientError(f"the rank of {e!r} is unknown; its gradient needs it")
    return len(t.shape)


def static_shape(e: Expr) -> tuple[int, ...] | None:
    """The shape of ``e`` when every dim is a known int, else None."""
    t = e.type
    if isinstance(t, TensorType) and t.is_static:
        return tuple(int(d) for d in t.shape)  # type: ignore[union-attr, arg-type]
    return None


def const_ints(e: Expr | None) -> list[int] | None:
    """The values of an int constant argument (axes, shape, pads), or None if not constant."""
    if isinstance(e, Constant) and e.value.dtype.kind in "iu":
        return [int(v) for v in e.value.reshape(-1)]
    return None
