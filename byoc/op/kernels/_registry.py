"""Kernel registry and small helpers shared by the host kernel modules."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Kernel = Callable[..., tuple[np.ndarray, ...]]

#: op type (default ONNX domain) -> kernel; filled by the ``@kernel`` decorator on import.
REGISTRY: dict[str, Kernel] = {}


def kernel(*op_types: str) -> Callable[[Kernel], Kernel]:
    """Register the decorated function as the host kernel of ``op_types``."""

    def deco(fn: Kernel) -> Kernel:
        # numpy ufuncs turn 0-d results into numpy scalars; the interface wants 0-d ndarrays.
        @functools.wraps(fn)
        def wrapped(attrs: dict, *inputs: Any, **kw: Any) -> tuple[np.ndarray, ...]:
            return tuple(np.asarray(y) for y in fn(attrs, *inputs, **kw))

        for op in op_types:
            if op in REGISTRY:
                raise ValueError(f"duplicate kernel for {op}")
            REGISTRY[op] = wrapped
        return wrapped

    return deco


def arg(inputs: Sequence[Any], i: int) -> Any:
    """Input ``i`` or None when it is missing or omitted (trailing optionals may be absent)."""
    return inputs[i] if i < len(inputs) else None


def norm_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into ``[0, rank)``."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(axes: Any, rank: int) -> tuple[int, ...]:
    """Normalize an axes list / int64 tensor into a tuple of non-negative ints."""
    return tuple(norm_axis(int(a), rank) for a in np.asarray(axes).reshape(-1).tolist())


def tensor_attr(value: Any) -> np.ndarray:
    """Tensor attributes arrive as ndarray; accept a raw TensorProto too, for robustness."""
    if isinstance(value, np.ndarray):
        return value
    from onnx import numpy_helper

    return numpy_helper.to_array(value)


def np_dtype(onnx_type: int) -> np.dtype:
    """ONNX TensorProto element type -> numpy dtype."""
    from onnx.helper import tensor_dtype_to_np_dtype

    return np.dtype(tensor_dtype_to_np_dtype(int(onnx_type)))


def as_type(x: Any, like: np.ndarray | np.dtype) -> np.ndarray:
    """``x`` as an ndarray of the dtype of ``like`` (0-d kept as 0-d ndarray, no copy if same)."""
    dtype = like.dtype if isinstance(like, np.ndarray) else np.dtype(like)
    return np.asarray(x).astype(dtype, copy=False)
