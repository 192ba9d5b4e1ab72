"""What byoc asks of a region's compiled callable: its errors named, its results checked.

    run = checked_region(name, func, backend.compile(func))
    run(*arrays)   # a tuple of the region's outputs, or RegionError naming backend and region

A backend's ``compile(func)`` returns a callable from arrays (one per parameter) to a tuple of
arrays (one per result, in the body's order), each of the declared dtype and of the declared
shape (symbolic dims as the inputs bound them). Anything it raises, and anything it returns
that breaks this contract, becomes a ``RegionError``:
``backend 'NAME', region 'R' (nodes a..b): <what it said>`` (docs/writing-a-backend.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import RegionError
from ..ir import Call, Function, TensorType, TupleType, post_order


def node_range(func: Function) -> str:
    """``nodes 'a'..'b'`` (or ``node 'a'``): the first and last ONNX nodes a region runs."""
    names = [e.span.name for e in post_order(func.body) if isinstance(e, Call) and e.span]
    if not names:
        return "no ONNX node"
    return f"node {names[0]!r}" if len(names) == 1 else f"nodes {names[0]!r}..{names[-1]!r}"


def compile_error(backend: str, name: str, func: Function, exc: BaseException) -> RegionError:
    """What ``compile`` raised, as the backend's error about this region."""
    return RegionError(backend, name, node_range(func), said(exc))


def said(exc: BaseException) -> str:
    """What an exception said, in one line: byoc's own errors as they are, others with
    their type (``ValueError: ...``)."""
    from ..errors import ByocError

    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, ByocError) and first:
        return first
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def checked_region(name: str, func: Function, run: Callable,
                   describe: Callable[[Any], tuple[tuple[int, ...], str]] | None = None
                   ) -> Callable[..., tuple]:
    """``run`` with its errors named and its results checked against ``func``'s declared
    outputs; ``describe(value) -> (shape, dtype)`` reads a device's value (an OrtValue)."""
    backend = str(func.attrs.get("Compiler") or "?")
    nodes = node_range(func)
    ret = func.ret_type
    declared = list(ret.fields) if isinstance(ret, TupleType) else [ret]
    n = len(declared)
    specs = [(np.dtype(t.dtype) if isinstance(t, TensorType) and t.dtype not in (None, "object")
              and not _exotic(t.dtype) else None,
              t.dtype if isinstance(t, TensorType) else None,
              tuple(t.shape) if isinstance(t, TensorType) and t.shape is not None else None)
             for t in declared]
    symbolic = any(isinstance(d, str) for _, _, shape in specs if shape for d in shape)
    params = [tuple(p.type.shape) if isinstance(p.type, TensorType) and p.type.shape is not None
              else None for p in func.params]

    def fail(message: str, contract: bool = True) -> RegionError:
        return RegionError(backend, name, nodes, message, contract)

    # outputs of a static shape and a numpy dtype: the common case, checked in two comparisons
    exact = [(dtype, shape) for dtype, _, shape in specs]
    exact_ok = all(d is not None and s is not None and all(type(x) is int for x in s)
                   for d, s in exact)

    def call(*arrays):
        try:
            out = run(*arrays)
        except RegionError:
            raise
        except Exception as exc:
            raise fail(said(exc), contract=False) from exc
        if exact_ok and type(out) is tuple and len(out) == n:
            for v, (d, s) in zip(out, exact):
                if type(v) is not np.ndarray or (v.dtype is not d and v.dtype != d) \
                        or v.shape != s:
                    break
            else:
                return out
        if isinstance(out, list):
            out = tuple(out)
        if not isinstance(out, tuple):
            raise fail(f"its callable returned a {type(out).__name__}, not a tuple of {n} "
                       f"array(s), one per output")
        if len(out) != n:
            raise fail(f"its callable returned {len(out)} value(s); the region has {n} "
                       "output(s)")
        bound = _bind(params, arrays) if symbolic else {}
        for k, (value, (dtype, dtype_name, shape)) in enumerate(zip(out, specs)):
            if isinstance(value, np.ndarray):
                got_shape, got_dtype = value.shape, value.dtype
                same_dtype = dtype is None or got_dtype == dtype
            elif describe is not None and value is not None:
                got_shape, got_name = describe(value)
                got_dtype, same_dtype = got_name, dtype_name is None or got_name == dtype_name
            else:
                continue  # sequences, optionals, a device byoc cannot read: as they are
            if not same_dtype:
                raise fail(f"output {k} is {got_dtype}, the region declares {dtype_name}")
            if shape is not None and not _fits(shape, tuple(got_shape), bound):
                raise fail(f"output {k} has shape {tuple(got_shape)}, the region declares "
                           f"{_fmt(shape, bound)}")
        return out

    call.__wrapped__ = run  # type: ignore[attr-defined]
    call.fp_quiet = getattr(run, "fp_quiet", False)  # type: ignore[attr-defined]
    return call


def _exotic(dtype: str) -> bool:
    try:
        np.dtype(dtype)
        return False
    except TypeError:
        return True


def _bind(params: list, arrays: tuple) -> dict[str, int]:
    bound: dict[str, int] = {}
    for shape, a in zip(params, arrays):
        got = getattr(a, "shape", None)
        if shape is None or got is None or callable(got) or len(got) != len(shape):
            continue
        for d, g in zip(shape, got):
            if isinstance(d, str):
                bound.setdefault(d, int(g))
    return bound


def _fits(shape: tuple, got: tuple, bound: dict[str, int]) -> bool:
    if len(shape) != len(got):
        return False
    for d, g in zip(shape, got):
        if isinstance(d, int) and d != g:
            return False
        if isinstance(d, str):
            if bound.setdefault(d, g) != g:
                return False
    return True


def _fmt(shape: tuple, bound: dict[str, int]) -> str:
    dims = ["?" if d is None else f"{d}={bound[d]}" if isinstance(d, str) and d in bound
            else str(d) for d in shape]
    return "(" + ", ".join(dims) + ")"
