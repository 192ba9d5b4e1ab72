"""Pooling: MaxPool and AveragePool as vector loops over a padded plane (``plane.py``; a C
helper for huge windows), global pools as one loop nest."""

from __future__ import annotations

import numpy as np

from byoc.ir import Call

from ..emitter import Emit, Tensor
from .plane import LANES, MAX_TAPS, Plane, emit_plane, emit_window_rows
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
    g = Plane.of([*dims[1:], dh, dw])
    ctx.need("window")
    channel, out_plane = f"({x.ptr} + nc * {h * w})", f"({out.ptr} + nc * {oh * ow})"
    with ctx.parallel("nc", planes, planes * oh * ow * kh * kw):
        if g.sw == 2:  # (at stride 1 the plane measured even or faster: 13x13, 7x7 1.1x)
            _emit_max_rows_s2(ctx, channel, out_plane, g)
        else:
            emit_plane(ctx, channel, g, "-INFINITY")
            emit_window_rows(ctx, g, out_plane, lambda taps, a, oh: [
                f"byoc_wf {a} = {taps[0]};", *(f"{a} = byoc_wmax({a}, {t});" for t in taps[1:])])


def _emit_max_rows_s2(ctx: Emit, channel: str, out_plane: str, g: Plane) -> None:
    """MaxPool of one channel at stride 2 along rows, max being separable: for every output row
    the max down its window's input rows (vectors across the row, read in place), then along
    each row, in vectors of outputs (each tap the even lanes of two vectors). Copying the
    channel into a padded plane first, as other window ops do, took half the time of
    squeezenet's 64 x 111 x 111 pool, and each output vector read all kh * kw taps: one-node
    MaxPool 3x3 stride 2 at 1 thread 0.63-0.79x the plane's time on maps of 54 to 112, even
    to 0.7x on 13x13 to 56x56."""
    src = ctx.src
    lanes = LANES  # the widest BYOC_WW: bounds that hold for any narrower
    last = (g.ow - 1) // lanes * lanes + lanes  # past the last output vector
    reach = 2 * last + (g.kw - 1) * g.dw + lanes  # its last tap's second vector
    size = -(-max(g.pw + g.w, reach) // lanes) * lanes
    hang = 2 * (g.ow - 1) + (g.kw - 1) * g.dw + 1  # past the last output's last tap
    src.line(f"const float *restrict xc = {channel};")
    src.line(f"float *restrict yc = {out_plane};")
    # every output row's column maxima first, then the rows: a row's maxima read back at
    # once, across the lanes of the stores that wrote them, waited for those stores (13x13
    # maps 2x slower than the plane)
    src.line(f"float *restrict vbs = {ctx.scratch(4 * size * g.oh)};")
    with src.block(f"for (long oh = 0; oh < {g.oh}; oh++)"):
        src.line(f"float *restrict vb = vbs + oh * {size};")
        # -inf where an output's window hangs past the row (its pads); the lanes of outputs
        # past the row's last are stored by nobody, so what they read may be anything (all
        # of vb's tail, filled for each row, had cost a 832 x 13 x 13 pool a third of its time)
        if g.pw:
            src.line(f"for (long i = 0; i < {g.pw}; i++) vb[i] = -INFINITY;")
        if hang > g.pw + g.w:
            src.line(f"for (long i = {g.pw + g.w}; i < {hang}; i++) vb[i] = -INFINITY;")
        src.line(f"const float *rows[{g.kh}];")
        src.line("long nr = 0;")
        with src.block(f"for (long i = 0; i < {g.kh}; i++)"):
            src.line(f"const long r = oh * {g.sh} - {g.ph} + i * {g.dh};")
            src.line(f"if (r >= 0 && r < {g.h}) rows[nr++] = xc + r * {g.w};")
        # down the rows in vectors, the row's last, partial one loaded and stored masked
        # (lanes past the row keep vb's -inf)
        with src.block(f"for (long at = 0; at + BYOC_WW <= {g.w}; at += BYOC_WW)"):
            _emit_down(src, g.kh, "*(const byoc_wf *)({} + at)")
            src.line(f"*(byoc_wf *)(vb + {g.pw} + at) = m;")
        with src.block(f"if ({g.w} % BYOC_WW)"):
            src.line(f"const long at = {g.w} / BYOC_WW * BYOC_WW;")
            _emit_down(src, g.kh, f"byoc_wload_first({{}} + at, {g.w} - at)")
            src.line(f"byoc_wstore_first(vb + {g.pw} + at, m, {g.w} - at);")
    # along each row: tap j of output o at vb[2 o + j * dw]
    taps = [f"__builtin_shuffle(*(const byoc_wf *)(vb + 2 * at + {j * g.dw}), "
            f"*(const byoc_wf *)(vb + 2 * at + {j * g.dw} + BYOC_WW), BYOC_WEVEN)"
            for j in range(g.kw)]
    with src.block(f"for (long oh = 0; oh < {g.oh}; oh++)"):
        src.line(f"const float *restrict vb = vbs + oh * {size};")
        with src.block(f"for (long at = 0; at < {g.ow}; at += BYOC_WW)"):
            src.line(f"const byoc_wf m = {_max_tree(taps)};")
            src.line(f"if (at + BYOC_WW <= {g.ow}) *(byoc_wf *)(yc + oh * {g.ow} + at) = m;")
            src.line(f"else byoc_wstore_first(yc + oh * {g.ow} + at, m, {g.ow} - at);")


def _emit_down(src, kh: int, load: str) -> None:
    """``byoc_wf m``: the max of ``load`` (a C expression, ``{}`` for a row pointer) over the
    window's rows in range (``rows``, ``nr``): with all ``kh``, unrolled as a tree."""
    src.line("byoc_wf m;")
    with src.block(f"if (nr == {kh})"):
        src.line(f"m = {_max_tree([load.format(f'rows[{i}]') for i in range(kh)])};")
    with src.block("else"):
        src.line("m = byoc_wsplat(-INFINITY);")
        src.line(f"for (long t = 0; t < nr; t++) m = byoc_wmax(m, {load.format('rows[t]')});")


def _max_tree(vectors: list[str]) -> str:
    """byoc_wmax over the vectors as a balanced tree (independent maxes, not one chain)."""
    while len(vectors) > 1:
        vectors = [f"byoc_wmax({a}, {b})" for a, b in zip(vectors[::2], vectors[1::2])] + \
            vectors[len(vectors) // 2 * 2:]
    return vectors[0]


def _counts(size: int, out: int, k: int, s: int, begin: int, end: int, with_pad: bool
            ) -> list[int]:
    """Per output along one dim: how many taps an average divides by (as byoc_avgpool2d)."""
    counts = []
    for o in range(out):
        lo = o * s - begin
        hi = min(lo + k, size + end)
        counts.append(hi - lo if with_pad else min(hi, size) - max(lo, 0))
    return counts


def emit_average_pool(ctx: Emit, call: Call, ins: list[Tensor | None],
                      outs: list[Tensor]) -> None:
    """Sums in window order from +0 over a zero-padded plane, divided by the count (a product
    of a row's and a column's, both exact in float32): bit-equal to the library's loop,
    which is onnxruntime's order."""
    x, out = ins[0], outs[0]
    assert x is not None
    dims, (eh, ew, _, _) = _pool_dims(call, x, out)
    count_pad = int(call.attrs.get("count_include_pad", 0))
    planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw = dims
    rows = _counts(h, oh, kh, sh, ph, eh, bool(count_pad))
    cols = _counts(w, ow, kw, sw, pw, ew, bool(count_pad))
    if kh * kw > MAX_TAPS or min(rows, default=1) <= 0 or min(cols, default=1) <= 0:
        ctx.need("pool")  # a window all padding divides by nothing: the helper gives 0
        args = ", ".join(str(d) for d in [*dims, eh, ew, count_pad])
        ctx.src.line(f"byoc_avgpool2d({x.ptr}, {out.ptr}, {args});")
        return
    g = Plane.of([*dims[1:], 1, 1])
    rt = ctx.constant(np.array(rows, np.float32))
    ct = ctx.constant(np.array(cols + [1] * (g.phase - ow), np.float32))
    ctx.need("window")
    with ctx.parallel("nc", planes, planes * oh * ow * kh * kw):
        emit_plane(ctx, f"({x.ptr} + nc * {h * w})", g, "0.0f")
        emit_window_rows(ctx, g, f"({out.ptr} + nc * {oh * ow})", lambda taps, a, oh: [
            f"byoc_wf {a} = byoc_wsplat(0.0f);", *(f"{a} += {t};" for t in taps),
            f"{a} = {a} / ({rt}[{oh}] * *(const byoc_wf *)({ct} + at));"])


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
