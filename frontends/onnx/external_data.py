"""External data: checked up front, and read only from files inside the model's own folder.

A model names its external files itself, so a hostile one could point at ``../../etc/passwd``,
an absolute path, or a symlink leading out. Each location is resolved and must stay inside.
Initializers are memory-mapped read-only rather than read, so a 2 GB+ model costs no copy, and
the ModelProto never holds the data (protobuf cannot serialize past 2 GB, and shape inference
serializes it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper

from byoc.errors import ModelError
from byoc.files.reading import kind, open_regular

from byoc.op import onnx_bridge


def _tensors(graph: onnx.GraphProto) -> Iterator[tuple[TensorProto, str, bool]]:
    """Every tensor of a graph and its subgraphs: (tensor, holding node's name, is initializer)."""
    stack = [graph]
    while stack:
        g = stack.pop()
        for t in g.initializer:
            yield t, "", True
        for node in g.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t, node.name, False
                for t in attr.tensors:
                    yield t, node.name, False
                if attr.HasField("g"):
                    stack.append(attr.g)
                stack.extend(attr.graphs)


def safe_location(base_dir: str, location: str, tensor: str) -> str:
    """The real path of an external data file, refused when it leaves ``base_dir``."""
    if not location:
        raise ModelError(f"tensor {tensor!r} has external data with no location")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
        raise ModelError(f"tensor {tensor!r}: external data location {location!r} is absolute; "
                         "only files inside the model's folder are read")
    base = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, path]) != base:
        raise ModelError(f"tensor {tensor!r}: external data location {location!r} points outside "
                         "the model's folder")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise ModelError(f"tensor {tensor!r}: external data file {location!r} does not exist") \
            from None
    if not stat.S_ISREG(mode):  # a FIFO would block the read, a device never end it
        raise ModelError(f"tensor {tensor!r}: external data file {location!r} is {kind(mode)}, "
                         "not a regular file")
    return path


def _extent(tensor: TensorProto, base_dir: str | None, node: str) -> tuple[str, int, int]:
    """(path, offset, length) of a tensor's external bytes, every bound checked."""
    if base_dir is None:
        raise ModelError(f"tensor {tensor.name!r} uses external data, which needs the model to "
                         "be loaded from a path", node=node or None)
    info = external_data_helper.ExternalDataInfo(tensor)
    path = safe_location(base_dir, info.location, tensor.name)
    size = os.path.getsize(path)
    offset = info.offset or 0
    length = info.length if info.length is not None else size - offset
    if offset < 0 or length < 0 or offset + length > size:
        raise ModelError(f"tensor {tensor.name!r}: external data range {offset}+{length} is "
                         f"outside its file ({size} bytes)")
    dtype = onnx_bridge.dtype_name(tensor.data_type)
    if dtype is None or dtype == "object":
        raise ModelError(f"tensor {tensor.name!r}: external data of type {tensor.data_type} "
                         "is not supported")
    want = int(np.prod(tensor.dims, dtype=object)) * np.dtype(dtype).itemsize
    if want != length:
        raise ModelError(f"tensor {tensor.name!r}: shape {list(tensor.dims)} needs {want} bytes, "
                         f"its external data has {length}")
    return path, offset, length


# How ``data_location = EXTERNAL`` (TensorProto field 14, varint 1) is serialized.
_EXTERNAL_LOCATION = bytes([14 << 3, TensorProto.EXTERNAL])


def maybe_external(data: bytes) -> bool:
    """Whether a model, as protobuf serializes it, may hold a tensor with external data.
    False is certain for protobuf's own output, which writes every such tensor's location as
    these two bytes (not for a file's bytes: a parser also takes over-long varints). True may
    be a coincidence in other bytes (weights), and then ``prepare_external_data`` walks the
    model to see. The walk creates a wrapper for every node: on a 100,000-node graph, a tenth
    of a second."""
    return _EXTERNAL_LOCATION in data


def prepare_external_data(model: onnx.ModelProto, base_dir: str | None) -> bool:
    """Check every external tensor now (refusing any that leaves the model's folder or its
    file), and fill those held in node attributes in place (rare, and small); initializers
    stay on disk until the importer maps them. Returns whether it filled any."""
    filled = False
    for tensor, node, is_init in _tensors(model.graph):
        if not external_data_helper.uses_external_data(tensor):
            continue
        path, offset, length = _extent(tensor, base_dir, node)
        if is_init:
            continue
        with open_regular(path, f"tensor {tensor.name!r}: external data", error=ModelError) as f:
            f.seek(offset)
            tensor.raw_data = f.read(length)
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]
        filled = True
    return filled


def external_array(tensor: TensorProto, base_dir: str | None) -> np.ndarray:
    """An external initializer as a read-only memory map of its file."""
    path, offset, length = _extent(tensor, base_dir, "")
    dtype = np.dtype(onnx_bridge.dtype_name(tensor.data_type))
    shape = tuple(tensor.dims)
    if length == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
