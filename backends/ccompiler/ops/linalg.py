"""MatMul (numpy batching) and Gemm, on the packed GEMM of ``runtime_c``.

Both take an optional ``epilogue``: a C expression of type ``const byoc_epi *`` that the GEMM
runs on each finished tile of the output (native fuses elementwise ops this way); they return
True when it was passed on.
"""

from __future__ import annotations

import numpy as np

from byoc.codegen import float_literal
from byoc.ir import Call
from byoc.op.type_rules import broadcast_shapes

from .. import runtime_c
from ..emitter import Emit, Tensor
from ..loops import broadcast_strides, contiguous_strides, loop_nest


def _scratch(ctx: Emit, m: int, n: int, k: int) -> str:
    return ctx.scratch(4 * runtime_c.gemm_scratch(m, n, k))


def emit_matmul(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor],
                epilogue: str = "0") -> bool:
    a, b, out = ins[0], ins[1], outs[0]
    assert a is not None and b is not None
    ctx.need("gemm")
    a_shape = a.shape if a.rank >= 2 else (1, *a.shape)
    b_shape = b.shape if b.rank >= 2 else (*b.shape, 1)
    m, k = a_shape[-2:]
    n = b_shape[-1]
    a_batch, b_batch = a_shape[:-2], b_shape[:-2]
    batch = tuple(broadcast_shapes(a_batch, b_batch) or ())  # type: ignore[arg-type]
    src = ctx.src
    if int(np.prod(b_batch, dtype=np.int64)) == 1:
        # B is shared by every batch: the batch folds into A's rows, one GEMM in all.
        rows = int(np.prod(batch, dtype=np.int64)) * m
        ws = _scratch(ctx, rows, n, k)
        src.line(f"byoc_gemm_mat({rows}, {n}, {k}, 1.0f, (byoc_mat){{{a.ptr}, {k}, 1}}, "
                 f"(byoc_mat){{{b.ptr}, {n}, 1}}, {out.ptr}, {n}, 0, {ws}, {epilogue});")
        return True
    views = [(0, [s * m * k for s in broadcast_strides(a_batch, batch)]),
             (0, [s * k * n for s in broadcast_strides(b_batch, batch)]),
             (0, [s * m * n for s in contiguous_strides(batch)])]
    # each product of the batch a task (its GEMM then on that thread alone)
    with loop_nest(src, batch, views, var="b", par=ctx, cost=m * n * k) as (ia, ib, io):
        ws = _scratch(ctx, m, n, k)  # inside: a task's own scratch
        src.line(f"byoc_gemm_mat({m}, {n}, {k}, 1.0f, (byoc_mat){{{a.ptr} + {ia}, {k}, 1}}, "
                 f"(byoc_mat){{{b.ptr} + {ib}, {n}, 1}}, {out.ptr} + {io}, {n}, 0, {ws}, "
                 f"{epilogue});")
    return True


def emit_gemm(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor],
              epilogue: str = "0") -> bool:
    a, b, out = ins[0], ins[1], outs[0]
    c = ins[2] if len(ins) > 2 else None
    assert a is not None and b is not None
    ctx.need("gemm")
    alpha = float(call.attrs.get("alpha", 1.0))
    beta = float(call.attrs.get("beta", 1.0))
    trans_a, trans_b = int(call.attrs.get("transA", 0)), int(call.attrs.get("transB", 0))
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = b.shape[0] if trans_b else b.shape[1]
    a_mat = f"(byoc_mat){{{a.ptr}, 1, {m}}}" if trans_a else f"(byoc_mat){{{a.ptr}, {k}, 1}}"
    b_mat = f"(byoc_mat){{{b.ptr}, 1, {k}}}" if trans_b else f"(byoc_mat){{{b.ptr}, {n}, 1}}"
    src = ctx.src
    accumulate = c is not None and beta != 0.0 and c.size > 0
    if accumulate:
        assert c is not None
        scale = "" if beta == 1.0 else f"{float_literal(beta)} * "
        literal = c.scalar()
        views = [(0, out.strides)]
        if not literal:
            views.append((0, broadcast_strides(c.shape, out.shape)))
        with loop_nest(src, out.shape, views) as index:
            value = literal if literal else f"{c.ptr}[{index[1]}]"
            src.line(f"{out.ptr}[{index[0]}] = {scale}{value};")
    ws = _scratch(ctx, m, n, k)
    src.line(f"byoc_gemm_mat({m}, {n}, {k}, {float_literal(alpha)}, {a_mat}, {b_mat}, "
             f"{out.ptr}, {n}, {int(accumulate)}, {ws}, {epilogue});")
    return True


EMITTERS = {"MatMul": emit_matmul, "Gemm": emit_gemm}
