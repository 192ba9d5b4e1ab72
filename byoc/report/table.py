"""What runs where in a partitioned module: the data of ``byoc partition``, as a dict and a table.

    {"regions": [{"name", "backend", "scope": [span, attr, ...], "nodes": [ONNX node names],
                  "inputs": [ONNX value names], "outputs": [...], "op_types": {op: count},
                  "bytes_in", "bytes_out"}],
     "host_nodes": [ONNX node names], "reasons": {host node: why it stayed on the host},
     "offload": {"main": {"nodes", "offloaded"}, "bodies": {"nodes", "offloaded"}}}

Regions and host nodes come from main and from every If, Loop and Scan body in it, main's
first, then each body's in the order its parent runs (parents before children). A region's
``scope`` is the chain of node spans and attribute names leading to its body, ``[]`` in main:
``["if", "then_branch"]``, ``["loop", "body", "loop_if", "else_branch"]``. ``offload`` counts
nodes (an If, Loop or Scan counts as one host node of its parent) in main and in all bodies.

Bytes are what crosses a region's boundary per run (its arguments and results), from the types,
a symbolic dim (batch) counted as 1 and named in ``bytes_symbolic`` (the table marks such sizes
with ``*``); None where a dim is unknown (``?`` in the table, with a note saying why). Bound
constants do not cross, so they do not count. Given ``shaped`` (the model imported again with
the shapes a run would have: ``load_onnx(..., input_shapes=...)``), sizes come from its types,
value by ONNX name: the dims those shapes fix count at their real size.

The table fits ``WIDTH`` columns: long names are shortened in the middle (a region keeps its
backend and its hash), op types cut after a whole entry (``90 Mul, 57 Conv (+28)``); the JSON has
them whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from ..analysis import host_calls, node_key, recorded, walk_functions
from ..ir import (
    Call,
    Function,
    GlobalVar,
    IRModule,
    TensorType,
    TupleType,
    Type,
    post_order,
)
from ..ir.printer import quote


def show(text: str) -> str:
    """A model's string as every text output shows it (the CLI, this table, the profile,
    extract's README): as it is if printable, else quoted with escapes, so no name can break a
    line or send a terminal control sequence."""
    return text if text.isprintable() else quote(text)


def partition_report(mod: IRModule, shaped: IRModule | None = None) -> dict:
    """The regions, host nodes and host reasons of a partitioned module (JSON-ready); sizes
    from ``shaped``'s types where it has the value (see the module's docstring)."""
    known = _value_types(shaped) if shaped is not None else {}
    regions = []
    host: list[str] = []
    counts = {"main": {"nodes": 0, "offloaded": 0}, "bodies": {"nodes": 0, "offloaded": 0}}
    for scope, f in walk_functions(mod.main):
        order = post_order(f.body)
        count = counts["bodies" if scope else "main"]
        for e in order:
            if isinstance(e, Call) and isinstance(e.op, GlobalVar):
                func = mod[e.op.name]
                calls, in_bodies = _calls(func)
                count["offloaded"] += len(calls) - in_bodies
                counts["bodies"]["offloaded"] += in_bodies
                outputs = list(func.attrs.get("output_names", []))
                ins = [known.get(p.name, p.type) for p in func.params]
                outs = _outputs(func.ret_type, outputs, known)
                regions.append({
                    "name": e.op.name, "backend": func.attrs.get("Compiler"),
                    "scope": list(scope),
                    "nodes": [node_key(c) for c in calls],
                    "inputs": [p.name for p in func.params],
                    "outputs": outputs,
                    "op_types": dict(Counter(c.op_name for c in calls)),
                    "bytes_in": _total(ins),
                    "bytes_out": _total(outs),
                    "bytes_symbolic": _symbolic([*ins, *outs]),
                })
        found = [node_key(c) for c in host_calls(order)]
        host.extend(found)
        count["nodes"] += len(found)
    for count in counts.values():
        count["nodes"] += count["offloaded"]
    reasons = recorded(mod)
    return {"regions": regions, "host_nodes": host,
            "reasons": {k: reasons[k] for k in host if k in reasons}, "offload": counts}


def _value_types(mod: IRModule) -> dict[str, Type]:
    """The type of every named value of a module (inputs and node outputs, bodies too)."""
    types: dict[str, Type] = {}
    for _, f in walk_functions(mod.main):
        for p in f.params:
            types.setdefault(p.name, p.type)
        for e in post_order(f.body):
            if not isinstance(e, Call) or e.span is None:
                continue
            fields = e.type.fields if isinstance(e.type, TupleType) else (e.type,)
            for name, t in zip(e.span.outputs, fields):
                if name:
                    types.setdefault(name, t)
    return types


def _outputs(ret: Type, names: list[str], known: dict[str, Type]) -> list[Type]:
    """A region's result types, each from ``known`` where it has that output."""
    fields = list(ret.fields) if isinstance(ret, TupleType) else [ret]
    if len(fields) != len(names):
        return [ret]
    return [known.get(n, t) for n, t in zip(names, fields)]


def _calls(func: Function) -> tuple[list[Call], int]:
    """The ONNX nodes a region runs, composites opened up, then those of the bodies of the
    control flow it was given whole (``passes/whole_control_flow.py``); and how many of them
    lie in those bodies."""
    own: list[Call] = []
    for e in post_order(func.body):
        if isinstance(e, Call):
            own.extend(_calls(e.op)[0] if isinstance(e.op, Function) else [e])
    inner = [c for scope, body in walk_functions(func) if scope
             for c in post_order(body.body) if isinstance(c, Call)]
    return own + inner, len(inner)


def _total(types) -> int | None:
    """Bytes of tensors of these types, a symbolic dim counted as 1; None if any is unknown."""
    total = 0
    for t in types:
        for f in (t.fields if isinstance(t, TupleType) else (t,)):
            if not isinstance(f, TensorType) or f.shape is None or f.dtype is None \
                    or any(d is None for d in f.shape):
                return None
            try:
                itemsize = np.dtype(f.dtype).itemsize
            except TypeError:  # strings and other non-numeric dtypes
                return None
            total += itemsize * int(np.prod([d if isinstance(d, int) else 1 for d in f.shape],
                                            dtype=np.int64))
    return total


def _symbolic(types) -> list[str]:
    """The symbolic dims (names) in these types, sorted."""
    names: set[str] = set()
    for t in types:
        for f in (t.fields if isinstance(t, TupleType) else (t,)):
            if isinstance(f, TensorType) and f.shape is not None:
                names.update(d for d in f.shape if isinstance(d, str))
    return sorted(names)


WIDTH = 120  # columns the table fits in
HEADER = ("#", "region", "backend", "nodes", "op types", "inputs", "outputs", "bytes in/out")
# The narrowest each column gets to fit WIDTH (None: never shortened). A region's name keeps
# room for its backend, the start of its first node and its hash; a backend's name, which
# --backend takes, is never cut.
FLOORS = (None, 30, None, None, 12, 12, 12, None)  # "#": the number extract --region takes

#: A table cell: its whole width, and its text fitted to a given width.
Cell = tuple[int, Callable[[int], str]]


def format_table(report: dict, explain: bool = False) -> str:
    """The report as a table, one region a row, at most ``WIDTH`` columns; with ``explain``,
    each host node and why."""
    rows: list[tuple[Cell, ...]] = [tuple(_text(h) for h in HEADER)]
    symbolic: set[str] = set()
    unknown = False
    for k, r in enumerate(report["regions"]):
        ops = [f"{n} {op}" if n > 1 else op for op, n in
               sorted(r["op_types"].items(), key=lambda kv: (-kv[1], kv[0]))]
        marked = "*" if r.get("bytes_symbolic") else ""
        symbolic.update(r.get("bytes_symbolic") or ())
        unknown = unknown or r["bytes_in"] is None or r["bytes_out"] is None
        rows.append((_text(str(k)), _text(show(r["name"])), _text(show(str(r["backend"]))),
                     _text(str(len(r["nodes"]))), _entries(ops), _names(r["inputs"]),
                     _names(r["outputs"]),
                     _text(f"{_size(r['bytes_in'])} / {_size(r['bytes_out'])}{marked}")))
    widths = _fit([[width for width, _ in column] for column in zip(*rows)])
    lines = ["  ".join(fit(w).ljust(w) for (_, fit), w in zip(row, widths)).rstrip()
             for row in rows]
    if symbolic:
        named = ", ".join(show(d) for d in sorted(symbolic)[:4])
        more = f" and {len(symbolic) - 4} more" if len(symbolic) > 4 else ""
        lines.append(_shorten(f"* sizes with the symbolic dims ({named}{more}) counted as 1",
                              WIDTH))
    if unknown:
        lines.append("? sizes the types do not tell: a dim with no name (? in byoc info), or an "
                     "unknown shape or dtype")
    offloaded = sum(len(r["nodes"]) for r in report["regions"])
    total = offloaded + len(report["host_nodes"])
    lines.append(f"{len(report['regions'])} region(s), numbered from 0 as extract --region and "
                 f"bisect number them; {offloaded} of {total} nodes offloaded, "
                 f"{len(report['host_nodes'])} on the host")
    bodies = report.get("offload", {}).get("bodies", {})
    if bodies.get("nodes"):
        lines.append(f"inside If/Loop/Scan bodies: {bodies['offloaded']} of {bodies['nodes']} "
                     f"nodes offloaded ({offload_share(report):.0%})")
    if explain and report["host_nodes"]:
        lines.append("host nodes:")
        lines.extend(f"  {show(n)}: {show(report['reasons'].get(n, '?'))}"
                     for n in report["host_nodes"])
    return "\n".join(lines)


def offload_share(report: dict, where: str = "bodies") -> float:
    """The share of the nodes of ``where`` ("main" or "bodies") that run in regions."""
    count = report["offload"][where]
    return count["offloaded"] / count["nodes"] if count["nodes"] else 0.0


def _text(text: str, suffix: str = "") -> Cell:
    """``text``, shortened in the middle if need be, then ``suffix`` whole."""
    return len(text) + len(suffix), lambda width: _shorten(text, width - len(suffix)) + suffix


def _names(names: list[str]) -> Cell:
    """The first name (to shorten if need be) and how many more there are."""
    if not names:
        return _text("-")
    return _text(show(names[0]), f" (+{len(names) - 1})" if len(names) > 1 else "")


def _entries(entries: list[str]) -> Cell:
    """A list cut after a whole entry, not inside one, saying how many more there are (as a
    names cell does): ``90 Mul, 57 Conv (+28)``."""
    text = ", ".join(entries)

    def fit(width: int) -> str:
        if len(text) <= width:
            return text
        used = 0
        for k, entry in enumerate(entries):
            more = f" (+{len(entries) - k - 1})"
            used += len(entry) + (2 if k else 0)
            if used + len(more) > width:
                if k == 0:  # not even one whole entry: the first one shortened
                    return _shorten(entry, width - len(more)) + more
                return ", ".join(entries[:k]) + f" (+{len(entries) - k})"
        return text

    return len(text), fit


def _fit(lengths: list[list[int]], gap: int = 2) -> list[int]:
    """Column widths: each column's longest cell, the one furthest above its floor (``FLOORS``)
    cut one at a time until the row fits ``WIDTH``."""
    widths = [max(column) for column in lengths]
    floor = [w if f is None else min(w, max(f, len(h)))
             for h, f, w in zip(HEADER, FLOORS, widths)]
    while sum(widths) + gap * (len(widths) - 1) > WIDTH:
        k = max(range(len(widths)), key=lambda i: widths[i] - floor[i])
        if widths[k] <= floor[k]:
            break  # nothing left to give: the fixed columns alone are wider
        widths[k] -= 1
    return widths


def _shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: cut in the middle, where names are alike."""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    keep = width - 3
    return text[:keep - keep // 2] + "..." + text[len(text) - keep // 2:]


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n}B"
    return f"{n / 1024:.1f}KB" if n < 1024 ** 2 else f"{n / 1024 ** 2:.1f}MB"
