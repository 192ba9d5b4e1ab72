"""A small C source builder: indented lines, blocks, safe identifiers, safe comments, literals.

Every string that comes from a model (node names, tensor names) reaches C only through
``Names.ident`` (an identifier made of ``[A-Za-z0-9_]``) or ``comment`` (an escaped comment
that cannot end early, continue a line or hide a directive). Nothing else here takes text from
outside; literals are made from numbers.

    src = CSource()
    with src.block("void f(float *y)"):
        src.comment("from node 'conv1'")
        src.line("y[0] = 1.0f;")
    src.text()
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from collections.abc import Iterator

import numpy as np

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]+")
# Characters a comment shows as they are; everything else is written as \xNN or \uNNNN.
_COMMENT_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                          " _.,:;=+-()[]{}<>!#$%&@^|~'\"/*")
NAME_LIMIT = 120  # characters of one model string shown in a comment; longer ones are cut
COMMENT_LIMIT = 1000  # and of a whole comment


def shorten(text: str, limit: int = NAME_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with a hash of the whole to tell cut names apart."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({_short_hash(text)})"


def escape_comment_text(text: str) -> str:
    """``text`` made safe inside ``/* ... */``: printable ASCII, no ``*/`` or ``/*``, and no
    newline, backslash or ``?`` (so no line splice or trigraph): those are written as escapes."""
    out = "".join(c if c in _COMMENT_SAFE else _escape_char(c) for c in text)
    # "*/" would end the comment and "/*" makes compilers warn; break both up.
    return out.replace("*/", "*\\x2f").replace("/*", "/\\x2a")


def _escape_char(c: str) -> str:
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def comment(text: str) -> str:
    """A one-line C comment holding ``text``, escaped; cut names with ``shorten`` first."""
    return f"/* {escape_comment_text(shorten(text, COMMENT_LIMIT))} */"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


class Names:
    """Unique C identifiers made from untrusted strings.

    ``ident("gpu_0/conv1")`` gives ``v_gpu_0_conv1``; the same string asked twice gives the same
    identifier, two strings that sanitize alike get ``_2``, ``_3``... suffixes. The prefix keeps
    every identifier clear of C keywords, the compiler's reserved ``__`` and ``_X`` names, and
    the fixed names the generated code uses itself.
    """

    def __init__(self, prefix: str = "v_", max_len: int = 40):
        if not re.fullmatch(r"[a-z][a-z0-9]*_", prefix):
            raise ValueError(f"an identifier prefix is lowercase letters and digits then '_', "
                             f"not {prefix!r}")
        self.prefix = prefix
        self.max_len = max_len
        self._given: dict[str, str] = {}
        self._taken: set[str] = set()

    def ident(self, name: str) -> str:
        """The identifier for ``name``: the same each time it is asked for."""
        if name not in self._given:
            self._given[name] = self.unique(name)
        return self._given[name]

    def unique(self, name: str) -> str:
        """A new identifier made from ``name``, distinct from every other given out."""
        stem = _NOT_IDENT.sub("_", name).strip("_")
        stem = re.sub("_+", "_", stem)[: self.max_len].rstrip("_") or "t"
        base = self.prefix + stem
        out, k = base, 1
        while out in self._taken:
            k += 1
            out = f"{base}_{k}"
        self._taken.add(out)
        return out


class CSource:
    """Lines of C with indentation; ``block`` opens and closes braces."""

    def __init__(self, indent: str = "    "):
        self._lines: list[str] = []
        self._depth = 0
        self._indent = indent

    def line(self, text: str = "") -> None:
        """One line of C written by byoc itself (never a model string: see ``comment``)."""
        if "\n" in text:
            raise ValueError("a C line cannot hold a newline")
        self._lines.append(self._indent * self._depth + text if text else "")

    def lines(self, text: str) -> None:
        """Several lines of byoc's own C (helpers kept as Python strings), re-indented."""
        for ln in text.strip("\n").splitlines():
            self.line(ln.rstrip())

    def comment(self, text: str) -> None:
        self.line(comment(text))

    @contextlib.contextmanager
    def block(self, head: str = "") -> Iterator[None]:
        """``head {`` ... ``}``; a bare block when ``head`` is empty."""
        self.line(f"{head} {{" if head else "{")
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.line("}")

    def mark(self) -> int:
        """Where the next line goes, for ``cut``."""
        return len(self._lines)

    def cut(self, mark: int) -> list[str]:
        """Take back the lines written since ``mark``, without the indentation they had."""
        lines, self._lines = self._lines[mark:], self._lines[:mark]
        pad = self._indent * self._depth
        return [ln[len(pad):] if ln.startswith(pad) else ln for ln in lines]

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


# -- literals -------------------------------------------------------------------------------------

C_TYPES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int32_t",
           "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t", "bool": "uint8_t"}


def c_type(dtype: str) -> str:
    """The C element type of a numpy dtype name; KeyError for one C code does not handle."""
    return C_TYPES[dtype]


def float_literal(value: float, dtype: str = "float32") -> str:
    """A C literal that reads back as exactly ``value`` in ``dtype`` (inf and nan included)."""
    v = float(np.float32(value)) if dtype == "float32" else float(value)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    text = f"{v:.9g}" if dtype == "float32" else repr(v)
    if not any(c in text for c in ".en"):
        text += ".0"
    return text + ("f" if dtype == "float32" else "")


def int_literal(value: int, dtype: str = "int64") -> str:
    """A C integer literal of ``dtype``; the minimum int64 spelled so it does not overflow."""
    v = int(value)
    if dtype == "int64":
        if v == -(2**63):
            return "INT64_MIN"
        return f"INT64_C({v})"
    return str(v)


def literal(value, dtype: str) -> str:
    """A C literal of a numpy scalar's value in ``dtype``."""
    if dtype in ("float32", "float64"):
        return float_literal(float(value), dtype)
    if dtype == "bool":
        return "1" if bool(value) else "0"
    return int_literal(int(value), dtype)
