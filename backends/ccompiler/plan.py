"""Where each value of a region lives: an input, a constant, an output, or the workspace.

Rules:
1. A parameter is read where the caller's array is; a constant where its numpy array is
   (passed by pointer, so weights never enter the C source or its hash).
2. A value the region returns is written straight into its output array (the first time it
   appears among the outputs; a repeat, a parameter or a constant returned is copied at the end).
3. A view op (Reshape, Flatten, Squeeze, Unsqueeze, Identity) shares its input's storage,
   unless it is returned: then it copies into its output.
4. Every other value gets a slice of one workspace. Slices of values alive at the same time
   never overlap; the rest reuse memory, placed largest first at the lowest offset that fits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from byoc.ir import Call, Constant, Expr, TensorType, Tuple, TupleGetItem, Var

from .shapes import Key, key_of, n_outputs

ALIGN = 64


@dataclass(eq=False)
class Storage:
    """A buffer. ``kind`` is input/const/output/work; ``index`` the argument position of its
    kind; ``offset`` its byte offset in the workspace (work only)."""

    kind: str
    index: int
    nbytes: int
    dtype: str
    label: str  # the ONNX name it is known by (sanitized before it reaches C)
    offset: int = 0
    first: int = 0  # op index that writes it
    last: int = 0  # last op index that reads it


@dataclass
class Plan:
    storage: dict[Key, Storage]
    inputs: list[Storage]
    constants: list[tuple[Storage, Constant]]
    outputs: list[Storage]
    work: list[Storage]
    arena_bytes: int
    output_keys: list[Key]
    copies: list[tuple[int, Key]] = field(default_factory=list)  # (output slot, value) at the end


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_storage(params: Sequence[Var], body: Expr, order: list[Expr],
                 types: Mapping[Key, TensorType], is_view: Callable[[Call], bool],
                 static_input: Callable[[Call, int], bool], label: Callable[[Expr, int], str]
                 ) -> Plan:
    """Storage for every value of a region (see the module docstring)."""

    def nbytes(k: Key) -> int:
        t = types[k]
        return int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize

    fields = list(body.fields) if isinstance(body, Tuple) else [body]
    out_keys = [key_of(f) for f in fields]
    storage: dict[Key, Storage] = {}
    inputs = []
    for i, p in enumerate(params):
        key = (p, 0)
        storage[key] = s = Storage("input", i, nbytes(key), types[key].dtype, p.name)
        inputs.append(s)
    constants: list[tuple[Storage, Constant]] = []

    def const_storage(c: Constant) -> Storage:
        k = (c, 0)
        if k not in storage:
            storage[k] = Storage("const", len(constants), c.value.nbytes, c.value.dtype.name,
                                 c.name)
            constants.append((storage[k], c))
        return storage[k]

    outputs: list[Storage] = []
    first_slot: dict[Key, int] = {}
    for slot, (f, k) in enumerate(zip(fields, out_keys)):
        if isinstance(f, (Call, TupleGetItem)):
            first_slot.setdefault(k, slot)
    copies = []
    slot_storage: dict[int, Storage] = {}
    for slot, (f, k) in enumerate(zip(fields, out_keys)):
        s = Storage("output", slot, nbytes(k), types[k].dtype, label(f, 0))
        outputs.append(s)
        slot_storage[slot] = s
        if first_slot.get(k) != slot:
            copies.append((slot, k))

    ops = [e for e in order if isinstance(e, Call)]
    work: list[Storage] = []
    for t, call in enumerate(ops):
        for j, a in enumerate(call.args):
            if isinstance(a, Constant) and not static_input(call, j):
                const_storage(a)
        for k in range(n_outputs(call)):
            key = (call, k)
            if key in first_slot:
                s = slot_storage[first_slot[key]]
            elif k == 0 and is_view(call):
                s = storage[key_of(call.args[0])]  # type: ignore[arg-type]
            else:
                s = Storage("work", len(work), nbytes(key), types[key].dtype, label(call, k),
                            first=t, last=t)
                work.append(s)
            storage[key] = s
        for j, a in enumerate(call.args):
            if a is not None and not static_input(call, j):
                s = storage[key_of(a)]
                s.last = max(s.last, t)
    for f in fields:
        if isinstance(f, Constant):
            const_storage(f)
    for _, k in copies:
        s = storage[k]
        s.last = len(ops)
    return Plan(storage, inputs, constants, outputs, work, _place(work), out_keys, copies)


_BUCKET = 64  # ops per bucket of the index of placed buffers by lifetime


def _place(work: list[Storage]) -> int:
    """Give each work buffer an offset; returns the arena size in bytes.

    A buffer looks only at the placed ones alive at the same time, found through buckets of
    ``_BUCKET`` ops (each placed buffer is in the buckets its lifetime touches): comparing it
    with every placed buffer made a 30,000-op region's plan take minutes."""
    buckets: dict[int, list[Storage]] = {}
    top = 0
    for buf in sorted(work, key=lambda s: (-s.nbytes, s.index)):
        near = {id(o): o for b in range(buf.first // _BUCKET, buf.last // _BUCKET + 1)
                for o in buckets.get(b, ())}
        spans = sorted((o.offset, o.offset + o.nbytes) for o in near.values()
                       if o.first <= buf.last and buf.first <= o.last)
        offset = 0
        for lo, hi in spans:
            if offset + buf.nbytes <= lo:
                break
            offset = max(offset, _align(hi))
        buf.offset = offset
        top = max(top, _align(offset + buf.nbytes))
        for b in range(buf.first // _BUCKET, buf.last // _BUCKET + 1):
            buckets.setdefault(b, []).append(buf)
    return top
