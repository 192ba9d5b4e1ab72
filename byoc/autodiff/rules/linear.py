"""Gradients of matrix products: MatMul (numpy semantics, batched, 1-D operands) and Gemm."""

from __future__ import annotations

from ...ir import Expr
from ..rule import Backward, GradientRule, rank_of
from ..shapes import reshape_like, swap_last, unbroadcast


def matmul(b: Backward) -> list[Expr | None]:
    """y = a @ c: da = g @ c^T, dc = a^T @ g, batch axes summed back to each operand's shape.

    numpy promotes a 1-D a to (1, k) and a 1-D c to (k, 1) and drops those axes from y; the
    rule promotes the same way (g gets the dropped axes back) and reshapes the results back.
    """
    a, c = b.x(0), b.x(1)
    assert a is not None and c is not None
    ra, rc = rank_of(a), rank_of(c)
    if ra == 2 and rc == 2:  # Gemm's transpose flags spare the Transpose copies
        return [b.op("Gemm", b.g, c, transB=1) if b.need(0) else None,
                b.op("Gemm", a, b.g, transA=1) if b.need(1) else None]
    if ra == 1 and rc == 1:  # a dot product: y is a scalar
        return [b.op("Mul", b.g, c) if b.need(0) else None,
                b.op("Mul", b.g, a) if b.need(1) else None]
    dropped = ([-2] if ra == 1 else []) + ([-1] if rc == 1 else [])
    g = b.op("Unsqueeze", b.g, b.ints(dropped)) if dropped else b.g
    a2 = b.op("Unsqueeze", a, b.ints([0])) if ra == 1 else a
    c2 = b.op("Unsqueeze", c, b.ints([1])) if rc == 1 else c
    da = dc = None
    if b.need(0):
        da = reshape_like(b, unbroadcast(b, b.op("MatMul", g, swap_last(b, c2)), a2), a)
    if b.need(1):
        dc2 = b.op("MatMul", swap_last(b, a2), g)
        if rc == 1:  # (..., k, 1): drop the promoted axis before summing the batch axes
            dc2 = b.op("Squeeze", dc2, b.ints([-1]))
        dc = unbroadcast(b, dc2, c)
    return [da, dc]


def gemm(b: Backward) -> list[Expr | None]:
    """y = alpha op(A) op(B) + beta C, op = transpose or not:
    d op(A) = alpha g op(B)^T, d op(B) = alpha op(A)^T g, dC = beta g summed to C's shape.
    Each is one Gemm with the transpose flags chosen so no Transpose is materialized."""
    a, bb, c = b.x(0), b.x(1), b.x(2)
    alpha, beta = float(b.attr("alpha", 1.0)), float(b.attr("beta", 1.0))
    ta, tb = int(b.attr("transA", 0)), int(b.attr("transB", 0))
    g = b.g
    out: list[Expr | None] = [None, None, None]
    if b.need(0):  # dA = alpha g op(B)^T, or its transpose alpha op(B) g^T when transA
        out[0] = (b.op("Gemm", g, bb, alpha=alpha, transB=1 - tb) if not ta else
                  b.op("Gemm", bb, g, alpha=alpha, transA=tb, transB=1))
    if b.need(1):  # dB = alpha op(A)^T g, or alpha g^T op(A) when transB
        out[1] = (b.op("Gemm", a, g, alpha=alpha, transA=1 - ta) if not tb else
                  b.op("Gemm", g, a, alpha=alpha, transA=1, transB=ta))
    if c is not None and b.need(2):
        scaled = g if beta == 1.0 else b.op("Mul", g, b.const(beta, g))
        out[2] = unbroadcast(b, scaled, c)
    return out


RULES: dict[str, GradientRule] = {"MatMul": matmul, "Gemm": gemm}
