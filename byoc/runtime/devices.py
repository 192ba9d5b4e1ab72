"""Devices: where a backend keeps its tensors, and how a tensor gets there and back.

The host ("cpu") holds numpy arrays. A backend whose engine keeps its own tensor type (an
accelerator's buffers; onnxruntime's OrtValue) registers a device with the two copies; the
device planner then puts a ``device_copy`` on every edge that crosses devices, and regions on
one device pass their tensors to each other without a trip through the host.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

HOST = "cpu"


@dataclass(frozen=True)
class Device:
    """A place tensors live: ``to_device(array)`` and ``to_host(value) -> array``."""

    name: str
    to_device: Callable[[np.ndarray], Any]
    to_host: Callable[[Any], np.ndarray]
    nbytes: Callable[[Any], int] = lambda v: int(getattr(v, "nbytes", 0))
    # (shape, dtype name) of a value on the device, for the check of a region's results
    describe: Callable[[Any], tuple[tuple[int, ...], str]] | None = None


_DEVICES: dict[str, Device] = {HOST: Device(HOST, lambda a: a, lambda a: a)}
_lock = threading.Lock()


def register_device(device: Device) -> Device:
    """Make a device known (registering the same name again replaces it)."""
    with _lock:
        _DEVICES[device.name] = device
    return device


def get_device(name: str) -> Device:
    try:
        return _DEVICES[name]
    except KeyError:
        raise KeyError(f"unknown device {name!r}; known: {sorted(_DEVICES)}") from None


@dataclass
class CopyStats:
    """Copies and bytes per boundary (src -> dst), counted by the executor's device_copy."""

    copies: dict[tuple[str, str], int]
    bytes: dict[tuple[str, str], int]

    def add(self, src: str, dst: str, n: int) -> None:
        self.copies[(src, dst)] = self.copies.get((src, dst), 0) + 1
        self.bytes[(src, dst)] = self.bytes.get((src, dst), 0) + n


def copy_kernel(src: str, dst: str, stats: CopyStats | None) -> Callable[[Any], tuple]:
    """The host kernel of ``device_copy``: through the host when neither end is it."""
    source, target = get_device(src), get_device(dst)

    def copy(value):
        host = value if src == HOST else source.to_host(value)
        # order="C", not ascontiguousarray: that one makes a 0-d tensor 1-d.
        out = host if dst == HOST else target.to_device(np.asarray(host, order="C"))
        if stats is not None:
            stats.add(src, dst, int(np.asarray(host).nbytes) if src != HOST or dst != HOST else 0)
        return (out,)

    return copy
