"""The numbers a report shows beside its graph, and the times it writes onto the graph.

    summary(view, table, prof)   # view: graph_view; table: partition_report; prof: profile()
    {"where": [{"where", "nodes", "time_s", "share"}], "regions": [{"name", "backend", "box",
      "nodes", "bytes_in", "bytes_out", "time_s"}], "copies": [...], "hot_spots": [...],
     "total_s", "repeat"}

Nodes per place count the ONNX nodes drawn (those inside If/Loop/Scan bodies too, the control-flow
node itself on the host). Times come from ``byoc.profile`` when there is one (``None``
otherwise): a host node's own time, a region's time as one call, copies between devices. A
profile entry named after an ONNX node inside a region (per-kernel times) is that node's time.
"""

from __future__ import annotations

from collections import Counter


def attach_times(view: dict, prof: dict | None) -> None:
    """Write each profiled node's and region's median time into the view (``time_s``)."""
    if not prof:
        return
    by_name = {n["name"]: n for n in view["nodes"] if n["kind"] == "op"}
    regions = {b["name"]: b for b in view["boxes"] if b["kind"] == "region"}
    for entry in prof["nodes"]:
        target = by_name.get(entry["node"]) or regions.get(entry["node"])
        if target is not None:
            target["time_s"] = entry["time_s"]


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
    if prof:
        ids = {n["name"]: ("node", n["id"]) for n in view["nodes"] if n["kind"] == "op"}
        ids.update({name: ("box", b["id"]) for name, b in boxes.items()})
        for h in prof["hot_spots"]:
            kind, target = ids.get(h["node"], (None, None))
            # a region inside a body runs on its backend, whatever the profile's walk of main says
            place = boxes[h["node"]]["where"] if kind == "box" else h["where"]
            hot.append({"name": h["node"], "op": h["op"], "where": place,
                        "time_s": h["time_s"], "share": h["share"], "kind": kind,
                        "target": target})
    return {"where": where, "regions": regions, "copies": list(prof["copies"]) if prof else [],
            "hot_spots": hot, "total_s": total, "repeat": prof["repeat"] if prof else None}
