"""Types of IR values: tensors with (possibly symbolic) dims, and tuples of them."""

from __future__ import annotations

from dataclasses import dataclass

# A dim is a concrete int, a symbolic name (ONNX dim_param), or None (unknown).
Dim = int | str | None


@dataclass(frozen=True, slots=True)
class TensorType:
    """A tensor's type. ``shape`` is None when even the rank is unknown.

    ``dtype`` is a numpy dtype name ("float32", "int64", "bool", ...), or None when unknown.
    """

    shape: tuple[Dim, ...] | None
    dtype: str | None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def __str__(self) -> str:
        return self.text(str)

    def text(self, name=str) -> str:
        """``Tensor[(n, 3), float32]``, each named dim shown through ``name`` (the CLI passes
        ``report.show``, so that a dim name cannot break a line or reach the terminal raw)."""
        dims = "?" if self.shape is None else dims_text(self.shape, name)
        return f"Tensor[{dims}, {self.dtype or '?'}]"


def dims_text(shape, name=str) -> str:
    """``(n, 3, ?)``: a shape's dims, named ones through ``name``, unknown ones as ``?``."""
    text = ", ".join("?" if d is None else str(d) if isinstance(d, int) else name(d) for d in shape)
    return f"({text},)" if len(shape) == 1 else f"({text})"


@dataclass(frozen=True, slots=True)
class TupleType:
    """The type of a value with several fields (an op with several outputs)."""

    fields: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(f) for f in self.fields) + ")"


@dataclass(frozen=True, slots=True)
class OpaqueType:
    """A value byoc does not look inside: ONNX sequences, maps and optionals."""

    name: str

    def __str__(self) -> str:
        return self.name


Type = TensorType | TupleType | OpaqueType

UNKNOWN = TensorType(None, None)


def incomplete(t: Type) -> bool:
    """Unknown, or a tensor of unknown dtype (any field, for a tuple): a type rule should say."""
    if isinstance(t, TupleType):
        return any(incomplete(f) for f in t.fields)
    return t is UNKNOWN or (isinstance(t, TensorType) and t.dtype is None)
