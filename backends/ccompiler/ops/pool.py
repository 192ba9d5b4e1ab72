"""Pooling: MaxPool as window loops over a padded plane (a C helper for huge windows),
AveragePool by a C helper, global pools as one loop nest."""

from __future__ import annotations

from byoc.ir import Call

from ..emitter import Emit, Tensor
from .plane import MAX_TAPS, emit_plane, emit_window_rows
from .window import window


def _pool_dims(call: Call, x: Tensor, out: Tensor) -> tuple[list[int], list[int]]:
    """[N*C, H, W, OH, OW, KH, KW, SH, SW, PH, PW] and the (end pad H, end pad W, DH, DW)."""
    kernel = tuple(call.attrs["kernel_shape"])
    win = window(call, x.shape[2:], kernel, out.shape[2:]).as_2d()
    spatial = x.shape[2:] if x.rank == 4 else (1, *x.shape[2:])
    out_spatial = out.shape[2:] if out.rank == 4 else (1, *out.shape[2:])
    dims = [x.shape[0] * x.shape[1], *spatial, *out_spatial, *win.kernel, *win.strides,
            *win.begin]
    return dims, [*win.end, *win.dilations]


def emit_max_pool(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    dims, (_, _, dh, dw) = _pool_dims(call, x, out)
    planes, h, w, oh, ow, kh, kw = dims[:7]
    if kh * kw > MAX_TAPS:
        ctx.need("pool")
        args = ", ".join(str(d) for d in [*dims, dh, dw])
        ctx.src.line(f"byoc_maxpool2d({x.ptr}, {out.ptr}, {args});")
        return
    geometry = [*dims[1:], dh, dw]
    ctx.need("math")
    with ctx.parallel("nc", planes, planes * oh * ow * kh * kw):
        emit_plane(ctx, f"({x.ptr} + nc * {h * w})", geometry, "-INFINITY")
        emit_window_rows(ctx, geometry, f"{out.ptr} + nc * {oh * ow} + oh * {ow}", _max)


def _max(terms: list[str]) -> str:
    out = terms[0]
    for t in terms[1:]:
        out = f"byoc_fmax({out}, {t})"
    return out


def emit_average_pool(ctx: Emit, call: Call, ins: list[Tensor | None],
                      outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    ctx.need("pool")
    dims, (eh, ew, _, _) = _pool_dims(call, x, out)
    count_pad = int(call.attrs.get("count_include_pad", 0))
    args = ", ".join(str(d) for d in [*dims, eh, ew, count_pad])
    ctx.src.line(f"byoc_avgpool2d({x.ptr}, {out.ptr}, {args});")


def emit_global_pool(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    planes = x.shape[0] * x.shape[1]
    n = x.size // planes if planes else 0
    src = ctx.src
    is_max = call.op == "GlobalMaxPool"
    with ctx.parallel("p", planes, planes * n):
        src.line(f"const float *restrict xp = {x.ptr} + p * {n};")
        if is_max:
            src.line("float acc = -INFINITY;")
            src.line(f"for (long i = 0; i < {n}; i++) acc = xp[i] > acc ? xp[i] : acc;")
            src.line(f"{out.ptr}[p] = acc;")
        else:  # onnxruntime's order (byoc.op.kernels.pool.mlas_sum): exact to its last bit
            src.line("float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f;")
            src.line("long i = 0;")
            src.line(f"for (; i + 4 <= {n}; i += 4) "
                     "{ l0 += xp[i]; l1 += xp[i + 1]; l2 += xp[i + 2]; l3 += xp[i + 3]; }")
            src.line("float acc = (l0 + l2) + (l1 + l3);")
            src.line(f"for (; i < {n}; i++) acc += xp[i];")
            src.line(f"{out.ptr}[p] = acc / {n}.0f;")


EMITTERS = {"MaxPool": emit_max_pool, "AveragePool": emit_average_pool,
            "GlobalAveragePool": emit_global_pool, "GlobalMaxPool": emit_global_pool}
