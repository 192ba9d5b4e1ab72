"""Why each node stayed on the host: a ``{node name: reason}`` record kept in the module's attrs.

The annotate passes write it (each backend's refusal, "outside the range"), region rejection
adds to it, and partition_graph completes it so that every host node of main has a reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import ByocError
from ..ir import Call, Expr, GlobalVar, IRModule
from .names import node_key

HOST_REASONS = "host_reasons"
NOT_ANNOTATED = "not in any annotated region"


def host_calls(order: Iterable[Expr]) -> list[Call]:
    """The calls the host runs: every call but those of external functions."""
    return [e for e in order if isinstance(e, Call) and not isinstance(e.op, GlobalVar)]


def completed(order: Iterable[Expr], reasons: Mapping[str, str]) -> dict[str, str]:
    """A reason for exactly the host calls in ``order``: the recorded one, or NOT_ANNOTATED."""
    return {key: reasons.get(key, NOT_ANNOTATED) for key in map(node_key, host_calls(order))}


def recorded(mod: IRModule) -> dict[str, str]:
    """The record of a partitioned module; an error for a module that was never partitioned."""
    reasons = mod.attrs.get(HOST_REASONS)
    if reasons is None:
        raise ByocError("this module was not partitioned: run byoc.partition(mod, backends=[...]) "
                        "first")
    return dict(reasons)
