"""One self-contained HTML file: the graph view, its summary and the page that draws them.

    text = render_html(view, summary_, meta)   # view: graph_view; summary_: summary()

The page needs nothing but itself: the layout library (dagre, vendored under vendor/), the
drawing code (assets/report.js), the style and the data are inlined. Everything that comes from
the model is data, never markup: it is embedded as JSON with ``<``, ``>`` and ``&`` escaped (so
no name can close the script element) and the page puts it on screen as text only. A
Content-Security-Policy allows only the page's own scripts (by hash) and no connection at all.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources

DAGRE_VERSION = "3.1.3"
FOLD_ABOVE = 1500  # op nodes: above this, regions and control-flow nodes open folded

# Places get colours in the order backends were given; the host is always grey.
HOST_COLOR = "#c7c7c7"
PALETTE = ("#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#e15759", "#edc948",
           "#9c755f", "#ff9da7", "#8cd17d")


def _asset(*parts: str) -> str:
    return (resources.files("byoc.report").joinpath(*parts)).read_text(encoding="utf-8")


def colors(places: list[str]) -> dict[str, str]:
    """A colour per place: the host grey, each backend its own."""
    out = {"host": HOST_COLOR}
    for k, place in enumerate(p for p in dict.fromkeys(places) if p != "host"):
        out[place] = PALETTE[k % len(PALETTE)]
    return out


def json_for_script(data) -> str:
    """JSON that is inert inside a <script> element: no ``</script>``, no ``<!--``, and no
    line separators JavaScript would end a line at."""
    text = json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def render_html(view: dict, summary: dict, meta: dict, plan: dict | None = None) -> str:
    """The report page as one string."""
    places = list(meta.get("backends", [])) + sorted({n["where"] for n in view["nodes"]})
    ops = sum(1 for n in view["nodes"] if n["kind"] == "op")
    folded = [b["id"] for b in view["boxes"] if b["kind"] in ("region", "control")] \
        if ops > FOLD_ABOVE else []
    data = {"meta": {**meta, "colors": colors(places), "folded": folded,
                     "dagre": DAGRE_VERSION},
            "graph": view, "summary": summary, "plan": plan}
    dagre = _asset("vendor", "dagre.min.js")
    app = _asset("assets", "report.js")
    style = _asset("assets", "report.css")
    for name, code in (("dagre", dagre), ("report.js", app), ("report.css", style)):
        if re.search(r"</(script|style)", code, re.IGNORECASE):
            raise AssertionError(f"{name} would end its element early")
    csp = (f"default-src 'none'; script-src {_sha256(dagre)} {_sha256(app)}; "
           f"style-src {_sha256(style)}; img-src data:; connect-src 'none'; "
           "form-action 'none'; base-uri 'none'")
    title = f"byoc report: {meta.get('model', 'model')}"
    parts = {
        "CSP": html.escape(csp), "TITLE": html.escape(title), "STYLE": style,
        "DATA": json_for_script(data), "DAGRE": dagre, "APP": app,
    }
    page = _asset("assets", "report.html")
    # One pass, so a placeholder inside the substituted text is never substituted again.
    return re.sub(r"@@(\w+)@@", lambda m: parts[m.group(1)], page)
