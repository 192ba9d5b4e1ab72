"""The numbers a report shows beside its graph, and the times it writes onto the graph.

    summary(view, table, prof)   # view: graph_view; table: partition_report; prof: profile()
    {"where": [{"where", "nodes", "time_s", "share"}], "regions": [{"name", "backend", "box",
      "nodes", "bytes_in", "bytes_out", "time_s"}], "copies": [...], "hot_spots": [...],
     "kernels": [{"kernel", "region", "backend", "time_s", "share", "nodes": [node ids]}],
     "total_s", "repeat"}

Nodes per place count the ONNX nodes drawn (those inside If/Loop/Scan bodies too, the control-flow
node itself on the host). Times come from ``byoc.profile`` when there is one (``None``
otherwise) and count each node once: a host node's own time (an If, Loop or Scan's without its
bodies', whose nodes count where they ran; ``with_bodies_s`` has both), a region's time as its
calls' (``calls`` of them in a run, in a Loop body many), copies between devices. Inside a
native or ccompiler region each fused kernel is timed: every ONNX node it holds gets the
kernel's index in ``kernels`` (the time is the kernel's, shared by its nodes, not each node's
own), and the hot spots list the kernel once instead of its region.
"""

from __future__ import annotations

from collections import Counter


def attach_times(view: dict, prof: dict | None) -> None:
    """Write each profiled node's and region's median time into the view (``time_s``, and
    ``calls``, ``with_bodies_s`` where they tell something), and on each node held by a timed
    kernel that kernel's index in ``prof["kernels"]`` (``kernels``)."""
    if not prof:
        return
    by_name = {n["name"]: n for n in view["nodes"] if n["kind"] == "op"}
    regions = {b["name"]: b for b in view["boxes"] if b["kind"] == "region"}
    for entry in prof["nodes"]:
        target = by_name.get(entry["node"]) or regions.get(entry["node"])
        if target is not None:
            target["time_s"] = entry["time_s"]
            if entry.get("calls", 1) != 1:
                target["calls"] = entry["calls"]
            if "with_bodies_s" in entry:
                target["with_bodies_s"] = entry["with_bodies_s"]
    for k, kernel in enumerate(prof.get("kernels", ())):
        for name in kernel["nodes"]:
            if name in by_name:
                by_name[name].setdefault("kernels", []).append(k)


def summary(view: dict, table: dict | None, prof: dict | None) -> dict:
    """Nodes and time per place, regions and the bytes crossing them, copies, hot spots."""
    counts = Counter(n["where"] for n in view["nodes"] if n["kind"] == "op")
    times = prof["where"] if prof else {}
    total = prof["total_s"] if prof else None
    places = sorted(set(counts) | set(times), key=lambda w: (w == "copy", w == "host", w))
    where = [{"where": w, "nodes": counts.get(w, 0),
              "time_s": times[w]["time_s"] if w in times else None,
              "share": times[w]["share"] if w in times else None} for w in places]
    boxes = {b["name"]: b for b in view["boxes"] if b["kind"] == "region"}
    regions = []
    for r in (table or {}).get("regions", []):
        box = boxes.get(r["name"], {})
        regions.append({"name": r["name"], "backend": r["backend"], "box": box.get("id"),
                        "nodes": len(r["nodes"]), "bytes_in": r["bytes_in"],
                        "bytes_out": r["bytes_out"], "time_s": box.get("time_s")})
    hot = []
    kernels = []
    if prof:
        ids = {n["name"]: n["id"] for n in view["nodes"] if n["kind"] == "op"}
        for h in prof["hot_spots"]:
            if h["node"] in boxes and "kernel" not in h:  # a region, or its time outside kernels
                kind, targets = "box", [boxes[h["node"]]["id"]]
            else:  # a node, or a kernel: the nodes it holds
                drawn = [ids[n] for n in h.get("nodes", [h["node"]]) if n in ids]
                kind, targets = ("node", drawn) if drawn else (None, [])
            hot.append({"name": h["node"], "op": h["op"], "where": h["where"],
                        "time_s": h["time_s"], "share": h["share"], "kind": kind,
                        "target": targets[0] if targets else None, "targets": targets,
                        "kernel": h.get("kernel"), "nodes": len(h.get("nodes", [h["node"]])),
                        "calls": h.get("calls")})
        for k in prof.get("kernels", ()):
            kernels.append({"kernel": k["kernel"], "region": k["region"],
                            "backend": k["backend"], "time_s": k["time_s"],
                            "share": k["share"], "nodes": [ids[n] for n in k["nodes"] if n in ids],
                            "held": len(k["nodes"])})
    return {"where": where, "regions": regions, "copies": list(prof["copies"]) if prof else [],
            "hot_spots": hot, "kernels": kernels, "total_s": total,
            "repeat": prof["repeat"] if prof else None}
