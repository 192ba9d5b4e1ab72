"""The plan as a table (``byoc plan show``): what was measured, what was chosen and why."""

from __future__ import annotations

from ..report import show as printable


def _ms(t) -> str:
    return "-" if t is None else f"{t * 1e3:.3f}"


def _clip(text: str, width: int) -> str:
    text = printable(text)
    return text if len(text) <= width else text[:width - 3] + "..."


def format_plan(data: dict, nodes: bool = False) -> str:
    """The plan's header, its segments with the time of every option, its regions (and, with
    ``nodes``, every node and where it runs)."""
    model, latency = data["model"], data.get("latency", {})
    machine, threads = data.get("machine", {}), data.get("threads", {})
    lines = [f"plan for {printable(model.get('name') or 'a model')} ({model.get('nodes', '?')} "
             f"nodes, digest {model['digest'][:12]}), format {data['format']} v{data['version']}",
             f"measured on {printable(str(machine.get('cpu', '?')))}, {machine.get('cores', '?')}"
             f" core(s); threads: " + ", ".join(f"{k} {v}" for k, v in threads.items() if v != ""),
             f"backends: {', '.join(data['backends'])}; latency predicted "
             f"{_ms(latency.get('predicted_s'))} ms, measured {_ms(latency.get('measured_s'))} ms"]
    base = latency.get("baselines", {})
    if base:
        lines.append("whole model on one option: " + ", ".join(
            f"{k} {_ms(v)} ms" for k, v in base.items()))
    mix = latency.get("atom_mix_ratio")
    if mix is not None:
        lines.append(f"each atom on its fastest option, free crossings: {mix:.2f}x the best "
                     "single option (what any placement could gain at most)")
    compared = latency.get("compared")
    if compared:
        lines.append("timed against each other, alternating: " + ", ".join(
            f"{k} {_ms(v)} ms" for k, v in compared.items()))
    search = data.get("search", {})
    if search:
        lines.append(f"search: {search.get('atoms', '?')} atoms, {search.get('measured', '?')} "
                     f"candidates measured, " + ("complete" if search.get("complete")
                                                 else "stopped by the budget"))
    segments = data.get("segments", [])
    if segments:
        singles = ["host", *data["backends"]]
        number = {b: str(k) for k, b in enumerate(data["backends"], 1)}
        width = max(9, *(len(o) + 2 for o in singles))
        head = f"{'segment':<8}{'nodes':>6}  {'first .. last':<34}"
        head += "".join(f"{o:>{width}}" for o in singles) + f"{'best order':>17}"
        head += "   chosen / runner-up: why"
        lines += ["", "times in ms per option (* chosen); orders by backend number: "
                  + ", ".join(f"{n} {b}" for b, n in number.items()), head]
        for s in segments:
            span = _clip(f"{s['first']} .. {s['last']}", 34)
            row = f"{s['id']:<8}{s['nodes']:>6}  {span:<34}"
            for o in singles:
                t = _ms(s["time_s"].get(o))
                row += f"{(t + '*') if o == s['chosen'] else t:>{width}}"
            orders = [(t, o) for o, t in s["time_s"].items() if "," in o and t is not None]
            if orders:
                t, o = min(orders)
                short = ">".join(number.get(b, b) for b in o.split(","))
                cell = f"{_ms(t)}{'*' if o == s['chosen'] else ''} {short}"
            else:
                cell = "-"
            row += f"{cell:>17}"
            row += f"   {s['chosen']} / {s.get('runner_up') or '-'}: {printable(s.get('why', ''))}"
            lines.append(row)
    lines += ["", f"{'region':<8}{'backend':<14}{'nodes':>6}  {'first .. last':<40}inputs -> outputs"]
    for r in data["regions"]:
        span = _clip(f"{r['nodes'][0]} .. {r['nodes'][-1]}" if r["nodes"] else "", 40)
        ins = ", ".join(printable(t["name"]) for t in r.get("inputs", []))
        outs = ", ".join(printable(t["name"]) for t in r.get("outputs", []))
        lines.append(f"{r['id']:<8}{r['backend']:<14}{len(r['nodes']):>6}  {span:<40}"
                     f"{_clip(ins, 40)} -> {_clip(outs, 40)}")
    host = sum(1 for n in data["nodes"] if n["region"] == "host")
    lines.append(f"{'host':<8}{'':<14}{host:>6}  (nodes in no region)")
    for move in data.get("moves", []):
        lines.append(f"moved: region {move['region']} from {move['from']} to {move['to']}: "
                     f"{printable(move.get('why', ''))}")
    if nodes:
        backend = {r["id"]: r["backend"] for r in data["regions"]}
        lines += ["", f"{'node':<40}{'op':<20}{'segment':<9}{'region':<8}backend"]
        for n in data["nodes"]:
            lines.append(f"{_clip(n['node'], 39):<40}{_clip(n['op'], 19):<20}"
                         f"{n.get('segment', ''):<9}{n['region']:<8}"
                         f"{backend.get(n['region'], 'host')}")
    return "\n".join(lines)
