"""Where a model ran: nodes and time per backend, the host included, so fallback is never silent.

    {"host": {"nodes": 3, "node_share": 0.09, "time_s": 0.0011, "time_share": 0.12},
     "ccompiler": {...}, "copies": {"time_s": ..., "time_share": ...},
     "executor": {"time_s": ..., "time_share": ...}}   # the rest of the call, given its time

Times count each node once: a node in an If, Loop or Scan body runs (and is timed) inside its
control-flow node, so that node's own time is what it took less its bodies' nodes
(``self_times``), and a region inside a body counts for its backend, not for the host.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from .analysis import walk_orders
from .ir import Call, Function, GlobalVar, IRModule, post_order

#: span -> (where it runs: a region's backend, "copy" or "host"; the span of the control-flow
#: node whose body holds it, None in main)
Places = dict[str, tuple[str, str | None]]


def node_places(mod: IRModule) -> Places:
    """Where every call of main and of every If/Loop/Scan body in it runs, by span, and which
    control-flow node runs it (its parent)."""
    out: Places = {}
    for scope, _, order in walk_orders(mod.main):
        parent = scope[-2] if scope else None
        for e in order:
            if not isinstance(e, Call) or e.span is None:
                continue
            if isinstance(e.op, GlobalVar) and e.op.name in mod.functions:
                where = mod[e.op.name].attrs.get("Compiler") or "host"
            elif e.op == "device_copy":
                where = "copy"
            else:
                where = "host"
            out[e.span.name] = (where, parent)
    return out


def self_times(times: Mapping[str, float], places: Places) -> dict[str, float]:
    """Each node's own time, from a debug run's times by span: a control-flow node's time less
    that of the nodes its bodies ran (timed too, inside it), never below 0; others as they are.
    The result adds up to the time of main's nodes: nothing is counted twice."""
    inner: defaultdict[str, float] = defaultdict(float)
    for name, t in times.items():
        parent = places.get(name, ("host", None))[1]
        if parent is not None:
            inner[parent] += t
    return {name: max(0.0, t - inner[name]) if name in inner else t
            for name, t in times.items()}


def _calls(func: Function) -> int:
    """Calls in a function, composites and control-flow bodies counted by what they hold."""
    count = 0
    stack = [func]
    while stack:
        f = stack.pop()
        for e in post_order(f.body):
            if isinstance(e, Call) and e.op != "device_copy":
                if isinstance(e.op, Function):
                    stack.append(e.op)
                elif not isinstance(e.op, GlobalVar):
                    count += 1
                stack.extend(v for v in e.attrs.values() if isinstance(v, Function))
    return count


def placement(mod: IRModule, times: dict[str, float] | None = None,
              total_s: float | None = None) -> dict[str, dict]:
    """Nodes (and, given a debug run's times by span, seconds) per backend. Given the call's
    wall time too, the rest of it (the executor's work between nodes) is an "executor" row, and
    the shares are of that whole call, so the rows add up to it."""
    nodes: Counter[str] = Counter()
    seconds: Counter[str] = Counter()
    region_backend = {name: f.attrs["Compiler"] for name, f in mod.functions.items()
                      if name != "main" and f.attrs.get("Compiler")}
    for name, backend in region_backend.items():
        nodes[backend] += _calls(mod[name])
    nodes["host"] += _calls(mod.main)
    if times is not None:
        places = node_places(mod)
        for name, t in self_times(times, places).items():
            where = places.get(name, ("host", None))[0]
            seconds["copies" if where == "copy" else where] += t
    if times is not None and total_s is not None:
        seconds["executor"] = max(0.0, total_s - sum(seconds.values()))
    total_nodes = sum(nodes.values()) or 1
    total_time = sum(seconds.values()) or 1.0
    out: dict[str, dict] = {}
    order = {"host": 1, "copies": 2, "executor": 3}
    for where in sorted(set(nodes) | set(seconds), key=lambda w: (order.get(w, 0), w)):
        row: dict = {}
        if where not in ("copies", "executor"):
            row["nodes"] = nodes[where]
            row["node_share"] = nodes[where] / total_nodes
        if times is not None:
            row["time_s"] = seconds[where]
            row["time_share"] = seconds[where] / total_time
        out[where] = row
    return out


def format_placement(rows: dict[str, dict], indent: str = "  ") -> str:
    """One line per place: 'ccompiler  30 nodes (91%)  4.1 ms (88% of the time)'; the executor's
    row says what it is."""
    lines = []
    for where, row in rows.items():
        text = f"{indent}{where:<12}"
        if "nodes" in row:
            text += f"{row['nodes']:>6} nodes " + f"({row['node_share']:.0%})".ljust(6)
        else:
            text += " " * 19
        if "time_s" in row:
            text += f"  {row['time_s'] * 1e3:8.2f} ms ({row['time_share']:.0%} of the time)"
        if where == "executor":
            text += "  between the nodes"
        lines.append(text)
    return "\n".join(lines)
