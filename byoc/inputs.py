"""Inputs for a run: loaded from .npy files, or made up (seeded) from the model's input types."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .errors import InputError
from .ir import DEFAULTS, Call, Function, TensorType, Var, post_order
from .runtime.limits import too_big


def concrete_shape(name: str, t: TensorType, dims: Mapping[str, int], default: int = 1) -> tuple[int, ...]:
    """The input's shape with symbolic dims bound from ``dims`` (``default`` where unbound)."""
    if t.shape is None:
        raise InputError(f"input {name!r} has unknown rank; pass it with --input {name}=FILE.npy")
    return tuple(d if isinstance(d, int) else int(dims.get(d, default)) if isinstance(d, str)
                 else default for d in t.shape)


def random_inputs(func: Function, dims: Mapping[str, int] | None = None, seed: int = 0,
                  given: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for every parameter not in ``given``: normal floats, small ints, bools;
    none for a parameter with a default (``DEFAULTS``), which the run takes instead."""
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    given = dict(given or {})
    # Dims fixed by given inputs bind the same symbols in the others.
    for p in func.params:
        if p.name in given and isinstance(p.type, TensorType) and p.type.shape is not None:
            for d, n in zip(p.type.shape, np.shape(given[p.name])):
                if isinstance(d, str):
                    dims.setdefault(d, n)
    out: dict[str, np.ndarray] = {}
    index_bounds = _index_bounds(func)
    defaults = func.attrs.get(DEFAULTS) or {}
    for p in func.params:
        if p.name in given:
            out[p.name] = given[p.name]
            continue
        if p.name in defaults:  # the model's own value, not a made-up one
            continue
        t = p.type
        if not isinstance(t, TensorType) or t.dtype is None:
            raise InputError(f"input {p.name!r} is not a tensor of known dtype; pass it with "
                             f"--input {p.name}=FILE.npy")
        shape = concrete_shape(p.name, t, dims)
        dtype = np.dtype(t.dtype)
        # Checked before allocating (a --dim can ask for terabytes); made-up values pass
        # through a float64 or int64 array, so that is the size that must fit.
        why = too_big(shape, max(dtype.itemsize, 8))
        if why:
            raise InputError(f"input {p.name!r} cannot be made up: {why}; pass a smaller "
                             f"--dim or the input itself with --input {p.name}=FILE.npy")
        if dtype.kind == "f":
            out[p.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            out[p.name] = rng.integers(0, index_bounds.get(p.name, 10), shape).astype(dtype)
        elif dtype.kind == "b":
            out[p.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            raise InputError(f"input {p.name!r} of dtype {dtype} cannot be made up; pass it with "
                             f"--input {p.name}=FILE.npy")
    return out


def _index_bounds(func: Function) -> dict[str, int]:
    """For each integer input used directly as Gather indices (token ids, token types): the
    size of the gathered axis, at most 10, so that made-up ids stay inside the table."""
    bounds: dict[str, int] = {}
    for e in post_order(func.body):
        if not (isinstance(e, Call) and e.op == "Gather" and len(e.args) == 2
                and isinstance(e.args[1], Var)):
            continue
        data = e.args[0].type if e.args[0] is not None else None
        if not isinstance(data, TensorType) or data.shape is None:
            continue
        axis = int(e.attrs.get("axis", 0))
        size = data.shape[axis] if -len(data.shape) <= axis < len(data.shape) else None
        if isinstance(size, int) and size > 0:
            name = e.args[1].name
            bounds[name] = min(bounds.get(name, 10), size)
    return bounds


def load_npy(spec: str) -> tuple[str, np.ndarray]:
    """NAME=FILE.npy -> (NAME, array); refuses pickles."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise InputError(f"--input wants NAME=FILE.npy, got {spec!r}")
    try:
        return name, np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"--input {name}: no such file {path!r}") from None
    except (ValueError, OSError) as exc:
        raise InputError(f"--input {name}: {path!r} is not a readable .npy file ({exc})") from None
