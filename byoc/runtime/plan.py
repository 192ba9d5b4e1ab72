"""Compile a function into a flat instruction list the executor can loop over.

Each value gets a slot; each instruction reads slots and writes one; a slot is cleared right
after its last reader runs (reference counting done once, at build time), so intermediate
tensors are freed as early as the seed's memory planner would free them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..ir import (Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, TupleType, Var,
                  post_order)

# An instruction: (kind, payload, argument slots (-1 = omitted), output slot, slots to free)
CALL, GETITEM, TUPLE = 0, 1, 2


@dataclass
class Instr:
    kind: int
    fn: Callable | int | None  # the kernel (CALL) or the tuple index (GETITEM)
    args: tuple[int, ...]
    out: int
    free: tuple[int, ...] = ()
    call: Call | None = None  # for errors and timing: span and op


@dataclass
class Plan:
    """A function ready to run: where its params go, its constants, its instructions."""

    func: Function
    n_slots: int
    param_slots: list[int]
    constants: list[tuple[int, np.ndarray]]
    instrs: list[Instr]
    output_slots: list[int]
    slot_of: dict[Expr, int] = field(default_factory=dict)  # each value's slot
    # The instructions as flat tuples for the executor's loop: (kind, fn, args, out, free,
    # unpack, index). An omitted input reads slot ``none_slot``, which always holds None.
    code: list[tuple] = field(default_factory=list)
    none_slot: int = 0


def make_plan(func: Function, kernel_for: Callable[[Call], Callable]) -> Plan:
    """Lay ``func`` out as slots and instructions; ``kernel_for`` makes each call's kernel."""
    body = func.body
    outputs = list(body.fields) if isinstance(body, Tuple) and "output_names" in func.attrs \
        and len(func.attrs["output_names"]) == len(body.fields) else [body]
    order = post_order(outputs)
    slot_of: dict[Expr, int] = {}
    for p in func.params:
        slot_of[p] = len(slot_of)
    constants: list[tuple[int, np.ndarray]] = []
    instrs: list[Instr] = []
    for e in order:
        if e in slot_of:
            continue
        slot = len(slot_of)
        slot_of[e] = slot
        if isinstance(e, Constant):
            constants.append((slot, e.value))
        elif isinstance(e, Var):
            raise ValueError(f"free variable {e.name!r} in a function being built")
        elif isinstance(e, GlobalVar):
            continue
        elif isinstance(e, Call):
            args = tuple(-1 if a is None else slot_of[a] for a in e.args)
            instrs.append(Instr(CALL, kernel_for(e), args, slot, call=e))
        elif isinstance(e, TupleGetItem):
            instrs.append(Instr(GETITEM, e.index, (slot_of[e.tuple_value],), slot))
        elif isinstance(e, Tuple):
            instrs.append(Instr(TUPLE, None, tuple(slot_of[f] for f in e.fields), slot))
    output_slots = [slot_of[o] for o in outputs]
    keep = set(output_slots) | {s for s, _ in constants}
    last_use: dict[int, int] = {}
    for k, ins in enumerate(instrs):
        for a in ins.args:
            if a >= 0:
                last_use[a] = k
    frees: list[list[int]] = [[] for _ in instrs]
    for slot, k in last_use.items():
        if slot not in keep:
            frees[k].append(slot)
    for ins, fr in zip(instrs, frees):
        ins.free = tuple(fr)
    none_slot = len(slot_of)
    code = []
    for k, ins in enumerate(instrs):
        args = tuple(none_slot if a < 0 else a for a in ins.args)
        unpack = ins.kind == CALL and not isinstance(ins.call.type, TupleType)
        code.append((ins.kind, ins.fn, args, ins.out, ins.free, unpack, k))
    return Plan(func, none_slot + 1, [slot_of[p] for p in func.params], constants, instrs,
                output_slots, slot_of, code, none_slot)
