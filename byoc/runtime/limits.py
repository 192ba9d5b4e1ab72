"""How big a tensor byoc will allocate, and the checks that hold models to it.

A model decides the sizes of the tensors it makes (ConstantOfShape, Expand, Tile, Range,
Resize, Pad...), so a hostile one could ask for terabytes. Requests are checked before anything
is allocated: statically at import where shapes are known, and at run time for ops whose output
size comes from their input values. The limit is the machine's memory unless
``BYOC_MAX_TENSOR_BYTES`` says less (or more).
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Sequence

import numpy as np


def max_tensor_bytes() -> int:
    """The largest single tensor byoc will make."""
    env = os.environ.get("BYOC_MAX_TENSOR_BYTES")
    if env and env.isdigit():
        return int(env)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 36


def room() -> int:
    """Bytes byoc may still allocate now: ``max_tensor_bytes``, the address space left under
    the process's RLIMIT_AS, and the memory the kernel reports available (Linux)."""
    left = max_tensor_bytes()
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm", encoding="ascii") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            left = min(left, soft - used)
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    left = min(left, int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(0, left)


class Growth:
    """Bytes a kernel keeps piling up (a Loop's scan outputs, one slice per iteration), held to
    ``room()`` as they grow: looked at each time they pass a quarter more than at the last look,
    so a runaway loop is stopped while stacking what it has (as much again) still fits."""

    def __init__(self, what: str):
        self.what, self.bytes, self._next = what, 0, 1 << 20

    def add(self, nbytes: int, steps: int) -> None:
        self.bytes += nbytes
        if self.bytes < self._next:
            return
        self._next = self.bytes + self.bytes // 4
        # until the next look they may grow by a quarter, and stacking needs as much again
        left = room()
        if self.bytes * 5 // 2 > left:
            raise MemoryError(f"refused to allocate: {self.what} hold {self.bytes:,} bytes after "
                              f"{steps:,} iterations and go on growing; stacking them would "
                              f"take more than the {left:,} bytes byoc may still allocate "
                              f"(BYOC_MAX_TENSOR_BYTES, the address-space limit, free memory)")


def too_big(shape: Sequence[int], itemsize: int) -> str | None:
    """Why a tensor of this shape may not be allocated, or None if it may."""
    elements = math.prod(int(d) for d in shape)
    limit = max_tensor_bytes()
    if any(int(d) < 0 for d in shape):
        return f"shape {list(shape)} has a negative dim"
    if elements * itemsize > limit:
        return (f"shape {list(shape)} would take {elements * itemsize:,} bytes, more than the "
                f"{limit:,} byoc may allocate (BYOC_MAX_TENSOR_BYTES)")
    return None


def _values(x) -> list[int]:
    return [int(v) for v in np.asarray(x).reshape(-1).tolist()]


def requested_shape(op: str, attrs: dict, inputs: Sequence) -> list[int] | None:
    """The output shape an allocating op is about to make, from its inputs (None: unknown)."""
    if op == "ConstantOfShape":
        return _values(inputs[0])
    if op == "Expand":
        x, shape = np.shape(inputs[0]), _values(inputs[1])
        rank = max(len(x), len(shape))
        x = (1,) * (rank - len(x)) + tuple(x)
        shape = [1] * (rank - len(shape)) + shape
        return [max(a, b) for a, b in zip(x, shape)]
    if op == "Tile":
        return [a * b for a, b in zip(np.shape(inputs[0]), _values(inputs[1]))]
    if op == "Range":
        start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in inputs[:3])
        if delta == 0 or not all(map(math.isfinite, (start, limit, delta))):
            return None
        return [max(int(math.ceil((limit - start) / delta)), 0)]
    if op == "Pad":
        pads = _values(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else []
        shape = list(np.shape(inputs[0]))
        if len(pads) == 2 * len(shape):
            return [d + pads[i] + pads[i + len(shape)] for i, d in enumerate(shape)]
        return None
    if op in ("Resize", "Upsample"):
        shape = np.shape(inputs[0])
        sizes = inputs[3] if len(inputs) > 3 else None
        scales = inputs[2] if len(inputs) > 2 else (inputs[1] if op == "Upsample" else None)
        if sizes is not None and np.size(sizes) == len(shape):
            return _values(sizes)
        if scales is not None and np.size(scales) == len(shape):
            return [int(math.floor(d * float(s))) for d, s in zip(shape, np.asarray(scales).reshape(-1))]
        return None
    if op == "OneHot":
        depth = int(np.asarray(inputs[1]).reshape(-1)[0])
        return [*np.shape(inputs[0]), depth]
    return None


GUARDED = {"ConstantOfShape", "Expand", "Tile", "Range", "Pad", "Resize", "Upsample", "OneHot"}
