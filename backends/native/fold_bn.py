"""BatchNormalization with constant statistics, folded away at build time.

    %c = Conv(%x, W, b)                       %c = Conv(%x, W * s, (b - mean) * s + B)
    %y = BatchNormalization(%c, g, B, mean, var)        where s = (1 / sqrt(var + eps)) * g

and a BatchNormalization after anything else becomes the elementwise ``Add(Mul(%x, s), t)``
over ``[C, 1, ...]`` constants, which FuseOps then fuses with its neighbours.
"""

from __future__ import annotations

import numpy as np

from byoc.ir import (
    Call,
    Constant,
    Expr,
    Function,
    Span,
    TensorType,
    TupleType,
    post_order,
    rewrite,
)
from byoc.op import make_call
from byoc.op.kernels.nn import batch_norm_coefficients


def _stats(bn: Call) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of an inference-mode BatchNormalization with constant inputs."""
    if bn.op != "BatchNormalization" or isinstance(bn.type, TupleType) or len(bn.args) != 5:
        return None
    if bn.attrs.get("training_mode", 0) or not all(isinstance(a, Constant) for a in bn.args[1:]):
        return None
    g, b, mean, var = (a.value for a in bn.args[1:])  # type: ignore[union-attr]
    return batch_norm_coefficients(g, b, mean, var, bn.attrs.get("epsilon", 1e-5))


def _holding(bn: Span | None, conv: Span | None) -> Span | None:
    """The folded Conv's span: the BatchNormalization's (its output is the BN's), holding the
    Conv's (so that kernel names and profiles list both ONNX nodes)."""
    if bn is None or conv is None:
        return bn or conv
    return bn._replace(folded=(*conv.folded, conv._replace(folded=()), *bn.folded))


def fold_batch_norm(func: Function) -> Function:
    """``func`` with each foldable BatchNormalization folded (``func`` if none)."""
    order = post_order(func.body)
    readers: dict[Expr, int] = {}
    for e in order:
        for a in getattr(e, "args", ()):
            if a is not None:
                readers[a] = readers.get(a, 0) + 1
    if not any(isinstance(e, Call) and e.op == "BatchNormalization" for e in order):
        return func

    def fold(old: Expr, new: Expr) -> Expr:
        if not isinstance(new, Call) or (stats := _stats(new)) is None:
            return new
        x = new.args[0]
        t = x.type if x is not None else None
        if not isinstance(t, TensorType) or t.rank is None or t.rank < 2 or t.dtype != "float32":
            return new
        s, shift = stats
        if isinstance(x, Call) and x.op == "Conv" and readers.get(old.args[0], 0) == 1 \
                and isinstance(x.args[1], Constant) and \
                (len(x.args) < 3 or x.args[2] is None or isinstance(x.args[2], Constant)):
            w = x.args[1].value
            bias = x.args[2].value if len(x.args) > 2 and x.args[2] is not None else 0.0
            w2 = (w * s.reshape(-1, *[1] * (w.ndim - 1))).astype(np.float32)
            b2 = (bias * s + shift).astype(np.float32)
            args = (x.args[0], Constant(w2, x.args[1].name), Constant(b2, f"{x.args[1].name}_bn"))
            return Call("Conv", args, x.attrs, new.type, _holding(new.span, x.span))
        shape = (-1, *[1] * (t.rank - 2))
        mul = make_call("Mul", x, Constant(s.astype(np.float32).reshape(shape)), span=new.span)
        return make_call("Add", mul, Constant(shift.astype(np.float32).reshape(shape)),
                         span=new.span)

    (body,), _ = rewrite([func.body], fold)
    return Function(func.params, body, func.attrs)
