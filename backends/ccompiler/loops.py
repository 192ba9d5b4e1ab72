"""Loop nests over strided operands: the one shape of code most emitters write.

``loop_nest(src, shape, operands)`` opens ``for`` loops over ``shape`` and hands back, for each
operand (an element offset and a stride per dim), the C expression of its element index.
Dims of size 1 are dropped and neighbouring dims merged wherever every operand lets them, so a
contiguous elementwise op becomes one flat loop the compiler vectorizes.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from byoc.codegen import CSource

if TYPE_CHECKING:
    from .emitter import Emit

Strided = tuple[int | str, Sequence[int]]  # (offset, element stride per dim)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> tuple[int, ...]:
    """Strides reading a tensor of ``shape`` broadcast (numpy rules) to ``out_shape``."""
    own = contiguous_strides(shape)
    pad = len(out_shape) - len(shape)
    return tuple(0 if k < pad or shape[k - pad] == 1 and out_shape[k] != 1 else own[k - pad]
                 for k in range(len(out_shape)))


def coalesce(shape: Sequence[int], strides: list[Sequence[int]]
             ) -> tuple[list[int], list[list[int]]]:
    """The same iteration with size-1 dims dropped and mergeable neighbours merged."""
    dims = [k for k, d in enumerate(shape) if d != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for k in dims:
        if out_shape and all(s[-1] == st[k] * shape[k] for s, st in zip(out_strides, strides)):
            out_shape[-1] *= shape[k]
            for s, st in zip(out_strides, strides):
                s[-1] = st[k]
            continue
        out_shape.append(shape[k])
        for s, st in zip(out_strides, strides):
            s.append(st[k])
    return out_shape, out_strides


def index(offset: int | str, strides: Sequence[int], var: str) -> str:
    """``offset + i0 * s0 + i1 * s1 ...`` with zero terms left out."""
    terms = [] if offset in (0, "0") else [str(offset)]
    for k, s in enumerate(strides):
        if s == 1:
            terms.append(f"{var}{k}")
        elif s != 0:
            terms.append(f"{var}{k} * {s}")
    return " + ".join(terms) or "0"


# Multiply-adds (about) of a one-dim loop per pool task unit: the cut depends on the loop
# alone, never on the thread count (results never vary).
BLOCK = 4096


@contextlib.contextmanager
def loop_nest(src: CSource, shape: Sequence[int], operands: Sequence[Strided],
              var: str = "i", par: Emit | None = None, cost: int = 1) -> Iterator[list[str]]:
    """Open loops over ``shape``; yields each operand's index expression inside them.

    With ``par`` (the op's ``Emit``, whose ``src`` this is), the outermost loop may run on
    the thread pool when the nest is big (``cost``: multiply-adds per element, about): one
    dim is cut into blocks of ``BLOCK`` multiply-adds. Only for nests whose every iteration writes its own
    element."""
    dims, strides = coalesce(shape, [s for _, s in operands])
    if any(d == 0 for d in shape):
        dims, strides = [0], [[0] for _ in operands]
    work = cost * math.prod(dims)
    block = max(1, BLOCK // max(1, cost))
    with contextlib.ExitStack() as stack:
        for k, d in enumerate(dims):
            loop = f"{var}{k}"
            if k == 0 and par is not None and (len(dims) > 1 or block == 1):
                stack.enter_context(par.parallel(loop, d, work))
            elif k == 0 and par is not None and d > block:
                stack.enter_context(par.parallel(f"{loop}b", -(-d // block), work))
                src.line(f"const long {loop}e = {loop}b * {block} + {block} < {d} ? "
                         f"{loop}b * {block} + {block} : {d};")
                stack.enter_context(src.block(
                    f"for (long {loop} = {loop}b * {block}; {loop} < {loop}e; {loop}++)"))
            else:
                stack.enter_context(src.block(f"for (long {loop} = 0; {loop} < {d}; {loop}++)"))
        yield [index(off, st, var) for (off, _), st in zip(operands, strides)]


def emit_copy(src: CSource, shape: Sequence[int], dst: str, dst_view: Strided, source: str,
              src_view: Strided, var: str = "i", par: Emit | None = None) -> None:
    """``dst[view] = source[view]`` element by element over ``shape`` (on the pool if big,
    with ``par``)."""
    with loop_nest(src, shape, [dst_view, src_view], var, par) as (di, si):
        src.line(f"{dst}[{di}] = {source}[{si}];")
