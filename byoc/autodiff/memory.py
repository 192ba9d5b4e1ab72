"""How much memory running main takes: the executor's free-after-last-use plan replayed on
concrete inputs, against a lower bound.

``byoc.runtime.plan.make_plan`` orders main's instructions and gives each the slots to free
after it runs. One run on the given inputs records every value's size; replaying the plan then
gives the bytes alive after each instruction. Three figures, for intermediate values only (the
caller's inputs and the module's constants are counted apart):

- peak: the most bytes alive at once under the plan, which is what the host executor holds and
  the least a static planner (issue 7) can allocate without in-place reuse;
- bound: the largest working set of one instruction (its inputs and outputs, plus main's
  outputs made so far, which are returned and never freed): no plan of this order goes lower;
- total: every intermediate kept to the end, i.e. no liveness analysis at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..ir import IRModule
from ..runtime import build
from ..runtime.plan import CALL, GETITEM, Plan


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
    """Run ``mod`` once on ``inputs`` and report its plan's memory (see the module docstring)."""
    exe = build(mod)
    plan = exe.main_plan
    sizes: dict[int, list[int]] = {}  # CALL output slot -> bytes of each of its outputs
    for ins in plan.instrs:
        if ins.kind == CALL:
            ins.fn = _recording(ins.fn, ins.out, sizes)  # type: ignore[arg-type]
    exe.run(inputs)
    held = sum(_nbytes(v) for v in inputs.values()) + sum(_nbytes(v) for _, v in plan.constants)
    return _replay(plan, sizes, held)


def _recording(fn: Callable[..., tuple], out: int, sizes: dict[int, list[int]]) -> Callable:
    def run(*args: Any) -> tuple:
        result = fn(*args)
        sizes[out] = [_nbytes(v) for v in result]
        return result

    return run


def _replay(plan: Plan, sizes: dict[int, list[int]], held: int) -> MemoryReport:
    """Walk the instructions with reference counts on buffers (one per output of a call);
    a slot holding a tuple or a tuple field refers to the buffers inside it."""
    size_of: list[int] = []
    fields: dict[int, list[list[int]]] = {}  # slot -> buffer ids per field

    def refs(slot: int) -> set[int]:
        return {buf for f in fields.get(slot, ()) for buf in f}

    count: dict[int, int] = {}
    live = peak = bound = total = 0
    peak_at = ""
    retained: set[int] = set()
    outputs = set(plan.output_slots)
    for ins in plan.instrs:
        if ins.kind == CALL:
            bufs = []
            for n in sizes.get(ins.out, []):
                bufs.append(len(size_of))
                size_of.append(n)
                total += n
            fields[ins.out] = [[b] for b in bufs]
        elif ins.kind == GETITEM:
            source = fields.get(ins.args[0], [])
            fields[ins.out] = [source[ins.fn]] if ins.fn < len(source) else []  # type: ignore
        else:
            fields[ins.out] = [sorted(refs(a)) for a in ins.args]
        for buf in refs(ins.out):
            count[buf] = count.get(buf, 0) + 1
            if count[buf] == 1:
                live += size_of[buf]
        if ins.out in outputs:
            retained |= refs(ins.out)
        if live > peak:
            peak = live
            peak_at = ins.call.span.name if ins.call is not None and ins.call.span else ""
        if ins.kind == CALL:
            working = refs(ins.out).union(*(refs(a) for a in ins.args if a >= 0), retained)
            bound = max(bound, sum(size_of[b] for b in working))
        for slot in ins.free:
            for buf in refs(slot):
                count[buf] -= 1
                if count[buf] == 0:
                    live -= size_of[buf]
    return MemoryReport(peak, bound, total, held, len(plan.instrs), peak_at)
