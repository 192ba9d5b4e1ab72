"""Hand-written numpy host kernels for hot ONNX ops (default domain, opset 28 semantics).

``HAND_KERNELS[op_type](attrs, *inputs) -> tuple of all outputs``; see ``_registry`` for the
calling convention. Importing the submodules registers their kernels.
"""

from __future__ import annotations

from . import (  # noqa: F401  (imported for their @kernel registrations)
    conv,
    elementwise,
    nn,
    optional,
    pool,
    quantized,
    recurrent,
    reduce,
    resize,
    tensor,
)
from ._registry import REGISTRY, Kernel

#: ONNX op type -> host kernel.
HAND_KERNELS: dict[str, Kernel] = dict(sorted(REGISTRY.items()))

__all__ = ["HAND_KERNELS", "Kernel"]
