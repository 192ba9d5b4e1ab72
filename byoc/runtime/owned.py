"""Outputs the caller owns: writing into one never changes an input, a weight or another output.

Kernels return views where numpy does (Identity, Reshape, Squeeze, Flatten, Dropout, a Cast to
the same type, an Expand to the same shape, optional and sequence ops...), and a graph output
may be a graph input or an initializer itself. onnxruntime hands every output in a buffer of its
own; so does byoc, by copying, at the end of a run, each output whose memory belongs to an
input, to an earlier output, or to nothing writable (weights are read-only arrays). What a
fresh output costs here is a look at its base; only the aliased ones are copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _owner(a: np.ndarray) -> object:
    """The object holding the memory ``a`` views (numpy keeps ``base`` pointing at it)."""
    return a if a.base is None else a.base


def owned_outputs(outputs: Sequence[Any], inputs: Sequence[Any]) -> list[Any]:
    """``outputs`` with every array that shares memory with an input, an earlier output or a
    read-only buffer replaced by a copy; sequences (lists) are handled element by element."""
    if len(outputs) == 1:  # the common case, in a few comparisons: one fresh writable array
        out = outputs[0]
        if type(out) is np.ndarray and out.base is None and out.flags.writeable:
            for a in inputs:  # (a sequence input: the full check below)
                if type(a) is not np.ndarray or a is out or a.base is out:
                    break
            else:
                return [out]
    seen = {id(_owner(a)) for a in _arrays(inputs)}
    result = []
    for out in outputs:
        if isinstance(out, np.ndarray):
            out = _own(out, seen)
        elif isinstance(out, list):  # an ONNX sequence
            out = [_own(a, seen) if isinstance(a, np.ndarray) else a for a in out]
        result.append(out)
    return result


def _own(a: np.ndarray, seen: set[int]) -> np.ndarray:
    owner = id(_owner(a))
    if owner in seen or not a.flags.writeable:
        a = a.copy()
        owner = id(a)
    seen.add(owner)
    return a


def _arrays(values: Sequence[Any]):
    for v in values:
        if isinstance(v, np.ndarray):
            yield v
        elif isinstance(v, list):
            yield from (a for a in v if isinstance(a, np.ndarray))
