"""IRModule: named functions, "main" first, plus module-level facts such as the opset."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .expr import Function


@dataclass(eq=False)
class IRModule:
    """A set of functions by name. ``main`` runs on the host; the others are external."""

    functions: dict[str, Function]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Function:
        return self.functions[name]

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    @property
    def main(self) -> Function:
        return self.functions["main"]

    def with_function(self, name: str, func: Function) -> IRModule:
        return IRModule({**self.functions, name: func}, dict(self.attrs))

    def astext(self, show_meta: bool = False) -> str:
        from .printer import astext

        return astext(self, show_meta=show_meta)

    def __str__(self) -> str:
        return self.astext()
