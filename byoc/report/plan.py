"""What a plan from ``byoc tune`` measured, laid beside the graph it placed.

    rows = plan_view(plan.data, view)    # plan: byoc.Plan (docs/plan-format.md); view: graph_view
    {"summary": [lines], "segments": [{"id", "first", "last", "nodes", "times", "errors",
                                       "chosen", "runner_up", "why"}]}

Each drawn ONNX node and region box gets ``segment``: the index of the measured segment it came
from, so the page shows a region's (or a host node's) time on every candidate backend and why
the chosen one won.
"""

from __future__ import annotations


def plan_view(data: dict, view: dict) -> dict:
    segments = list(data.get("segments", []))
    index = {s["id"]: k for k, s in enumerate(segments)}
    segment_of = {n["node"]: index.get(n.get("segment")) for n in data.get("nodes", [])}
    for n in view["nodes"]:
        if n["kind"] == "op" and segment_of.get(n["name"]) is not None:
            n["segment"] = segment_of[n["name"]]
    for n in view["nodes"]:  # a region's box: the segment of the nodes it holds
        box = n["box"]
        if n.get("segment") is not None and box is not None:
            b = view["boxes"][box]
            if b["kind"] == "region":
                b.setdefault("segment", n["segment"])
    rows = [{"id": s["id"], "first": s.get("first"), "last": s.get("last"),
             "nodes": s.get("nodes"), "times": dict(s.get("time_s", {})),
             "errors": dict(s.get("errors", {})), "chosen": s.get("chosen"),
             "runner_up": s.get("runner_up"), "why": s.get("why", "")} for s in segments]
    return {"summary": _summary(data), "segments": rows}


def _summary(data: dict) -> list[str]:
    lines = []
    latency = data.get("latency", {})
    predicted, measured = latency.get("predicted_s"), latency.get("measured_s")
    if predicted is not None:
        text = f"predicted {predicted * 1e3:.3f} ms per run"
        if measured is not None:
            text += f", measured {measured * 1e3:.3f} ms"
        lines.append(text)
    best = latency.get("compared_with") or {}
    if best.get("option") and best.get("measured_s") is not None:
        lines.append(f"fastest single option: {best['option']} at "
                     f"{best['measured_s'] * 1e3:.3f} ms (timed beside the plan)")
    search = data.get("search", {})
    if search:
        lines.append(f"searched {search.get('atoms', '?')} pieces over "
                     f"{', '.join(search.get('options', [])) or 'the host'}; "
                     f"{search.get('measured', '?')} candidates measured"
                     + ("" if search.get("complete", True) else "; stopped by --budget"))
    machine, threads = data.get("machine", {}), data.get("threads", {})
    if machine:
        lines.append(f"measured on {machine.get('cpu', '?')}, "
                     f"{threads.get('threads', '?')} thread(s)")
    for move in data.get("moves", []):
        lines.append(f"moved {move.get('region')} from {move.get('from')} to {move.get('to')}: "
                     f"{move.get('why')}")
    return lines
