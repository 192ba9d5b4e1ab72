"""What runs where in a partitioned module: the data of ``byoc partition``, as a dict and a table.

    {"regions": [{"name", "backend", "nodes": [ONNX node names], "inputs": [ONNX value names],
                  "outputs": [...], "op_types": {op: count}, "bytes_in", "bytes_out"}],
     "host_nodes": [ONNX node names], "reasons": {host node: why it stayed on the host}}

Bytes are what crosses a region's boundary per run (its arguments and results), from the types,
a symbolic dim (batch) counted as 1; None where a dim is unknown. Bound constants do not cross,
so they do not count.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .analysis import host_calls, node_key, recorded
from .ir import Call, Function, GlobalVar, IRModule, TensorType, TupleType, post_order


def partition_report(mod: IRModule) -> dict:
    """The regions, host nodes and host reasons of a partitioned module (JSON-ready)."""
    order = post_order(mod.main.body)
    regions = []
    for e in order:
        if isinstance(e, Call) and isinstance(e.op, GlobalVar):
            func = mod[e.op.name]
            calls = _calls(func)
            regions.append({
                "name": e.op.name, "backend": func.attrs.get("Compiler"),
                "nodes": [node_key(c) for c in calls],
                "inputs": [p.name for p in func.params],
                "outputs": list(func.attrs.get("output_names", [])),
                "op_types": dict(Counter(c.op_name for c in calls)),
                "bytes_in": _total(p.type for p in func.params),
                "bytes_out": _total([func.ret_type]),
            })
    host = [node_key(c) for c in host_calls(order)]
    reasons = recorded(mod)
    return {"regions": regions, "host_nodes": host,
            "reasons": {k: reasons[k] for k in host if k in reasons}}


def _calls(func: Function) -> list[Call]:
    """The ONNX nodes a region runs, composites opened up."""
    out: list[Call] = []
    for e in post_order(func.body):
        if isinstance(e, Call):
            out.extend(_calls(e.op) if isinstance(e.op, Function) else [e])
    return out


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


def format_table(report: dict, explain: bool = False) -> str:
    """The report as a table, one region a row; with ``explain``, each host node and why."""
    rows = [("region", "backend", "nodes", "op types", "inputs", "outputs", "bytes in/out")]
    for r in report["regions"]:
        ops = ", ".join(f"{n} {op}" if n > 1 else op for op, n in
                        sorted(r["op_types"].items(), key=lambda kv: (-kv[1], kv[0])))
        rows.append((r["name"], str(r["backend"]), str(len(r["nodes"])), _clip(ops, 40),
                     _names(r["inputs"]), _names(r["outputs"]),
                     f"{_size(r['bytes_in'])} / {_size(r['bytes_out'])}"))
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    offloaded = sum(len(r["nodes"]) for r in report["regions"])
    total = offloaded + len(report["host_nodes"])
    lines.append(f"{len(report['regions'])} region(s); {offloaded} of {total} nodes offloaded, "
                 f"{len(report['host_nodes'])} on the host")
    if explain and report["host_nodes"]:
        lines.append("host nodes:")
        lines.extend(f"  {n}: {report['reasons'].get(n, '?')}" for n in report["host_nodes"])
    return "\n".join(lines)


def _names(names: list[str]) -> str:
    if not names:
        return "-"
    more = f" (+{len(names) - 1})" if len(names) > 1 else ""
    return _clip(names[0], 24) + more


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n}B"
    return f"{n / 1024:.1f}KB" if n < 1024 ** 2 else f"{n / 1024 ** 2:.1f}MB"
