"""What an op emitter gets: its tensors as C sees them, and the context it writes into.

An emitter is ``emit(ctx, call, ins, outs)``: it writes one loop nest (or one helper call) for
``call`` into ``ctx.src``, reading the ``ins`` tensors and writing the ``outs``. Shapes are
concrete (the region is specialized to the shapes of its first call); pointers are C locals
bound to the tensors' buffers for the op's block.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from byoc.codegen import CSource, c_type, literal
from byoc.errors import ByocError


class Unsupported(ByocError):
    """A call the generator cannot specialize for these shapes (the region then runs on the
    host for them). The support checks decline what is known before shapes are."""


@dataclass(frozen=True)
class Tensor:
    """A tensor in generated code: ``ptr`` is a C expression of type ``ctype *``."""

    ptr: str
    shape: tuple[int, ...]
    dtype: str
    value: np.ndarray | None = None  # known at code generation (a constant)

    @property
    def ctype(self) -> str:
        return c_type(self.dtype)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Element strides of the C-contiguous layout."""
        out, step = [], 1
        for d in reversed(self.shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))

    def scalar(self) -> str | None:
        """A C literal of the value if it is a one-element constant, else None."""
        if self.value is None or self.value.size != 1:
            return None
        return literal(self.value.reshape(()).item(), self.dtype)


@dataclass
class Emit:
    """The state one region's ops write into: the source, helpers needed, scratch used."""

    src: CSource
    scratch_base: int  # byte offset of the scratch area in the workspace
    const_base: int  # index in the constant table of the first constant an emitter adds
    needed: set[str] = field(default_factory=set)
    extra_constants: list[np.ndarray] = field(default_factory=list)
    scratch_bytes: int = 0  # the most any one op has asked for
    _op_scratch: int = 0

    def need(self, snippet: str) -> None:
        """Include a helper of ``runtime_c`` in the region's source."""
        self.needed.add(snippet)

    def begin_op(self) -> None:
        self._op_scratch = 0

    def constant(self, value: np.ndarray) -> str:
        """A pointer to ``value``, a constant derived at code generation (packed weights)."""
        self.extra_constants.append(np.asarray(value, order="C"))
        index = self.const_base + len(self.extra_constants) - 1
        return f"((const {c_type(value.dtype.name)} *)consts[{index}])"

    def scratch(self, nbytes: int, ctype: str = "float") -> str:
        """A ``ctype *`` to ``nbytes`` of scratch, valid for the current op only."""
        offset = self.scratch_base + self._op_scratch
        self._op_scratch += (int(nbytes) + 63) // 64 * 64
        self.scratch_bytes = max(self.scratch_bytes, self._op_scratch)
        return f"(({ctype} *)(ws + {offset}))"
