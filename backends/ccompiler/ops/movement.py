"""Ops that move data without arithmetic: strided copies, gathers, fills.

Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) usually emit nothing: they share
their input's buffer (plan.py); they copy only when the region returns them.
"""

from __future__ import annotations

import numpy as np

from byoc.codegen import literal
from byoc.ir import Call

from ..emitter import Emit, Tensor, Unsupported
from ..loops import broadcast_strides, emit_copy
from .elementwise import emit_copy_like

VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})


def _axis(call: Call, rank: int, default: int = 0) -> int:
    axis = int(call.attrs.get("axis", default))
    return axis + rank if axis < 0 else axis


def emit_transpose(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    perm = call.attrs.get("perm") or list(reversed(range(x.rank)))
    strides = x.strides
    emit_copy(ctx.src, out.shape, out.ptr, (0, out.strides), x.ptr,
              (0, [strides[p] for p in perm]), par=ctx)


def emit_concat(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    out = outs[0]
    axis = _axis(call, out.rank)
    at = 0
    for x in ins:
        if x is None or x.size == 0:
            at += 0 if x is None else x.shape[axis]
            continue
        emit_copy(ctx.src, x.shape, out.ptr, (at * out.strides[axis], out.strides), x.ptr,
                  (0, x.strides), par=ctx)
        at += x.shape[axis]


def emit_split(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x = ins[0]
    assert x is not None
    axis = _axis(call, x.rank)
    at = 0
    for out in outs:
        if out.size:
            emit_copy(ctx.src, out.shape, out.ptr, (0, out.strides), x.ptr,
                      (at * x.strides[axis], x.strides), par=ctx)
        at += out.shape[axis]


def slice_plan(shape: tuple[int, ...], ins: list[Tensor | None]) -> tuple[list[int], list[int]]:
    """Per dim of the input: (first index, step) of ONNX Slice with constant inputs."""
    def value(k: int) -> list[int] | None:
        t = ins[k] if k < len(ins) else None
        return None if t is None else [int(v) for v in np.asarray(t.value).reshape(-1)]

    starts, ends = value(1), value(2)
    if starts is None or ends is None:
        raise Unsupported("Slice needs constant starts and ends")
    axes = value(3) or list(range(len(starts)))
    steps = value(4) or [1] * len(starts)
    first = [0] * len(shape)
    step = [1] * len(shape)
    for s, _, a, st in zip(starts, ends, axes, steps):
        a = a + len(shape) if a < 0 else a
        first[a], step[a] = onnx_slice_start(s, st, shape[a]), st
    return first, step


def onnx_slice_start(start: int, step: int, dim: int) -> int:
    """The first index ONNX Slice reads along a dim of size ``dim``.

    Not Python's ``slice.indices``: for a negative step it clamps a start before the first
    element to -1 (an empty slice) where ONNX clamps it to 0 (one element). The spec: a
    negative start counts from the end, then it is clamped into [0, dim] for a positive step
    and [0, dim - 1] for a negative one (INT64_MAX/MIN sentinels clamp the same way). The
    end is not needed here: the output's shape, from type inference, says how many to copy.
    """
    if step == 0:
        raise Unsupported("Slice with a step of 0")
    if start < 0:
        start += dim
    return max(0, min(start, dim if step > 0 else dim - 1))


def emit_slice(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    first, step = slice_plan(x.shape, ins)
    offset = sum(f * s for f, s in zip(first, x.strides))
    if out.size:
        emit_copy(ctx.src, out.shape, out.ptr, (0, out.strides), x.ptr,
                  (offset, [s * k for s, k in zip(x.strides, step)]), par=ctx)


def emit_gather(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    data, indices, out = ins[0], ins[1], outs[0]
    assert data is not None and indices is not None
    axis = _axis(call, data.rank)
    outer = int(np.prod(data.shape[:axis], dtype=np.int64))
    dim = data.shape[axis]
    inner = int(np.prod(data.shape[axis + 1:], dtype=np.int64))
    nq = indices.size
    src = ctx.src
    chunk = f"{inner} * sizeof({data.ctype})"
    with ctx.parallel("oq", outer * nq, outer * nq * inner):
        src.line(f"const long o = oq / {max(nq, 1)}, q = oq % {max(nq, 1)};")
        src.line(f"long j = (long){indices.ptr}[q];")
        src.line(f"if (j < 0) j += {dim};")
        src.line(f"{data.ctype} *dst = {out.ptr} + (o * {nq} + q) * {inner};")
        # An index out of range gives zeros, never a read outside the tensor.
        src.line(f"if (j < 0 || j >= {dim}) memset(dst, 0, {chunk});")
        src.line(f"else memcpy(dst, {data.ptr} + (o * {dim} + j) * {inner}, {chunk});")


def emit_expand(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    if out.size:
        emit_copy(ctx.src, out.shape, out.ptr, (0, out.strides), x.ptr,
                  (0, broadcast_strides(x.shape, out.shape)), par=ctx)


def emit_shape(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    rank = x.rank
    start = int(call.attrs.get("start", 0))
    end = int(call.attrs.get("end", rank))
    dims = x.shape[slice(start, end)]
    for k, d in enumerate(dims):
        ctx.src.line(f"{out.ptr}[{k}] = {literal(d, 'int64')};")


def emit_constant_of_shape(ctx: Emit, call: Call, ins: list[Tensor | None],
                           outs: list[Tensor]) -> None:
    out = outs[0]
    value = call.attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if out.size == 0:
        return
    if not fill.any():
        ctx.src.line(f"memset({out.ptr}, 0, {out.nbytes});")
        return
    lit = literal(fill[0].item(), out.dtype)
    ctx.src.line(f"for (long i = 0; i < {out.size}; i++) {out.ptr}[i] = {lit};")


def _pad_index(mode: str, i: str, begin: int, end: int, dim: int) -> str:
    """C expression of the input index ONNX Pad reads for output index ``i`` along a dim of
    ``dim`` padded by ``begin`` and ``end`` (negative: cropped first, then padded, as
    onnxruntime does), or -1 where the constant goes."""
    lo = max(0, -begin)
    n = dim - lo - max(0, -end)  # the dim once cropped
    j = f"({i} - {max(begin, 0)})"  # the index into it
    if mode == "constant":
        return f"({j} >= 0 && {j} < {n} ? {lo} + {j} : -1)"
    if mode == "edge":
        return f"({lo} + ({j} < 0 ? 0 : {j} >= {n} ? {n - 1} : {j}))"
    if mode == "wrap":
        return f"({lo} + (({j} % {n}) + {n}) % {n})"
    if n == 1:  # reflect: numpy's, mirrored about the first and last element, repeatedly
        return f"{lo}"
    p = 2 * (n - 1)
    return (f"({lo} + ({{ const long m_ = {j} % {p} + ({j} % {p} < 0 ? {p} : 0); "
            f"m_ < {n} ? m_ : {p} - m_; }}))")


def pad_plan(call: Call, ins: list[Tensor | None], rank: int
             ) -> tuple[list[int], list[int], str]:
    """Per dim of the input: elements added before and after it (negative: removed); the
    mode."""
    def value(k: int) -> list[int] | None:
        t = ins[k] if k < len(ins) else None
        return None if t is None or t.value is None else \
            [int(v) for v in np.asarray(t.value).reshape(-1)]

    pads = value(1) or []
    axes = value(3)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    if len(pads) != 2 * len(axes):
        raise Unsupported(f"Pad with {len(pads)} pads for {len(axes)} axes")
    begin, end = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        begin[a], end[a] = pads[k], pads[len(axes) + k]
    return begin, end, str(call.attrs.get("mode", "constant"))


def emit_pad(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    """Each output row from its input row (or the constant): the row's inside one memcpy,
    its padded ends index by index through the mode's mapping; rows on the pool when big."""
    x, out = ins[0], outs[0]
    assert x is not None
    begin, end, mode = pad_plan(call, ins, x.rank)
    if out.size == 0:
        return
    cropped = [d - max(0, -b) - max(0, -e) for d, b, e in zip(x.shape, begin, end)]
    if min(cropped, default=1) < 0:
        raise Unsupported(f"Pad crops more than a dim holds (pads {begin} and {end})")
    if mode != "constant" and min(cropped, default=1) == 0:
        raise Unsupported(f"Pad mode {mode!r} of an empty input")
    fill = ins[2] if len(ins) > 2 and ins[2] is not None else None
    value = np.asarray(fill.value).reshape(-1) if fill is not None else np.zeros(0)
    lit = literal(value[0].item() if value.size else 0, out.dtype)
    src = ctx.src
    if x.rank == 0:
        src.line(f"{out.ptr}[0] = {x.ptr}[0];")
        return
    last = x.rank - 1
    outer = out.shape[:last]
    rows = int(np.prod(outer, dtype=np.int64))
    with ctx.parallel("r", rows, out.size):
        src.line("long q = r;")
        at = []
        for k in reversed(range(last)):
            src.line(f"const long i{k} = q % {out.shape[k]}; q /= {out.shape[k]};")
            src.line(f"const long j{k} = {_pad_index(mode, f'i{k}', begin[k], end[k], x.shape[k])};")
            at.append(f"j{k} * {x.strides[k]}")
        src.line(f"{out.ctype} *restrict dst = {out.ptr} + r * {out.shape[last]};")
        inside = " && ".join(f"j{k} >= 0" for k in range(last)) or "1"
        with src.block(f"if (!({inside}))"):
            src.line(f"for (long i = 0; i < {out.shape[last]}; i++) dst[i] = {lit};")
            src.line("continue;")
        src.line(f"const {x.ctype} *restrict row = {x.ptr} + {' + '.join(at) or '0'};")
        # the row's inside is a copy; only its padded ends go through the mapping
        b, e, n = max(begin[last], 0), max(end[last], 0), cropped[last]
        j = _pad_index(mode, "i", begin[last], end[last], x.shape[last])
        for lo, hi in ((0, b), (b + n, b + n + e)):
            if hi > lo:
                with src.block(f"for (long i = {lo}; i < {hi}; i++)"):
                    src.line(f"const long j = {j};")
                    src.line(f"dst[i] = j < 0 ? {lit} : row[j];")
        if n > 0:
            src.line(f"memcpy(dst + {b}, row + {max(0, -begin[last])}, {n} * sizeof({x.ctype}));")


EMITTERS = {
    **{op: emit_copy_like for op in VIEW_OPS},
    "Transpose": emit_transpose,
    "Concat": emit_concat,
    "Split": emit_split,
    "Slice": emit_slice,
    "Gather": emit_gather,
    "Expand": emit_expand,
    "Shape": emit_shape,
    "ConstantOfShape": emit_constant_of_shape,
    "Pad": emit_pad,
}
