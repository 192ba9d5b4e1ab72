"""Reductions over constant axes: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2.

The output is set to the reduction's identity, then the input is walked in memory order and
folded in: dims reduced at the end of the layout use a register accumulator (a vector sum for
contiguous Sum/Mean rows), kept inner dims fold straight into the output (vectorized).
"""

from __future__ import annotations

import contextlib

import numpy as np

from byoc.codegen import float_literal
from byoc.ir import Call

from ..emitter import Emit, Tensor
from ..loops import coalesce, index

_STEP = {  # (how an element is folded into acc, how two partial results combine)
    "ReduceSum": ("{acc} += {v}", "{acc} += {v}"),
    "ReduceMean": ("{acc} += {v}", "{acc} += {v}"),
    "ReduceSumSquare": ("{acc} += {v} * {v}", "{acc} += {v}"),
    "ReduceL2": ("{acc} += {v} * {v}", "{acc} += {v}"),
    "ReduceL1": ("{acc} += fabsf({v})", "{acc} += {v}"),
    "ReduceProd": ("{acc} *= {v}", "{acc} *= {v}"),
    "ReduceMax": ("{acc} = {v} > {acc} ? {v} : {acc}", "{acc} = {v} > {acc} ? {v} : {acc}"),
    "ReduceMin": ("{acc} = {v} < {acc} ? {v} : {acc}", "{acc} = {v} < {acc} ? {v} : {acc}"),
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


def emit_reduce(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    x, out = ins[0], outs[0]
    assert x is not None
    axes = reduced_axes(call, x, ins[1] if len(ins) > 1 else None)
    src = ctx.src
    if not axes:
        src.line(f"memcpy({out.ptr}, {x.ptr}, {out.nbytes});")
        return
    kept = [d for k, d in enumerate(x.shape) if k not in axes]
    out_strides_kept = list(Tensor("", tuple(kept), x.dtype).strides)
    out_strides = [0 if k in axes else out_strides_kept.pop(0) for k in range(x.rank)]
    dims, (x_st, o_st) = coalesce(x.shape, [x.strides, out_strides])
    if not dims:  # every dim is 1: one element, folded in like any other
        dims, x_st, o_st = [1], [0], [0]
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    step, combine = _STEP[call.op]
    init = _identity(call.op, x.dtype)
    src.line(f"for (long i = 0; i < {out.size}; i++) {out.ptr}[i] = {init};")
    if count and dims:
        tail_reduced = o_st[-1] == 0
        loops = dims[:-1] if tail_reduced else dims
        with contextlib.ExitStack() as nest:
            for k, d in enumerate(loops):
                nest.enter_context(src.block(f"for (long i{k} = 0; i{k} < {d}; i{k}++)"))
            xi, oi = index(0, x_st[:len(loops)], "i"), index(0, o_st[:len(loops)], "i")
            if tail_reduced:
                n, s = dims[-1], x_st[-1]
                if call.op in ("ReduceSum", "ReduceMean") and s == 1 and x.dtype == "float32":
                    ctx.need("reduce")
                    src.line(f"const {x.ctype} acc = byoc_sum({x.ptr} + {xi}, {n});")
                else:
                    src.line(f"{x.ctype} acc = {init};")
                    src.line(f"const {x.ctype} *restrict xr = {x.ptr} + {xi};")
                    fold = step.format(acc="acc", v=f"xr[r * {s}]" if s != 1 else "xr[r]")
                    src.line(f"for (long r = 0; r < {n}; r++) {fold};")
                src.line(combine.format(acc=f"{out.ptr}[{oi}]", v="acc") + ";")
            else:
                src.line(step.format(acc=f"{out.ptr}[{oi}]", v=f"{x.ptr}[{xi}]") + ";")
    if call.op == "ReduceMean":
        src.line(f"for (long i = 0; i < {out.size}; i++) {out.ptr}[i] /= {float_literal(count)};")
    elif call.op == "ReduceL2":
        src.line(f"for (long i = 0; i < {out.size}; i++) {out.ptr}[i] = sqrtf({out.ptr}[i]);")


EMITTERS = {op: emit_reduce for op in _STEP}
