"""Load a model's external data, but only from files inside the model's own folder.

A model names its external files itself, so a hostile one could point at ``../../etc/passwd``,
an absolute path, or a symlink leading out. Each location is resolved and must stay inside.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import onnx
from onnx import TensorProto, external_data_helper

from byoc.errors import ModelError


def _tensors(graph: onnx.GraphProto) -> Iterator[tuple[TensorProto, str]]:
    """Every tensor of a graph and its subgraphs, with the name of the node holding it."""
    stack = [graph]
    while stack:
        g = stack.pop()
        for t in g.initializer:
            yield t, ""
        for node in g.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t, node.name
                for t in attr.tensors:
                    yield t, node.name
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
    if not os.path.isfile(path):
        raise ModelError(f"tensor {tensor!r}: external data file {location!r} does not exist")
    return path


def load_external_data(model: onnx.ModelProto, base_dir: str | None) -> None:
    """Fill every external tensor of ``model`` in place from files under ``base_dir``."""
    for tensor, node in _tensors(model.graph):
        if not external_data_helper.uses_external_data(tensor):
            continue
        info = external_data_helper.ExternalDataInfo(tensor)
        if base_dir is None:
            raise ModelError(f"tensor {tensor.name!r} uses external data, which needs the model "
                             "to be loaded from a path", node=node or None)
        path = safe_location(base_dir, info.location, tensor.name)
        size = os.path.getsize(path)
        offset = info.offset or 0
        length = info.length if info.length is not None else size - offset
        if offset < 0 or length < 0 or offset + length > size:
            raise ModelError(f"tensor {tensor.name!r}: external data range {offset}+{length} is "
                             f"outside its file ({size} bytes)")
        with open(path, "rb") as f:
            f.seek(offset)
            tensor.raw_data = f.read(length)
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]
