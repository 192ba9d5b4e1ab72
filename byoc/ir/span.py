"""Spans: where an IR node came from, kept through every pass for humans and errors."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """The ONNX node a value came from. Passes carry spans over; they never branch on them.

    ``outputs`` are the ONNX names of the values the node wrote ("" for an omitted output).
    """

    name: str
    op_type: str = ""
    outputs: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name
