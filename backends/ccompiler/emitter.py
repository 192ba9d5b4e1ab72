"""What an op emitter gets: its tensors as C sees them, and the context it writes into.

An emitter is ``emit(ctx, call, ins, outs)``: it writes one loop nest (or one helper call) for
``call`` into ``ctx.src``, reading the ``ins`` tensors and writing the ``outs``. Shapes are
concrete (the region is specialized to the shapes of its first call); pointers are C locals
bound to the tensors' buffers for the op's block.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
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


# Iterations times their cost (about a multiply-add each) below which a loop stays serial:
# waking the pool costs a few microseconds.
PAR_WORK = 1 << 16


@dataclass
class Emit:
    """The state one region's ops write into: the source, helpers needed, scratch used.

    Loops whose iterations are independent can run on the thread pool (``parallel``): their
    body becomes a task function over a range of the loop, written to ``tasks`` (after every
    op's function), its argument struct and prototype to ``protos`` (before them)."""

    src: CSource
    scratch_base: int  # byte offset of the scratch area in the workspace
    const_base: int  # index in the constant table of the first constant an emitter adds
    needed: set[str] = field(default_factory=set)
    extra_constants: list[np.ndarray] = field(default_factory=list)
    scratch_bytes: int = 0  # the most any one op has asked for
    protos: CSource = field(default_factory=CSource)
    tasks: CSource = field(default_factory=CSource)
    _op_scratch: int = 0
    _fn: str = ""  # the op function being written, and its C parameters
    _params: tuple[str, ...] = ()
    _n_tasks: int = 0
    _locals: list[str] = field(default_factory=list)
    _task_scratch: int | None = None  # bytes of per-thread scratch, inside a task

    def need(self, snippet: str) -> None:
        """Include a helper of ``runtime_c`` in the region's source."""
        self.needed.add(snippet)

    def begin_op(self, fn: str = "", params: tuple[str, ...] | list[str] = ()) -> None:
        """A new op function ``fn`` with these C parameters (``parallel`` needs them)."""
        self._op_scratch = 0
        self._fn, self._params, self._n_tasks = fn, tuple(params), 0
        self._locals = []

    def declare(self, line: str) -> None:
        """A local of the op function made from its parameters alone (``const T x = ...;``),
        declared again at the top of each of its parallel tasks, which may then use it."""
        self.src.line(line)
        self._locals.append(line)

    @contextlib.contextmanager
    def parallel(self, var: str, count: int, work: int) -> Iterator[None]:
        """``for (long var = 0; var < count; var++) { body }`` whose iterations may run on
        the pool (each must write only its own outputs): ``work`` is the whole loop's, in
        multiply-adds. Small loops, loops inside a task, and ops written without
        ``begin_op(fn, params)`` stay plain loops. The body may use the op's parameters, the
        locals made by ``declare``, what it declares itself (no other local of the op, no
        enclosing loop's variable), and ``scratch`` (then per thread)."""
        if count < 2 or work < PAR_WORK or self._task_scratch is not None or not self._fn:
            with self.src.block(f"for (long {var} = 0; {var} < {count}; {var}++)"):
                yield
            return
        name = f"{self._fn}_t{self._n_tasks}"
        args = f"{self._fn}_args"
        if self._n_tasks == 0:
            members = " ".join(re.sub(r"\s*\brestrict\b", "", p) + ";" for p in self._params)
            self.protos.line(f"typedef struct {{ {members} }} {args};")
        self._n_tasks += 1
        self.protos.line(f"static void {name}(void *ctx, long lo, long hi);")
        mark = self.src.mark()
        self._task_scratch = 0
        try:
            with self.src.block(f"for (long {var} = lo; {var} < hi; {var}++)"):
                yield
        finally:
            body = self.src.cut(mark)
            scratch, self._task_scratch = self._task_scratch, None
        with self.tasks.block(f"static void {name}(void *ctx, long lo, long hi)"):
            self.tasks.line(f"const {args} *A = (const {args} *)ctx;")
            for p in self._params:
                self.tasks.line(f"{p} = A->{_param_name(p)};")
            for line in self._locals:
                self.tasks.line(line)
            if scratch:
                self.tasks.line(f"char *byoc_tws = (char *)byoc_task_scratch({scratch});")
            for ln in body:
                self.tasks.line(ln)
        self.tasks.line()
        values = ", ".join(_param_name(p) for p in self._params)
        with self.src.block():
            self.src.line(f"{args} byoc_args = {{{values}}};")
            self.src.line(f"byoc_parallel({count}, {name}, &byoc_args);")

    def constant(self, value: np.ndarray) -> str:
        """A pointer to ``value``, a constant derived at code generation (packed weights)."""
        self.extra_constants.append(np.asarray(value, order="C"))
        index = self.const_base + len(self.extra_constants) - 1
        return f"((const {c_type(value.dtype.name)} *)consts[{index}])"

    def scratch(self, nbytes: int, ctype: str = "float") -> str:
        """A ``ctype *`` to ``nbytes`` of scratch, valid for the current op only (inside a
        ``parallel`` body: for the current iteration, the thread's own)."""
        if self._task_scratch is not None:
            offset = self._task_scratch
            self._task_scratch += (int(nbytes) + 63) // 64 * 64
            return f"(({ctype} *)(byoc_tws + {offset}))"
        offset = self.scratch_base + self._op_scratch
        self._op_scratch += (int(nbytes) + 63) // 64 * 64
        self.scratch_bytes = max(self.scratch_bytes, self._op_scratch)
        return f"(({ctype} *)(ws + {offset}))"


def _param_name(param: str) -> str:
    """The name a C parameter declaration declares (its last identifier)."""
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", param)[-1]
