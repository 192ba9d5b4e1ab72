"""What runs where, for people: the ``byoc partition`` table (table.py) and the ``byoc report``
page, one self-contained HTML file (graph.py: the nodes and boxes drawn; summary.py: the numbers
beside them; html.py: the page; page.py: all of it from a partitioned module)."""

from .table import format_table, offload_share, partition_report, show

__all__ = ["format_table", "html_report", "offload_share", "partition_report", "show"]


def html_report(*args, **kwargs) -> str:
    """The report page of a partitioned module (see ``byoc.report.page.html_report``)."""
    # the page's modules load only when a page is made
    from .page import html_report as build

    return build(*args, **kwargs)
