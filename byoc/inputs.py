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
        raise InputError(f"input {name!r} has unknown rank; pass it with --input {name}=FILE.npy "
                         f"or give its shape with --shape {name}=D0,D1,...")
    return tuple(d if isinstance(d, int) else int(dims.get(d, default)) if isinstance(d, str)
                 else default for d in t.shape)


def random_inputs(func: Function, dims: Mapping[str, int] | None = None, seed: int = 0,
                  given: Mapping[str, np.ndarray] | None = None,
                  shapes: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for every parameter not in ``given``: normal floats, small ints, bools;
    none for a parameter with a default (``DEFAULTS``), which the run takes instead. ``dims``
    sizes named dims (default 1), ``shapes`` whole inputs (``parse_shapes``)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"the seed must be a whole number from 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    given = dict(given or {})
    shapes = dict(shapes or {})
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
        shape = shapes[p.name] if p.name in shapes else concrete_shape(p.name, t, dims)
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


def dim_names(func: Function) -> list[str]:
    """The named (symbolic) dims of a function's inputs, in order of first use."""
    names: dict[str, None] = {}
    for p in func.params:
        if isinstance(p.type, TensorType) and p.type.shape is not None:
            names.update((d, None) for d in p.type.shape if isinstance(d, str))
    return list(names)


def _size(text: str, what: str) -> int:
    """A dim size from the command line: ASCII digits only (``int`` takes ``'٣'`` and
    ``isdigit`` takes ``'²'``), and few enough of them to be a size."""
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise InputError(f"{what} wants a size (0, 1, 2, ...), got {text!r}")
    return int(text)


def parse_dims(specs: list[str], func: Function) -> dict[str, int]:
    """``--dim NAME=N`` options: only names the model's inputs have (a misspelt name must not
    mean a dim of 1, silently)."""
    known = dim_names(func)
    dims: dict[str, int] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise InputError(f"--dim wants NAME=N, got {spec!r}")
        if name not in known:
            has = (f"its dims are {known}" if known else
                   "it has no named dims (set a whole shape with --shape INPUT=1,3,224,224)")
            raise InputError(f"--dim {name!r}: the model's inputs have no dim of that name; {has}")
        if name in dims:
            raise InputError(f"--dim {name!r} is given twice")
        dims[name] = _size(value, f"--dim {name}")
    return dims


def parse_shapes(specs: list[str], func: Function, dims: dict[str, int]
                 ) -> dict[str, tuple[int, ...]]:
    """``--shape INPUT=1,3,48,320`` options: the whole shape of a made-up input, for dims the
    model leaves unnamed (``?``, -1) or an unknown rank. Each must fit the declared shape; the
    named dims it sets bind the same names in the other inputs (added to ``dims``)."""
    params = {p.name: p for p in func.params}
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value:
            raise InputError(f"--shape wants INPUT=D0,D1,..., got {spec!r}")
        if name not in params:
            raise InputError(f"--shape: unknown input {name!r}; the model's inputs are "
                             f"{list(params)}")
        if name in shapes:
            raise InputError(f"--shape {name!r} is given twice")
        shape = tuple(_size(v.strip(), f"--shape {name}") for v in value.split(","))
        t = params[name].type
        declared = t.shape if isinstance(t, TensorType) else None
        if declared is not None:
            if len(declared) != len(shape):
                raise InputError(f"--shape {name}: the input has rank {len(declared)} "
                                 f"({_fmt(declared)}), got {len(shape)} dims")
            for axis, (want, got) in enumerate(zip(declared, shape)):
                if isinstance(want, int) and want != got:
                    raise InputError(f"--shape {name}: dim {axis} is {want} in the model, "
                                     f"got {got}")
                if isinstance(want, str):
                    if dims.setdefault(want, got) != got:
                        raise InputError(f"--shape {name}: dim {axis} ({want!r}) is {got}, but "
                                         f"{want!r} is {dims[want]} (--dim or another --shape)")
        shapes[name] = shape
    return shapes


def _fmt(shape) -> str:
    from .ir.types import dims_text
    from .report import show

    return dims_text(shape, show)


def read_input_files(specs: list[str], names: list[str]) -> dict[str, np.ndarray]:
    """The arrays of ``--input`` options, by input name:

    - ``NAME=FILE.npy``, or ``NAME=FILE.npz`` holding exactly one array;
    - ``FILE.npz``: every array in it, each named as an input of the model;
    - ``FILE.npy``: the model's only input.

    Files are told apart by their bytes; names are checked before any array is read, and each
    array's size before it is allocated (``files/arrays.py``). Big-endian arrays come back in
    native byte order (C and onnxruntime read native bytes).
    """
    from .files.arrays import load_arrays
    from .report import show  # the user's file names are shown as a model's names are

    given: dict[str, np.ndarray] = {}

    def unknown(name: str, where: str) -> InputError:
        return InputError(f"unknown input {name!r} ({where}); the model's inputs are {names}")

    def check(members: list[str], where: str) -> None:
        if not members:
            raise InputError(f"--input {where}: the .npz file holds no arrays")
        for member in members:
            if member not in names:
                raise unknown(member, where)
            if member in given:
                raise InputError(f"input {member!r} is given twice (again in {where})")

    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep and not (name and path):
            raise InputError(f"--input wants NAME=FILE.npy, NAME=FILE.npz or FILE.npz, got "
                             f"{spec!r}")
        if sep:
            check([name], f"--input {show(spec)}")

            def exactly_one(members: list[str]) -> None:  # before any array is read
                if len(members) != 1:
                    raise InputError(f"--input {show(name)}: {path!r} holds {len(members)} "
                                     f"arrays {sorted(members)}; NAME=FILE.npz wants exactly "
                                     f"one (--input {show(path)} feeds them by name)")

            arrays = load_arrays(path, f"--input {show(name)}", exactly_one)
            given[name] = native(next(iter(arrays.values())))
            continue
        arrays = load_arrays(spec, f"--input {show(spec)}", lambda m: check(m, show(spec)))
        if None in arrays:  # a bare .npy: which input is it?
            if len(names) != 1:
                raise InputError(f"--input {show(spec)}: a .npy file holds one array; say which "
                                 f"input it is with --input NAME={show(spec)} (inputs: {names})")
            check(names, show(spec))
            arrays = {names[0]: arrays[None]}
        given.update((n, native(a)) for n, a in arrays.items())
    return given


def native(array: np.ndarray) -> np.ndarray:
    """``array`` in native byte order (a big-endian .npy is still "float32")."""
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))
