"""byoc's errors. Each names the ONNX node (its span), the op, and what is wrong, in one line."""

from __future__ import annotations


class ByocError(Exception):
    """Base of every error byoc raises on purpose; the CLI prints it as one line, exit 2."""


def where(node: str | None, op: str | None) -> str:
    """The ``node 'conv1' (Conv): `` prefix of an error message."""
    if node is None and op is None:
        return ""
    if node is None:
        return f"op {op}: "
    return f"node {node!r} ({op}): " if op else f"node {node!r}: "


class ModelError(ByocError):
    """The model itself is broken or unsupported."""

    def __init__(self, message: str, node: str | None = None, op: str | None = None):
        self.node, self.op = node, op
        super().__init__(where(node, op) + message)


class InputError(ByocError):
    """The inputs given to a run do not fit the model."""


class KernelError(ByocError):
    """A kernel failed while running a node."""

    def __init__(self, message: str, node: str | None = None, op: str | None = None):
        self.node, self.op = node, op
        super().__init__(where(node, op) + message)


class OutputError(ByocError):
    """An output path byoc may not write: a user's file or folder in the way, a missing folder."""


class ByocWarning(UserWarning):
    """Something byoc repaired or worked around (a damaged cache entry rebuilt); the CLI shows
    it as one ``byoc: warning:`` line."""


class RegionError(ByocError):
    """A backend's ``compile`` or the callable it returned failed, or returned what the region
    does not declare: ``backend 'NAME', region 'R' (nodes a..b): <what it said>``."""

    def __init__(self, backend: str, region: str, nodes: str, message: str,
                 contract: bool = False):
        self.backend, self.region, self.contract = backend, region, contract
        super().__init__(f"backend {backend!r}, region {region!r} ({nodes}): {message}")
