"""Spans: where an IR node came from, kept through every pass for humans and errors."""

from __future__ import annotations

from typing import NamedTuple


class Span(NamedTuple):
    """The ONNX node a value came from. Passes carry spans over; they never branch on them.

    ``outputs`` are the ONNX names of the values the node wrote ("" for an omitted output).
    ``folded``: other ONNX nodes whose work this node now does too, folded into it by a
    backend (native's Conv with a BatchNormalization's scale in its weights carries the BN's
    span, the Conv's folded into it), in the order they ran.
    A NamedTuple rather than a dataclass: the importer makes one per node, and a tuple is
    the cheapest immutable record Python has (spans must cost little at import).
    """

    name: str
    op_type: str = ""
    outputs: tuple[str, ...] = ()
    folded: tuple[Span, ...] = ()

    def __str__(self) -> str:
        return self.name
