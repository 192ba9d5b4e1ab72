"""Profiles: time per node and per region, by ONNX node name, copies per boundary, hot spots,
and inside native and ccompiler regions the time of each fused kernel, by the ONNX nodes it
holds (those regions run a build that reads the clock after each kernel while profiling).

    report = profile(exe, inputs)             # medians over repeated debug runs
    print(format_profile(report))             # the table; report is JSON-ready
    write_chrome_trace(report, "trace.json")  # chrome://tracing or ui.perfetto.dev: kernels
                                              # nested in their region
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Mapping

import numpy as np

from .analysis import walk_orders
from .ir import Call, GlobalVar
from .placement import Places, node_places, self_times
from .report import show
from .runtime import Executable


def _places(exe: Executable) -> Places:
    """Span -> (where it ran, its control-flow parent): a region run on the host instead
    (``fallback="host"`` at its first call) counts for the host."""
    places = node_places(exe.mod)
    for name in exe.fallbacks:
        if name in places:
            places[name] = ("host", places[name][1])
    return places


def _timed_regions(exe: Executable) -> dict[str, object]:
    """Region name -> its compiled region, for those that time their kernels (native,
    ccompiler: a ``kernel_log``)."""
    from .runtime.fallback import HostOnFailure

    out = {}
    for name, fn in exe.external.items():
        region = fn.run if isinstance(fn, HostOnFailure) else fn
        if isinstance(getattr(region, "kernel_log", None), list):
            out[name] = region
    return out


def _region_spans(exe: Executable) -> dict[str, str]:
    """Span of each call of a region, in main or in a body -> the region's name."""
    return {e.span.name: e.op.name for _, _, order in walk_orders(exe.mod.main) for e in order
            if isinstance(e, Call) and isinstance(e.op, GlobalVar) and e.span is not None}


# Without a given repeat: timed runs until at least MIN_RUNS and MIN_SECONDS, at most MAX_RUNS
# (five calls' medians of a 5 ms model swung 10-20% from one profile to the next)
MIN_RUNS, MIN_SECONDS, MAX_RUNS = 5, 0.5, 50


def _more_runs(done: int, repeat: int | None, elapsed: float) -> bool:
    """Whether to time another run: ``repeat`` of them (at least one), or without it until
    MIN_RUNS and MIN_SECONDS are reached, MAX_RUNS at most."""
    if repeat is not None:
        return done < max(1, repeat)
    return done < MAX_RUNS and (done < MIN_RUNS or elapsed < MIN_SECONDS)


def profile(exe: Executable, inputs: Mapping[str, np.ndarray], repeat: int | None = None
            ) -> dict:
    """Run ``repeat`` timed debug runs (after one warm-up), or as many as MIN_RUNS, MIN_SECONDS
    and MAX_RUNS ask, and summarize them."""
    regions = _timed_regions(exe)
    for region in regions.values():
        region.profiling = True
    try:
        exe.run(inputs)  # builds the regions' timed variants
        exe.copy_stats.copies.clear()
        exe.copy_stats.bytes.clear()
        for region in regions.values():
            region.kernel_log.clear()
        runs, logs = [], []
        started = time.perf_counter()
        while _more_runs(len(runs), repeat, time.perf_counter() - started):
            run = exe.run(inputs, capture=[])
            # outputs held from run to run would make each run's fresh memory, and a kernel
            # writing an output would be timed with its page faults (a 3 MB one: 1.6 ms, not 0.4)
            run.outputs.clear()
            runs.append(run)
            logs.append({name: list(r.kernel_log) for name, r in regions.items()})
            for region in regions.values():
                region.kernel_log.clear()
    finally:
        for region in regions.values():
            region.profiling = False
    places = _places(exe)
    own = [self_times(r.times, places) for r in runs]  # nothing counted twice
    controls = {parent for _, parent in places.values() if parent is not None}
    ops: dict[str, str] = {}
    calls: Counter[str] = Counter()
    for name, op, _, _ in runs[0].events:
        ops[name] = op
        calls[name] += 1
    nodes = []
    for name in runs[0].times:
        where, parent = places.get(name, ("host", None))
        node = {"node": name, "op": ops.get(name, ""), "where": where,
                "time_s": statistics.median(o.get(name, 0.0) for o in own),
                "calls": calls[name]}
        if parent is not None:
            node["in"] = parent
        if name in controls:
            node["with_bodies_s"] = statistics.median(r.times.get(name, 0.0) for r in runs)
        nodes.append(node)
    total = sum(n["time_s"] for n in nodes) or 1.0
    for n in nodes:
        n["share"] = n["time_s"] / total
    by_where: dict[str, dict] = {}
    for n in nodes:
        row = by_where.setdefault(n["where"], {"nodes": 0, "time_s": 0.0})
        row["nodes"] += 1
        row["time_s"] += n["time_s"]
    for row in by_where.values():
        row["share"] = row["time_s"] / total
    stats = exe.copy_stats
    copies = [{"from": src, "to": dst, "copies": n // len(runs),
               "bytes": stats.bytes[(src, dst)] // len(runs)}
              for (src, dst), n in stats.copies.items()]
    first = runs[0]
    t0 = min((e[2] for e in first.events), default=0.0)
    trace = [{"name": name, "cat": places.get(name, ("host", None))[0], "ph": "X", "pid": 0,
              "tid": 0, "ts": (start - t0) * 1e6, "dur": seconds * 1e6, "args": {"op": op}}
             for name, op, start, seconds in first.events]
    kernels = _kernels(exe, logs, total)
    spans = _region_spans(exe)
    trace += _kernel_trace(spans, first.events, logs[0], t0)
    return {"total_s": total, "repeat": len(runs), "nodes": nodes, "where": by_where,
            "copies": copies, "hot_spots": _hot_spots(nodes, kernels, spans, total),
            "kernels": kernels, "trace": trace}


def _hot_spots(nodes: list[dict], kernels: list[dict], spans: dict[str, str],
               total: float, count: int = 10) -> list[dict]:
    """The ``count`` largest times, each counted once: a node's own time, and a region that
    timed its kernels split into them (each kernel once, with the ONNX nodes it holds) and its
    call's time outside them."""
    in_kernels: defaultdict[str, float] = defaultdict(float)
    for k in kernels:
        in_kernels[k["region"]] += k["time_s"]
    items: list[dict] = []
    split: defaultdict[str, list[dict]] = defaultdict(list)  # region -> its calls' nodes
    for n in nodes:
        region = spans.get(n["node"])
        (split[region] if region in in_kernels else items).append(n)
    for region, calls in split.items():
        rest = sum(n["time_s"] for n in calls) - in_kernels[region]
        if rest > 0:
            items.append({**calls[0], "op": "(outside its kernels)", "time_s": rest,
                          "share": rest / total, "region": region})
    items += [{"node": k["nodes"][0] if k["nodes"] else k["region"], "op": k["kernel"],
               "where": k["backend"], "time_s": k["time_s"], "share": k["share"],
               "kernel": k["kernel"], "region": k["region"], "nodes": k["nodes"]}
              for k in kernels if k["region"] in split]
    return sorted(items, key=lambda n: -n["time_s"])[:count]


def _kernels(exe: Executable, logs: list[dict[str, list]], total: float) -> list[dict]:
    """Each timed region's kernels: the median over runs of its time in a run (all calls)."""
    out = []
    for name in logs[0] if logs else ():
        calls = [log[name] for log in logs]
        if not calls[0]:
            continue
        labels = calls[0][0].kernels
        per_run = [np.sum([c.seconds for c in run if c.kernels == labels], axis=0)
                   if run else np.zeros(len(labels)) for run in calls]
        median = np.median(np.stack(per_run), axis=0)
        backend = exe.mod[name].attrs.get("Compiler", "") if name in exe.mod.functions else ""
        for (label, onnx_nodes), t in zip(labels, median):
            out.append({"region": name, "backend": backend, "kernel": label,
                        "nodes": list(onnx_nodes), "time_s": float(t),
                        "share": float(t) / total})
    return sorted(out, key=lambda k: -k["time_s"])


def _kernel_trace(spans: dict[str, str], events: list, log: dict[str, list],
                  t0: float) -> list[dict]:
    """The first run's kernels as trace events inside their region's event (same thread,
    within its time span: viewers nest them); ``spans``: region call spans -> region names."""
    pending = {name: list(calls) for name, calls in log.items()}
    out = []
    for span, _, _, _ in events:
        calls = pending.get(spans.get(span, ""))
        if not calls:
            continue
        call = calls.pop(0)
        start = call.start
        for (label, onnx_nodes), seconds in zip(call.kernels, call.seconds):
            out.append({"name": label, "cat": "kernel", "ph": "X", "pid": 0, "tid": 0,
                        "ts": (start - t0) * 1e6, "dur": float(seconds) * 1e6,
                        "args": {"region": spans[span], "nodes": list(onnx_nodes)}})
            start += float(seconds)
    return out


def format_profile(report: dict) -> str:
    """A plain-text table: where the time went, the ten hot spots, copies per boundary."""
    lines = [f"time in the nodes: {report['total_s'] * 1e3:.3f} ms a call (medians of "
             f"{report['repeat']} calls, each node timed; time between the nodes not counted)"]
    if any("in" in n for n in report["nodes"]):
        lines.append("nodes in If/Loop/Scan bodies count where they ran; an If, Loop or Scan "
                     "counts its own time, without its bodies'")
    lines += ["", f"{'where':<16}{'nodes':>7}{'ms':>11}{'share':>8}"]
    for where, row in sorted(report["where"].items(), key=lambda kv: -kv[1]["time_s"]):
        lines.append(f"{where:<16}{row['nodes']:>7}{row['time_s'] * 1e3:>11.3f}{row['share']:>8.1%}")
    lines += ["", "hot spots (a native/ccompiler region by its kernels, each counted once)",
              f"{'node':<40}{'op':<22}{'where':<14}{'calls':>6}{'ms':>10}{'share':>8}"]
    for n in report["hot_spots"]:
        more = f" (+{len(n['nodes']) - 1})" if len(n.get("nodes", ())) > 1 else ""
        name, op = show(n["node"]), show(n["op"])
        name = (name if len(name) + len(more) <= 38 else name[:35 - len(more)] + "...") + more
        op = op if len(op) <= 20 else op[:17] + "..."
        calls = str(n["calls"]) if "calls" in n else ""
        lines.append(f"{name!s:<40}{op:<22}{n['where']:<14}{calls:>6}"
                     f"{n['time_s'] * 1e3:>10.3f}{n['share']:>8.1%}")
    if report.get("kernels"):
        lines += ["", "kernels inside native/ccompiler regions",
                  f"{'kernel':<34}{'ONNX nodes':<40}{'ms':>10}{'share':>8}"]
        for k in report["kernels"][:15]:
            label = show(k["kernel"])
            label = label if len(label) <= 32 else label[:29] + "..."
            held = ", ".join(show(n) for n in k["nodes"][:3]) + (" ..." if len(k["nodes"]) > 3
                                                                  else "")
            held = held if len(held) <= 38 else held[:35] + "..."
            lines.append(f"{label:<34}{held:<40}{k['time_s'] * 1e3:>10.3f}{k['share']:>8.1%}")
    if report["copies"]:
        lines += ["", "copies per run"]
        for c in report["copies"]:
            lines.append(f"  {c['from']} -> {c['to']}: {c['copies']} copies, {c['bytes']:,} bytes")
    return "\n".join(lines)


def write_chrome_trace(report: dict, path: str, force: bool = False) -> None:
    """The first timed run as a Chrome trace (written beside, then renamed into place; an
    existing file replaced only with ``force``: ``byoc/files/outputs.py``)."""
    from .files.outputs import output_file

    with output_file(path, force=force) as tmp, open(tmp, "w") as f:
        json.dump({"traceEvents": report["trace"], "displayTimeUnit": "ms"}, f)
