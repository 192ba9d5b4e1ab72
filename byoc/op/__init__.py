"""Ops: the registry (type rule, fuse pattern, host kernel per op) and the call builder.

Any ONNX op is a builder function here: ``byoc.op.Relu(x)``, ``byoc.op.Conv(x, w, pads=[1]*4)``;
contrib ops by their domain, ``byoc.op.make_call("com.microsoft.Gelu", x)``.
"""

from __future__ import annotations

from typing import Any

from .builder import OpBuildError, const, make_call, outputs, var
from .registry import CANONICAL_OPSET, FusePattern, OpDef, all_ops, get, lookup

__all__ = ["CANONICAL_OPSET", "FusePattern", "OpBuildError", "OpDef", "all_ops", "const", "get",
           "lookup", "make_call", "outputs", "var"]


def __getattr__(name: str) -> Any:
    if name[:1].isupper() and lookup(name) is not None:
        def build(*args: Any, **attrs: Any):
            return make_call(name, *args, **attrs)

        build.__name__ = build.__qualname__ = name
        build.__doc__ = f"Build a call of the ONNX op {name}."
        return build
    raise AttributeError(f"byoc.op has no attribute {name!r}")
