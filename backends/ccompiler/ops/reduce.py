"""Reductions over constant axes: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2.

The output is set to the reduction's identity, then the input is walked in memory order and
folded in: dims reduced at the end of the layout use a register accumulator (a vector sum for
contiguous Sum/Mean rows), kept inner dims fold straight into the output (vectorized).

A ``Prologue`` computes the input element by element instead of reading it: native fuses the
elementwise ops before a reduction this way (``ReduceSum(Mul(x, x))`` reads x once, no buffer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from byoc.codegen import CSource, float_literal
from byoc.ir import Call

from ..emitter import Emit, Tensor
from ..loops import broadcast_strides, coalesce, index, loop_nest

CHUNK = 256  # elements of a fused Sum/Mean row computed into L1 at a time, then vector-summed


@dataclass(frozen=True)
class Prologue:
    """What a reduction's input is computed from: ``reads`` (each broadcast to the input's
    shape), and ``value(src, xs)``, which writes the lines computing one element from the
    C names of the elements read (``xs``) and returns the C expression of its value."""

    reads: list[Tensor]
    value: Callable[[CSource, list[str]], str]

_STEP = {  # (how an element is folded into acc, how two partial results combine)
    "ReduceSum": ("{acc} += {v}", "{acc} += {v}"),
    "ReduceMean": ("{acc} += {v}", "{acc} += {v}"),
    "ReduceSumSquare": ("{acc} += {v} * {v}", "{acc} += {v}"),
    "ReduceL2": ("{acc} += {v} * {v}", "{acc} += {v}"),
    "ReduceL1": ("{acc} += fabsf({v})", "{acc} += {v}"),
    "ReduceProd": ("{acc} *= {v}", "{acc} *= {v}"),
    # a NaN is taken and then kept (nothing compares greater than it): the result is NaN
    "ReduceMax": ("{acc} = {v} > {acc} || {v} != {v} ? {v} : {acc}",) * 2,
    "ReduceMin": ("{acc} = {v} < {acc} || {v} != {v} ? {v} : {acc}",) * 2,
}


def _identity(op: str, dtype: str) -> str:
    floating = dtype == "float32"
    if op == "ReduceMax":
        return "-INFINITY" if floating else ("INT64_MIN" if dtype == "int64" else "INT32_MIN")
    if op == "ReduceMin":
        return "INFINITY" if floating else ("INT64_MAX" if dtype == "int64" else "INT32_MAX")
    if op == "ReduceProd":
        return "1.0f" if floating else "1"
    return "0.0f" if floating else "0"


def reduced_axes(call: Call, x: Tensor, axes_input: Tensor | None) -> list[int]:
    """The axes reduced, from the constant axes input (all when it is absent or empty)."""
    axes = [] if axes_input is None else [int(a) for a in np.asarray(axes_input.value).reshape(-1)]
    if not axes:
        return [] if call.attrs.get("noop_with_empty_axes", 0) else list(range(x.rank))
    return sorted({a + x.rank if a < 0 else a for a in axes})


def emit_reduce(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor],
                prologue: Prologue | None = None) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    axes = reduced_axes(call, x, ins[1] if len(ins) > 1 else None)
    src = ctx.src
    if prologue is None:
        prologue = Prologue([x], lambda src, xs: xs[0])
        if not axes:
            src.line(f"memcpy({out.ptr}, {x.ptr}, {out.nbytes});")
            return
    if not axes:  # the input as it is: the prologue's values
        views = [(0, out.strides), *((0, broadcast_strides(t.shape, x.shape))
                                     for t in prologue.reads)]
        with loop_nest(src, x.shape, views) as (oi, *at):
            src.line(f"{out.ptr}[{oi}] = {_element(src, prologue, at)};")
        return
    kept = [d for k, d in enumerate(x.shape) if k not in axes]
    out_strides_kept = list(Tensor("", tuple(kept), x.dtype).strides)
    out_strides = [0 if k in axes else out_strides_kept.pop(0) for k in range(x.rank)]
    reads = prologue.reads
    dims, (o_st, *r_st) = coalesce(x.shape, [out_strides,
                                             *(broadcast_strides(t.shape, x.shape) for t in reads)])
    if not dims:  # every dim is 1: one element, folded in like any other
        dims, o_st, r_st = [1], [0], [[0] for _ in reads]
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    step, combine = _STEP[call.op]
    init = _identity(call.op, x.dtype)
    src.line(f"for (long i = 0; i < {out.size}; i++) {out.ptr}[i] = {init};")
    if count and dims:
        tail_reduced = o_st[-1] == 0
        loops = dims[:-1] if tail_reduced else dims
        with contextlib.ExitStack() as nest:
            for k, d in enumerate(loops):
                if k == 0 and o_st[0]:  # a kept dim outermost: each i0 has outputs of its own
                    nest.enter_context(ctx.parallel("i0", d, x.size * (len(reads) + 1)))
                else:
                    nest.enter_context(src.block(f"for (long i{k} = 0; i{k} < {d}; i{k}++)"))
            at = [index(0, st[:len(loops)], "i") for st in r_st]
            oi = index(0, o_st[:len(loops)], "i")
            if tail_reduced:
                _fold_row(ctx, call, x, prologue, at, [st[-1] for st in r_st], dims[-1], init)
                src.line(combine.format(acc=f"{out.ptr}[{oi}]", v="acc") + ";")
            else:
                v = _element(src, prologue, at)
                src.line(step.format(acc=f"{out.ptr}[{oi}]", v=v) + ";")
    if call.op == "ReduceMean" and count:  # the mean of nothing is 0, as in onnxruntime
        src.line(f"for (long i = 0; i < {out.size}; i++) {out.ptr}[i] /= {float_literal(count)};")
    elif call.op == "ReduceL2":
        src.line(f"for (long i = 0; i < {out.size}; i++) {out.ptr}[i] = sqrtf({out.ptr}[i]);")


def _element(src: CSource, prologue: Prologue, at: list[str]) -> str:
    """Lines loading the reads at ``at`` and computing the element; its C expression."""
    xs = []
    for j, (t, i) in enumerate(zip(prologue.reads, at)):
        src.line(f"const {t.ctype} x{j} = {t.ptr}[{i}];")
        xs.append(f"x{j}")
    return prologue.value(src, xs)


def _fold_row(ctx: Emit, call: Call, x: Tensor, prologue: Prologue, at: list[str],
              steps: list[int], n: int, init: str) -> None:
    """``acc``: the row of ``n`` elements (read ``steps`` apart from ``at``) folded."""
    src = ctx.src
    plain = prologue.reads == [x]
    row = [f"{i} + r * {s}" if s not in (0, 1) else (f"{i} + r" if s else i)
           for i, s in zip(at, steps)]
    if call.op in ("ReduceSum", "ReduceMean") and x.dtype == "float32" and \
            (steps == [1] or not plain):
        ctx.need("reduce")
        if plain:
            src.line(f"const {x.ctype} acc = byoc_sum({x.ptr} + {at[0]}, {n});")
            return
        # computed a chunk at a time into L1 (that loop vectorizes), then summed as vectors
        src.line(f"{x.ctype} acc = 0.0f;")
        with src.block(f"for (long r0 = 0; r0 < {n}; r0 += {CHUNK})"):
            src.line(f"float chunk[{CHUNK}];")
            src.line(f"const long len = {n} - r0 < {CHUNK} ? {n} - r0 : {CHUNK};")
            with src.block("for (long c = 0; c < len; c++)"):
                src.line("const long r = r0 + c;")
                src.line(f"chunk[c] = {_element(src, prologue, row)};")
            src.line("acc += byoc_sum(chunk, len);")
        return
    src.line(f"{x.ctype} acc = {init};")
    with src.block(f"for (long r = 0; r < {n}; r++)"):
        src.line(_STEP[call.op][0].format(acc="acc", v=f"({_element(src, prologue, row)})")
                 + ";")


EMITTERS = {op: emit_reduce for op in _STEP}
