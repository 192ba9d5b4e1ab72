"""What ``exe.run(inputs, capture=...)`` returns, and what makes it answer every ONNX name.

    run = exe.run(inputs, capture="all")
    run["conv1_out"], "relu3" in run, len(run), run.keys()   # a read-only mapping
    run.outputs, run.times, run.events, run.bodies           # the rest, as attributes

The executor's probe records what each node computes (Identity nodes included: the executor
runs them); this module adds what no node computes at run time: Constant nodes' outputs and
initializers, as read-only views, never copied. A name the model does not have is refused before
anything runs, and so is a name that lives only inside a region: its backend computes it where
byoc cannot see.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from ..analysis import walk_orders
from ..errors import InputError
from ..ir import Call, Constant, Function, GlobalVar, IRModule, Var, post_order


class DebugRun(Mapping):
    """Every captured tensor by its ONNX value name (read-only), with the run's outputs, the
    time of each node or region by span, the timed events, and per If/Loop/Scan body function
    the tensors of its chosen run (``iteration``), parameters included."""

    __slots__ = ("outputs", "tensors", "times", "events", "bodies")

    def __init__(self, outputs: dict[str, Any], tensors: dict[str, np.ndarray],
                 times: dict[str, float], events: list | None = None,
                 bodies: dict[Function, dict[str, np.ndarray]] | None = None):
        self.outputs = outputs
        self.tensors = MappingProxyType(tensors)  # kept for callers of the older attribute
        self.times = times
        self.events = events if events is not None else []
        self.bodies = bodies if bodies is not None else {}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def __repr__(self) -> str:
        return (f"DebugRun({len(self)} tensors, outputs={list(self.outputs)}, "
                f"{len(self.times)} timed spans)")


def value_names(mod: IRModule) -> tuple[set[str], dict[str, str]]:
    """The ONNX value names a host run of ``mod`` can capture (main's and every body's: inputs,
    constants, node outputs, region boundaries), and those found only inside a region, each
    with its region's name."""
    seen: set[str] = set()
    inside: dict[str, str] = {}
    for _, func, order in walk_orders(mod.main):
        for e in order:
            seen.update(_names(e))
            if isinstance(e, Call) and isinstance(e.op, GlobalVar) and e.op.name in mod.functions:
                for inner in post_order(mod[e.op.name].body):
                    for name in _names(inner):
                        inside.setdefault(name, e.op.name)
    return seen, {n: r for n, r in inside.items() if n not in seen}


def _names(e) -> Iterable[str]:
    if isinstance(e, (Var, Constant)):
        return (e.name,) if e.name else ()
    if isinstance(e, Call) and e.span is not None:
        return [o for o in e.span.outputs if o]
    return ()


def check_wanted(mod: IRModule, wanted: set[str]) -> None:
    """Refuse, before running, a name ``capture=[...]`` cannot answer."""
    seen, inside = value_names(mod)
    for name in sorted(wanted - seen):
        if name in inside:
            raise InputError(f"capture: value {name!r} is inside region {inside[name]!r}, which "
                             "its backend computes out of byoc's sight: capture it on a host "
                             "build (byoc.build of the unpartitioned model), or extract the "
                             "region")
        raise InputError(f"capture: the model has no value named {name!r}")


def complete(func: Function, probe) -> None:
    """After a probed run of ``func`` (the executor's ``Probe``): what no kernel computed, the
    named constants, as read-only views, not copies."""
    if not probe.recording:
        return
    record = probe.current if probe.current is not None else probe.tensors
    for e in post_order(func.body):
        if isinstance(e, Constant) and e.name and e.name not in record:
            probe.keep(e.name, _read_only(e.value), copy=False)


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view
