"""Normalizations: BatchNormalization (inference), LayerNormalization, Softmax, LogSoftmax, LRN."""

from __future__ import annotations

import numpy as np

from byoc.codegen import float_literal
from byoc.ir import Call

from ..emitter import Emit, Tensor
from ..loops import broadcast_strides, loop_nest


def emit_batch_norm(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, scale, bias, mean, var = ins[:5]
    out = outs[0]
    assert x is not None and scale and bias and mean and var
    n, c = x.shape[0], x.shape[1] if x.rank > 1 else 1
    inner = x.size // (n * c) if n * c else 0
    eps = float_literal(call.attrs.get("epsilon", 1e-5))
    src = ctx.src
    with ctx.parallel("c", c, x.size):
        # onnxruntime's roundings: 1 / sqrt first, then times scale (kernels/nn.py)
        src.line(f"const float a = (1.0f / sqrtf({var.ptr}[c] + {eps})) * {scale.ptr}[c];")
        src.line(f"const float b = {bias.ptr}[c] - {mean.ptr}[c] * a;")
        with src.block(f"for (long n = 0; n < {n}; n++)"):
            src.line(f"const float *restrict xp = {x.ptr} + (n * {c} + c) * {inner};")
            src.line(f"float *restrict yp = {out.ptr} + (n * {c} + c) * {inner};")
            src.line(f"for (long i = 0; i < {inner}; i++) yp[i] = xp[i] * a + b;")


def _row_operand(ctx: Emit, t: Tensor | None, row_shape: tuple[int, ...], default: str) -> str:
    """How the normalized row reads a scale or bias: ``name[i]``, a literal, or a broadcast
    copy in scratch when its shape is neither the row's nor a single value."""
    if t is None:
        return default
    literal = t.scalar()
    if literal is not None:
        return literal
    if t.size == 1:
        return f"{t.ptr}[0]"
    size = int(np.prod(row_shape, dtype=np.int64))
    if t.size == size:
        return f"{t.ptr}[i]"
    full = ctx.scratch(4 * size)
    with loop_nest(ctx.src, row_shape, [(0, Tensor("", row_shape, "float32").strides),
                                        (0, broadcast_strides(t.shape, row_shape))]) as (d, s):
        ctx.src.line(f"{full}[{d}] = {t.ptr}[{s}];")
    return f"{full}[i]"


def emit_layer_norm(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    axis = int(call.attrs.get("axis", -1))
    axis = axis + x.rank if axis < 0 else axis
    row_shape = x.shape[axis:]
    inner = int(np.prod(row_shape, dtype=np.int64))
    outer = x.size // inner if inner else 0
    eps = float_literal(call.attrs.get("epsilon", 1e-5))
    ctx.need("reduce")
    src = ctx.src
    scale = _row_operand(ctx, ins[1] if len(ins) > 1 else None, row_shape, "1.0f")
    bias = _row_operand(ctx, ins[2] if len(ins) > 2 else None, row_shape, "0.0f")
    with ctx.parallel("o", outer, 4 * x.size):
        src.line(f"const float *restrict xr = {x.ptr} + o * {inner};")
        src.line(f"float *restrict yr = {out.ptr} + o * {inner};")
        src.line(f"const float mean = byoc_sum(xr, {inner}) / {float_literal(inner)};")
        src.line(f"const float var = byoc_sum_sq_dev(xr, {inner}, mean) / {float_literal(inner)};")
        src.line(f"const float inv = 1.0f / sqrtf(var + {eps});")
        src.line(f"for (long i = 0; i < {inner}; i++) "
                 f"yr[i] = (xr[i] - mean) * inv * {scale} + {bias};")


def emit_softmax(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    axis = int(call.attrs.get("axis", -1))
    axis = axis + x.rank if axis < 0 else axis
    dim = x.shape[axis] if x.rank else 1
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    log = call.op == "LogSoftmax"
    ctx.need("math")
    ctx.need("reduce")
    src = ctx.src
    if inner == 1:
        with ctx.parallel("o", outer, 20 * x.size):
            src.line(f"const float *restrict xr = {x.ptr} + o * {dim};")
            src.line(f"float *restrict yr = {out.ptr} + o * {dim};")
            src.line(f"const float m = byoc_max(xr, {dim});")
            src.line(f"for (long i = 0; i < {dim}; i++) yr[i] = byoc_expf(xr[i] - m);")
            src.line(f"const float s = byoc_sum(yr, {dim});")
            if log:
                src.line("const float ls = m + logf(s);")
                src.line(f"for (long i = 0; i < {dim}; i++) yr[i] = xr[i] - ls;")
            else:
                src.line("const float inv = 1.0f / s;")
                src.line(f"for (long i = 0; i < {dim}; i++) yr[i] *= inv;")
        return
    # The axis is not the last: keep a running max and sum per inner position, vectorized.
    with ctx.parallel("o", outer, 20 * x.size):
        mx, sm = ctx.scratch(4 * inner), ctx.scratch(4 * inner)  # the thread's own in a task
        src.line(f"const float *restrict xb = {x.ptr} + o * {dim * inner};")
        src.line(f"float *restrict yb = {out.ptr} + o * {dim * inner};")
        src.line(f"for (long j = 0; j < {inner}; j++) {{ {mx}[j] = -INFINITY; {sm}[j] = 0.0f; }}")
        with src.block(f"for (long i = 0; i < {dim}; i++)"):
            # The compare skips a NaN; a NaN seen is kept as the max instead (then every
            # exp(x - max) of that position is NaN, as in byoc_max's path).
            with src.block(f"for (long j = 0; j < {inner}; j++)"):
                src.line(f"const float v = xb[i * {inner} + j];")
                src.line(f"{mx}[j] = v > {mx}[j] || v != v ? v : {mx}[j];")
        with src.block(f"for (long i = 0; i < {dim}; i++)"):
            with src.block(f"for (long j = 0; j < {inner}; j++)"):
                src.line(f"const float e = byoc_expf(xb[i * {inner} + j] - {mx}[j]);")
                src.line(f"{sm}[j] += e;")
                if not log:
                    src.line(f"yb[i * {inner} + j] = e;")
        with src.block(f"for (long i = 0; i < {dim}; i++)"):
            if log:
                src.line(f"for (long j = 0; j < {inner}; j++) yb[i * {inner} + j] = "
                         f"xb[i * {inner} + j] - {mx}[j] - logf({sm}[j]);")
            else:
                src.line(f"for (long j = 0; j < {inner}; j++) yb[i * {inner} + j] /= {sm}[j];")


def emit_lrn(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    size = int(call.attrs["size"])
    alpha = float(call.attrs.get("alpha", 1e-4)) / size
    beta = float_literal(call.attrs.get("beta", 0.75))
    bias = float_literal(call.attrs.get("bias", 1.0))
    n, c = x.shape[0], x.shape[1]
    inner = x.size // (n * c) if n * c else 0
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    src = ctx.src
    with ctx.parallel("nc", n * c, size * x.size):
        src.line(f"const long n = nc / {c}, c = nc % {c};")
        src.line(f"const long c0 = c - {lo} < 0 ? 0 : c - {lo};")
        src.line(f"const long c1 = c + {hi} >= {c} ? {c - 1} : c + {hi};")
        src.line(f"const float *restrict xc = {x.ptr} + (n * {c} + c) * {inner};")
        src.line(f"float *restrict yc = {out.ptr} + (n * {c} + c) * {inner};")
        src.line(f"for (long i = 0; i < {inner}; i++) yc[i] = 0.0f;")
        with src.block("for (long k = c0; k <= c1; k++)"):
            src.line(f"const float *restrict xk = {x.ptr} + (n * {c} + k) * {inner};")
            src.line(f"for (long i = 0; i < {inner}; i++) yc[i] += xk[i] * xk[i];")
        src.line(f"for (long i = 0; i < {inner}; i++) "
                 f"yc[i] = xc[i] / powf({bias} + {float_literal(alpha)} * yc[i], {beta});")


EMITTERS = {"BatchNormalization": emit_batch_norm, "LayerNormalization": emit_layer_norm,
            "Softmax": emit_softmax, "LogSoftmax": emit_softmax,
            "LRN": emit_lrn}
