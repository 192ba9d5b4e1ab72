"""A static memory plan: which buffer each intermediate tensor lives in (the seed's allocator).

The NNVM/MXNet algorithm over a sequence of steps in topological order:

1. Reference counts: each value's number of reads; values the function returns get one more,
   so they are never given back.
2. In place: a step whose op is elementwise writes its output over an input when that input is
   read for the last time here, is a planned buffer (not a parameter or constant) and has the
   output's size and dtype. A view (Reshape, Flatten...) shares its input's buffer outright.
3. Otherwise its outputs, smallest first, ask the allocator for a block: a freed block of size
   in ``[size / MATCH_RANGE, size * MATCH_RANGE]``, the smallest at least ``size`` first, else
   the largest smaller one (enlarged); else a new block.
4. Then the inputs' counts drop; a value at zero gives its block back. An output nobody reads
   is given back at once.

The seed's blocks can grow past what is needed (a block enlarged for a big tensor stays big),
so the plan also lays the same buffers (values sharing one by steps 2 out) into one arena by
byte offset: largest first, each at the lowest offset free for its whole lifetime. That arena
is what the native backend's workspaces use; both sizes are reported.

    plan = plan_steps(steps)             # generic: used by the native backend's workspaces
    plan = plan_function(mod.main)       # a function with static types (main, a region)
    plan.peak_bytes, plan.naive_bytes, plan.lower_bound   # report figures

``lower_bound`` is the most bytes alive at once (views counted once): no plan without in-place
writes can use less.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..ir import Call, Constant, Expr, Function, TensorType, Tuple, TupleGetItem, TupleType, Var
from ..ir import post_order
from ..op import FusePattern, lookup

MATCH_RANGE = 16
VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
Key = Hashable


@dataclass(frozen=True)
class Value:
    """A tensor a step writes: its key, bytes and dtype."""

    key: Key
    nbytes: int
    dtype: str


@dataclass(frozen=True)
class Step:
    """One kernel: the values it reads (planned or not) and writes.

    ``inplace``: output 0 may overwrite an input of equal size (an elementwise op).
    ``view``: output 0 is input 0 seen with another shape (no memory of its own).
    """

    reads: tuple[Key, ...]
    writes: tuple[Value, ...]
    inplace: bool = False
    view: bool = False


@dataclass
class MemoryPlan:
    """Where each planned value lives: ``block_of[key]``, blocks' sizes and byte offsets."""

    block_of: dict[Key, int]
    block_bytes: list[int]
    naive_bytes: int  # every value its own buffer
    lower_bound: int  # most bytes alive at once
    inplace: int = 0  # values written over an input
    reused: int = 0  # values given a freed block
    offsets: dict[Key, int] = field(default_factory=dict)  # byte offset in the arena
    arena_bytes: int = 0

    @property
    def block_peak_bytes(self) -> int:
        """Bytes of the seed's blocks."""
        return sum(self.block_bytes)

    @property
    def peak_bytes(self) -> int:
        """Bytes of the arena the plan lays the buffers in."""
        return self.arena_bytes

    def offset(self, key: Key) -> int:
        """Byte offset of a value in the arena (64-byte aligned)."""
        return self.offsets[key]

    def summary(self) -> dict[str, float]:
        return {"planned_peak_bytes": self.peak_bytes, "block_peak_bytes": self.block_peak_bytes,
                "naive_bytes": self.naive_bytes, "lower_bound_bytes": self.lower_bound,
                "inplace": self.inplace, "reused": self.reused, "blocks": len(self.block_bytes),
                "peak_over_bound": round(self.peak_bytes / max(1, self.lower_bound), 3)}


class _Allocator:
    """Free blocks by size; a request takes a close-enough one (see the module docstring)."""

    def __init__(self, match_range: int):
        self.match = match_range
        self.sizes: list[int] = []
        self.free: list[tuple[int, int]] = []  # sorted (size, block)

    def request(self, nbytes: int) -> tuple[int, bool]:
        """A block id for ``nbytes`` and whether it was reused."""
        lo = bisect.bisect_left(self.free, (nbytes // self.match, -1))
        mid = bisect.bisect_left(self.free, (nbytes, -1))
        hi = bisect.bisect_right(self.free, (nbytes * self.match, 1 << 62))
        if mid < hi:
            pick = mid  # the smallest block large enough
        elif lo < mid:
            pick = mid - 1  # the largest smaller block, enlarged
        else:
            self.sizes.append(nbytes)
            return len(self.sizes) - 1, False
        _, block = self.free.pop(pick)
        self.sizes[block] = max(self.sizes[block], nbytes)
        return block, True

    def release(self, block: int) -> None:
        bisect.insort(self.free, (self.sizes[block], block))


def plan_steps(steps: Sequence[Step], keep: Sequence[Key] = (),
               match_range: int = MATCH_RANGE, align: int = 64) -> MemoryPlan:
    """Plan the values ``steps`` write; ``keep`` are returned (alive at the end). Values a step
    reads that no step writes (parameters, constants) are not planned."""
    written = {v.key: v for s in steps for v in s.writes}
    refs: dict[Key, int] = {k: 0 for k in written}
    for s in steps:
        for r in s.reads:
            if r in refs:
                refs[r] += 1
    for k in keep:
        if k in refs:
            refs[k] += 1
    alloc = _Allocator(match_range)
    block_of: dict[Key, int] = {}
    users_of_block: dict[int, int] = {}  # live values sharing a block (views, in-place)
    plan = MemoryPlan(block_of, alloc.sizes, sum(v.nbytes for v in written.values()),
                      _lower_bound(steps, written, keep))
    shares: dict[Key, Key] = {}  # value -> the value whose buffer it writes (in place, view)
    life: dict[Key, list[int]] = {}  # buffer (its first value) -> [first step, last step]
    for t, s in enumerate(steps):
        for r in s.reads:
            if r in written:
                life[shares.get(r, r)][1] = t
        pending = list(s.writes)
        if s.writes and (s.view or s.inplace):
            out = s.writes[0]
            src = _inplace_source(s, out, refs, block_of, written)
            if src is not None:
                shares[out.key] = shares.get(src, src)
                block_of[out.key] = block_of[src]
                users_of_block[block_of[src]] += 1
                plan.inplace += not s.view
                pending = pending[1:]
        for v in sorted(pending, key=lambda v: v.nbytes):
            block, reused = alloc.request(v.nbytes)
            life[v.key] = [t, t]
            block_of[v.key] = block
            users_of_block[block] = 1
            plan.reused += reused
        for r in s.reads:
            if r in refs:
                refs[r] -= 1
                if refs[r] == 0:
                    _drop(r, block_of, users_of_block, alloc)
        for v in s.writes:
            if refs[v.key] == 0:  # written, never read: its block is free again right away
                _drop(v.key, block_of, users_of_block, alloc)
    for k in keep:
        if k in written:
            life[shares.get(k, k)][1] = len(steps)
    buffers = {k: (lo, hi, written[k].nbytes) for k, (lo, hi) in life.items()}
    for k, root in shares.items():  # a view or in-place value sized like its buffer's biggest
        lo, hi, n = buffers[root]
        buffers[root] = (lo, hi, max(n, written[k].nbytes))
    # greedy placement is a heuristic: largest first, and first made first; keep the smaller
    where = min((_place(buffers, align, order) for order in (_by_size, _by_start)),
                key=lambda w: _arena(w, buffers, align))
    plan.offsets = {k: where[shares.get(k, k)] for k in written}
    plan.arena_bytes = _arena(where, buffers, align)
    return plan


def _inplace_source(s: Step, out: Value, refs: dict[Key, int], block_of: dict[Key, int],
                    written: Mapping[Key, Value]) -> Key | None:
    """The input ``out`` may share: a view's source, or an input read for the last time."""
    candidates = s.reads[:1] if s.view else s.reads
    for r in candidates:
        if r not in block_of:
            continue  # a parameter or constant: not ours to overwrite
        if s.view:
            return r
        v = written[r]
        last_read = refs[r] == s.reads.count(r)
        if last_read and v.nbytes == out.nbytes and v.dtype == out.dtype:
            return r
    return None


def _drop(key: Key, block_of: dict[Key, int], users: dict[int, int], alloc: _Allocator) -> None:
    block = block_of[key]
    users[block] -= 1
    if users[block] == 0:
        alloc.release(block)


def _up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


Buffers = Mapping[Key, tuple[int, int, int]]  # buffer -> (first step, last step, bytes)


def _by_size(item: tuple[Key, tuple[int, int, int]]) -> tuple[int, int]:
    return -item[1][2], item[1][0]


def _by_start(item: tuple[Key, tuple[int, int, int]]) -> tuple[int, int]:
    return item[1][0], -item[1][2]


def _arena(where: dict[Key, int], buffers: Buffers, align: int) -> int:
    return max((where[k] + _up(n, align) for k, (_, _, n) in buffers.items()), default=0)


def _place(buffers: Buffers, align: int, order) -> dict[Key, int]:
    """Offsets for buffers taken in ``order``, each at the lowest offset free for its life."""
    placed: list[tuple[int, int, int, int]] = []  # (first, last, offset, end)
    where: dict[Key, int] = {}
    for k, (lo, hi, n) in sorted(buffers.items(), key=order):
        busy = sorted((o, e) for a, b, o, e in placed if a <= hi and lo <= b)
        offset = 0
        for o, e in busy:
            if offset + n <= o:
                break
            offset = max(offset, e)
        where[k] = offset
        placed.append((lo, hi, offset, offset + _up(n, align)))
    return where


def _lower_bound(steps: Sequence[Step], written: Mapping[Key, Value], keep: Sequence[Key]) -> int:
    """The most bytes alive at once, a view counted with its source."""
    root: dict[Key, Key] = {}
    first: dict[Key, int] = {}
    last: dict[Key, int] = {}
    for t, s in enumerate(steps):
        for r in s.reads:
            if r in written:
                last[root.get(r, r)] = t
        for k, v in enumerate(s.writes):
            if s.view and k == 0 and s.reads and s.reads[0] in written:
                root[v.key] = root.get(s.reads[0], s.reads[0])
                last[root[v.key]] = max(last.get(root[v.key], t), t)
            else:
                first[v.key] = t
                last.setdefault(v.key, t)
    for k in keep:
        if k in written:
            last[root.get(k, k)] = len(steps)
    delta = [0] * (len(steps) + 2)
    for k, t in first.items():
        delta[t] += written[k].nbytes
        delta[last[k] + 1] -= written[k].nbytes
    peak = alive = 0
    for d in delta:
        alive += d
        peak = max(peak, alive)
    return peak


# -- a function's steps -------------------------------------------------------------------------


def _nbytes(t) -> int:
    if not isinstance(t, TensorType) or not t.is_static or t.dtype is None:
        raise ValueError(f"memory planning needs static types, got {t}")
    return int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize


def is_inplace_op(call: Call) -> bool:
    """Elementwise ops (by the registry's fuse pattern) may write over an input."""
    if not isinstance(call.op, str):
        return False
    entry = lookup(call.op)
    return entry is not None and entry.fuse_pattern <= FusePattern.BROADCAST


def function_steps(func: Function, types: Mapping[tuple[Expr, int], TensorType] | None = None
                   ) -> tuple[list[Step], list[Key]]:
    """The steps of a function's calls (keys: (call, output index)) and its results.

    ``types`` gives concrete types by key (e.g. ccompiler's ``concrete_types``); by default the
    function's own types, which must be static.
    """
    def key(e) -> Key:
        return (e.tuple_value, e.index) if isinstance(e, TupleGetItem) else (e, 0)

    def type_of(call: Call, k: int):
        if types is not None:
            return types[(call, k)]
        return call.type.fields[k] if isinstance(call.type, TupleType) else call.type

    steps = []
    for e in post_order(func.body):
        if not isinstance(e, Call):
            continue
        n = len(e.type.fields) if isinstance(e.type, TupleType) else 1
        writes = []
        for k in range(n):
            t = type_of(e, k)
            writes.append(Value((e, k), _nbytes(t), t.dtype))
        reads = tuple(key(a) for a in e.args if a is not None and not isinstance(a, (Var, Constant)))
        steps.append(Step(reads, tuple(writes), inplace=is_inplace_op(e),
                          view=isinstance(e.op, str) and e.op in VIEW_OPS))
    body = func.body
    results = [key(f) for f in (body.fields if isinstance(body, Tuple) else (body,))]
    return steps, results


def plan_function(func: Function, types: Mapping[tuple[Expr, int], TensorType] | None = None,
                  match_range: int = MATCH_RANGE) -> MemoryPlan:
    """The memory plan of a function's intermediate tensors and results (parameters and
    constants are the caller's)."""
    steps, results = function_steps(func, types)
    return plan_steps(steps, results, match_range)


def plan_main(mod, inputs: Mapping[str, np.ndarray], match_range: int = MATCH_RANGE
              ) -> MemoryPlan:
    """The memory plan of ``mod``'s main for ``inputs``: one debug run gives every tensor's
    concrete shape (dynamic models compute theirs), then ``plan_function``."""
    from .executor import build

    tensors = build(mod).run(inputs, capture="all").tensors
    types: dict[tuple[Expr, int], TensorType] = {}
    for e in post_order(mod.main.body):
        if isinstance(e, Call):
            names = e.span.outputs if e.span is not None else ()
            declared = e.type.fields if isinstance(e.type, TupleType) else (e.type,)
            for k, t in enumerate(declared):
                value = tensors.get(names[k]) if k < len(names) else None
                if value is not None:
                    t = TensorType(tuple(value.shape), value.dtype.name)
                types[(e, k)] = t  # type: ignore[assignment]
    return plan_function(mod.main, types, match_range)
