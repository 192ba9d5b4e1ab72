"""A report page from a partitioned module, its profile and its plan.

    part = byoc.partition(mod, backends=["ccompiler"])
    text = html_report(part, model="model.onnx", backends=["ccompiler"], profile=prof)
    data = report_data(part, ...)   # what the page holds: {"view", "summary", "meta", "plan"}
"""

from __future__ import annotations

from ..analysis import HOST_REASONS
from ..ir import IRModule
from .graph import graph_view
from .html import render_html
from .plan import plan_view
from .summary import attach_times, summary
from .table import partition_report


def html_report(part: IRModule, **kwargs) -> str:
    """The page: ``part`` drawn (a module never partitioned is drawn all on the host), with the
    times of ``profile`` (``byoc.profile``) and the measurements of ``plan`` if given."""
    return render_page(report_data(part, **kwargs))


def render_page(data: dict) -> str:
    return render_html(data["view"], data["summary"], data["meta"], data["plan"])


def report_data(part: IRModule, *, model: str = "model", backends: list[str] | tuple = (),
                profile: dict | None = None, plan=None,
                dims: dict[str, int] | None = None) -> dict:
    """Everything the page shows, JSON-ready. ``plan``: a ``byoc.Plan``, its dict or a path."""
    partitioned = HOST_REASONS in part.attrs
    reasons = dict(part.attrs[HOST_REASONS]) if partitioned else {}
    view = graph_view(part, reasons, dims)
    if not partitioned:
        for n in view["nodes"]:
            if n["kind"] == "op":
                n["reason"] = "no backend was given (--backend)"
    table = partition_report(part) if partitioned else None
    attach_times(view, profile)
    if plan is not None:
        from ..tuning.plan import Plan

        plan = plan_view(Plan.load(plan).data, view)
    meta = {"model": model, "backends": list(backends), "profiled": profile is not None,
            "dims": dict(dims or {})}
    return {"view": view, "summary": summary(view, table, profile), "meta": meta, "plan": plan}
