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
        # Anything else (a sequence passed through Identity, say) is returned untouched.
        # Floating-point exceptions follow IEEE silently (inf, nan), as in onnxruntime: the
        # executor runs every kernel under np.errstate(all="ignore"), once per run, since
        # entering errstate per call would cost more than a small kernel.
        @functools.wraps(fn)
        def wrapped(attrs: dict, *inputs: Any, **kw: Any) -> tuple[np.ndarray, ...]:
            out = fn(attrs, *inputs, **kw)
            if len(out) == 1 and type(out[0]) is np.ndarray:  # the common case, kept cheap
                return out
            return tuple(np.asarray(y) if isinstance(y, np.generic) else y for y in out)

        for op in op_types:
            if op in REGISTRY:
                raise ValueError(f"duplicate kernel for {op}")
            REGISTRY[op] = wrapped
        return wrapped

    return deco


def hold_blas(attrs: dict, multiply_adds: int) -> None:
    """Before a BLAS product: numpy's BLAS held to the executable's thread count (one thread
    for a small product; ``byoc.runtime.threads``). Nothing outside an executable."""
    threads = attrs.get("_threads")
    if threads:
        from ...runtime.threads import blas_threads

        blas_threads(threads, multiply_adds)


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


def via_float32(fn: Kernel) -> Kernel:
    """Run a float16 data input (input 0) in float32 and cast float32 results back.

    numpy accumulates float16 sums and products in float16, which drifts by several ulps on
    convolutions and reductions; onnxruntime accumulates in float32.
    """

    @functools.wraps(fn)
    def run(attrs: dict, *inputs: Any, **kw: Any) -> tuple[np.ndarray, ...]:
        if not inputs or getattr(inputs[0], "dtype", None) != np.float16:
            return fn(attrs, *inputs, **kw)
        up = [a.astype(np.float32) if getattr(a, "dtype", None) == np.float16 else a
              for a in inputs]  # fmt: skip
        out = fn(attrs, *up, **kw)
        return tuple(
            y.astype(np.float16) if getattr(y, "dtype", None) == np.float32 else y for y in out
        )

    return run
