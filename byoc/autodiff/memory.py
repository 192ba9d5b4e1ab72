"""How much memory running main takes: the executor's free-after-last-use plan replayed on
concrete inputs, against a lower bound.

``byoc.runtime.plan.make_plan`` orders main's instructions and gives each the slots to free
after it runs. Running those instructions once on the given inputs, freeing as the plan says,
gives every value's size and the bytes alive after each instruction. Three figures, for
intermediate values only (the caller's inputs and the module's constants are counted apart):

- peak: the most bytes alive at once under the plan, which is what the host executor holds and
  the least a static planner (issue 7) can allocate without in-place reuse;
- bound: the largest working set of one instruction (its inputs and outputs, plus main's
  outputs made so far, which are returned and never freed): no plan of this order goes lower;
- total: every intermediate kept to the end, i.e. no liveness analysis at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import IRModule, TupleType
from ..runtime import build
from ..runtime.executor import check_inputs
from ..runtime.plan import CALL, GETITEM


@dataclass(frozen=True)
class MemoryReport:
    peak_bytes: int
    bound_bytes: int
    total_bytes: int
    input_bytes: int
    instructions: int
    peak_at: str  # the node whose step reaches the peak

    def __str__(self) -> str:
        return (f"peak {_mib(self.peak_bytes)} (bound {_mib(self.bound_bytes)}, no freeing "
                f"{_mib(self.total_bytes)}) over {self.instructions} instructions, "
                f"inputs {_mib(self.input_bytes)}")


def _mib(n: int) -> str:
    return f"{n / 2**20:.3f} MiB"


def _nbytes(v: Any) -> int:
    return int(getattr(v, "nbytes", 0))


def measure_memory(mod: IRModule, inputs: Mapping[str, Any]) -> MemoryReport:
    """Run main's plan once on ``inputs``, counting bytes (see the module docstring).

    The plan's instructions are run here, one by one, rather than by the executor, whose fast
    paths (a compiled straight-line body) leave no place to look at each value."""
    exe = build(mod)
    plan = exe.main_plan
    args = check_inputs(mod.main, inputs)
    slots: list[Any] = [None] * plan.n_slots
    for s, a in zip(plan.param_slots, args):
        slots[s] = a
    for s, v in plan.constants:
        slots[s] = v
    ledger = _Ledger(set(plan.output_slots))
    with np.errstate(all="ignore"):
        for ins in plan.instrs:
            if ins.kind == CALL:
                assert ins.call is not None
                result = ins.fn(*[None if a < 0 else slots[a] for a in ins.args])  # type: ignore
                tupled = isinstance(ins.call.type, TupleType)
                slots[ins.out] = result if tupled else result[0]
                ledger.made(ins.out, [_nbytes(v) for v in result])
            elif ins.kind == GETITEM:
                slots[ins.out] = slots[ins.args[0]][ins.fn]
                ledger.field(ins.out, ins.args[0], ins.fn)  # type: ignore[arg-type]
            else:
                slots[ins.out] = tuple(slots[a] for a in ins.args)
                ledger.grouped(ins.out, ins.args)
            name = ins.call.span.name if ins.call is not None and ins.call.span else ""
            ledger.step(ins.out, ins.args if ins.kind == CALL else None, name)
            for slot in ins.free:
                slots[slot] = None
                ledger.freed(slot)
    held = sum(_nbytes(v) for v in args) + sum(_nbytes(v) for _, v in plan.constants)
    return MemoryReport(ledger.peak, ledger.bound, ledger.total, held, len(plan.instrs),
                        ledger.peak_at)


class _Ledger:
    """Bytes alive, by reference counts on buffers (one per output of a call); a slot holding
    a tuple, or a field of one, refers to the buffers inside it."""

    def __init__(self, outputs: set[int]):
        self.outputs = outputs
        self.size: list[int] = []
        self.fields: dict[int, list[list[int]]] = {}  # slot -> buffers of each field
        self.count: dict[int, int] = {}
        self.retained: set[int] = set()  # buffers of main's outputs: never freed
        self.live = self.peak = self.bound = self.total = 0
        self.peak_at = ""

    def refs(self, slot: int) -> set[int]:
        return {buf for f in self.fields.get(slot, ()) for buf in f}

    def made(self, slot: int, sizes: list[int]) -> None:
        first = len(self.size)
        self.size.extend(sizes)
        self.total += sum(sizes)
        self.fields[slot] = [[first + i] for i in range(len(sizes))]

    def field(self, slot: int, source: int, index: int) -> None:
        fields = self.fields.get(source, [])
        self.fields[slot] = [fields[index]] if index < len(fields) else []

    def grouped(self, slot: int, parts: tuple[int, ...]) -> None:
        self.fields[slot] = [sorted(self.refs(p)) for p in parts]

    def step(self, slot: int, reads: tuple[int, ...] | None, name: str) -> None:
        """The instruction writing ``slot`` ran (a call reading ``reads``)."""
        for buf in self.refs(slot):
            self.count[buf] = self.count.get(buf, 0) + 1
            if self.count[buf] == 1:
                self.live += self.size[buf]
        if slot in self.outputs:
            self.retained |= self.refs(slot)
        if self.live > self.peak:
            self.peak, self.peak_at = self.live, name
        if reads is not None:
            working = self.refs(slot).union(*(self.refs(a) for a in reads if a >= 0),
                                            self.retained)
            self.bound = max(self.bound, sum(self.size[b] for b in working))

    def freed(self, slot: int) -> None:
        for buf in self.refs(slot):
            self.count[buf] -= 1
            if self.count[buf] == 0:
                self.live -= self.size[buf]
