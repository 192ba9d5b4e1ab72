"""Optional, OptionalGetElement, OptionalHasElement: an optional value is its value, or None.

onnx.reference wraps the value Optional makes in a list and OptionalGetElement hands the list
back, so ``OptionalGetElement(Optional(x))`` came out as ``[x]``, one dim too many; a graph
input of optional type is fed as the value itself. Here both are the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._registry import kernel


@kernel("Optional")
def optional(attrs: dict, x: Any = None) -> tuple[Any, ...]:
    """The value, or None for an empty optional (no input)."""
    return (x,)


@kernel("OptionalGetElement")
def optional_get_element(attrs: dict, x: Any) -> tuple[Any, ...]:
    """The value; an empty optional is an error (onnxruntime's too)."""
    if x is None:
        raise ValueError("the optional is empty")
    return (x,)


@kernel("OptionalHasElement")
def optional_has_element(attrs: dict, x: Any = None) -> tuple[np.ndarray, ...]:
    """Whether the optional holds a value."""
    return (np.array(x is not None),)
