"""A region's entry function, written so that the C stays buildable however big the region.

Compilers take time superlinear in a function's size (points-to analysis, constant
propagation): one entry function calling 10,000 op functions made gcc's time grow with the
square of the region (10,000 ops 15 s, 30,000 ops 121 s). So the calls are cut into parts of
at most ``PART_LINES`` statements, each a function of its own that declares only the locals its
statements use, and the entry calls the parts in order. And a C function of 50,000 parameters
crashes gcc: a region with more than ``MAX_ARGS`` inputs and outputs takes them in one array
(``void *const *args``), which the caller fills.

    void byoc_region(const float *in_x, float *out_y, const void *const *consts, char *ws)
    void byoc_region(void *const *args, const void *const *consts, char *ws)   (many)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from byoc.codegen import CSource

PART_LINES = 200  # statements of the entry function per part
MAX_ARGS = 128  # inputs and outputs passed as C parameters; more go through an array

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Arg:
    """An input or output of the region: its C type (``const float *``) and name."""

    ctype: str
    name: str
    restrict: bool = True


def write_entry(src: CSource, symbol: str, args: Sequence[Arg], locals_: Mapping[str, str],
                lines: Sequence[str]) -> tuple[str, bool]:
    """Write the entry ``symbol`` running ``lines`` into ``src``; return its declaration for
    cffi and whether it takes its inputs and outputs through an array.

    ``locals_`` maps names the lines may use to the line declaring each (a constant's or a
    buffer's pointer); every part declares those its statements use, in this order.
    """
    table = len(args) > MAX_ARGS
    declarations = dict(locals_)
    if table:
        params = ["void *const *args"]
        for k, a in enumerate(args):
            declarations[a.name] = f"{a.ctype}const {a.name} = ({a.ctype})args[{k}];"
    else:
        params = [f"{a.ctype}{' restrict ' if a.restrict else ''}{a.name}" for a in args]
    params += ["const void *const *consts", "char *ws"]
    signature = ", ".join(params)
    names = ["args"] if table else [a.name for a in args]
    call = ", ".join([*names, "consts", "ws"])
    parts = [lines[i:i + PART_LINES] for i in range(0, len(lines), PART_LINES)] or [[]]
    order = {name: k for k, name in enumerate(declarations)}
    for j, part in enumerate(parts if len(parts) > 1 else []):
        with src.block(f"static BYOC_NOINLINE void {symbol}_part{j}({signature})"):
            _body(src, part, declarations, order)
        src.line()
    with src.block(f"void {symbol}({signature})"):
        if len(parts) > 1:
            for j in range(len(parts)):
                src.line(f"{symbol}_part{j}({call});")
        else:
            _body(src, parts[0], declarations, order)
    cdef = ", ".join(p.replace(" restrict ", " ") for p in params)
    return f"void {symbol}({cdef});", table


def _body(src: CSource, lines: Sequence[str], declarations: Mapping[str, str],
          order: Mapping[str, int]) -> None:
    used = {name for line in lines for name in _IDENT.findall(line) if name in declarations}
    for name in sorted(used, key=order.__getitem__):
        src.line(declarations[name])
    for line in lines:
        src.line(line)
