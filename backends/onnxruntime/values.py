"""numpy arrays to OrtValues and back, for every ONNX dtype byoc holds.

onnxruntime's Python API makes OrtValues only from numpy's own dtypes: a bfloat16 or float8
array (ml_dtypes) is handed over as its raw bytes with the ONNX type named, 4- and 2-bit types
(one element per byte in ml_dtypes) packed as ONNX packs them, low bits first; coming back,
``numpy()`` knows none of them, so their bytes are read from the tensor's buffer. Strings
cannot become OrtValues at all: they stay numpy object arrays "on" the device, and a region
fed one runs through ``session.run`` (see ``run.py``).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np
from onnx import helper

_PACKED_BITS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}


def to_ort(array: np.ndarray) -> Any:
    """An OrtValue holding ``array`` (C-contiguous), or the array itself for strings."""
    import onnxruntime as ort

    if array.dtype.kind in "OUS":
        return array if array.dtype.kind == "O" else array.astype(object)
    if _numpy_own(array.dtype):
        return ort.OrtValue.ortvalue_from_numpy(array)
    code = helper.np_dtype_to_tensor_dtype(array.dtype)
    bits = _PACKED_BITS.get(array.dtype.name)
    if bits is None:
        raw = array.view(f"u{array.dtype.itemsize}")  # same-size items: the shape holds
    else:  # onnxruntime takes the shape from the array and reads the packed bytes at its start
        packed = _pack(array, bits)
        raw = np.zeros(array.shape, np.uint8)
        raw.reshape(-1)[:packed.size] = packed
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, code)  # keeps raw alive


def from_ort(value: Any) -> np.ndarray:
    """The numpy array of an OrtValue (a copy where numpy has no dtype for it)."""
    if isinstance(value, np.ndarray):
        return value
    if not value.is_tensor():
        return value.numpy()
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(value.element_type()))
    if _numpy_own(dtype):
        return value.numpy()
    # numpy() refuses bfloat16 and hands float8 out as uint8: read the bytes as ml_dtypes'
    shape = tuple(value.shape())
    size = int(np.prod(shape, dtype=np.int64))
    nbytes = value.tensor_size_in_bytes()
    raw = np.frombuffer((ctypes.c_char * nbytes).from_address(value.data_ptr()), np.uint8) \
        if nbytes else np.zeros(0, np.uint8)
    bits = _PACKED_BITS.get(dtype.name)
    data = raw.copy() if bits is None else _unpack(raw, bits, size)
    return data.view(dtype).reshape(shape)


def describe(value: Any) -> tuple[tuple[int, ...], str]:
    """A device value's shape and numpy dtype name, without copying it to the host."""
    if isinstance(value, np.ndarray):
        return tuple(value.shape), value.dtype.name
    if not value.is_tensor():  # a sequence: its ONNX type, as onnxruntime spells it
        return (), value.data_type()
    return tuple(value.shape()), _dtype_name(value.element_type())


@functools.lru_cache(maxsize=None)
def _dtype_name(element_type: int) -> str:
    """numpy's name of an ONNX element type (asked for each region output: onnx's mapping and
    numpy's dtype naming cost 15 us a call of a two-output region)."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(element_type)).name


def _numpy_own(dtype: np.dtype) -> bool:
    """A dtype of numpy's own (ml_dtypes' are user-defined: isbuiltin 2, whatever their kind)."""
    return dtype.isbuiltin == 1


def _pack(array: np.ndarray, bits: int) -> np.ndarray:
    per_byte = 8 // bits
    u = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & ((1 << bits) - 1)
    u = np.concatenate([u, np.zeros(-len(u) % per_byte, np.uint8)]).reshape(-1, per_byte)
    packed = np.zeros(len(u), np.uint8)
    for k in range(per_byte):
        packed |= u[:, k] << (k * bits)
    return packed


def _unpack(raw: np.ndarray, bits: int, size: int) -> np.ndarray:
    per_byte = 8 // bits
    parts = [(raw >> (k * bits)) & ((1 << bits) - 1) for k in range(per_byte)]
    return np.stack(parts, axis=-1).reshape(-1)[:size].astype(np.uint8)
