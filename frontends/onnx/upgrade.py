"""Bring an older model to the canonical opset with onnx's version converter.

The converter upgraded real models of opsets 11 to 18 correctly here; where it fails (an op it
has no adapter for), the model keeps its own opset and onnx.reference runs the odd ops at that
version, so import still succeeds.
"""

from __future__ import annotations

import warnings

import onnx
from onnx import version_converter


def upgrade_opset(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """``model`` at opset ``target``, or unchanged (with a warning) if conversion fails."""
    try:
        upgraded = version_converter.convert_version(model, target)
    except Exception as exc:
        warnings.warn(f"opset upgrade to {target} failed ({str(exc).splitlines()[0][:200]}); "
                      "keeping the model's own opset", stacklevel=4)
        return model
    return upgraded
