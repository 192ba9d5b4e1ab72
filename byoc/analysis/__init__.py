"""Analyses for partitioning: annotation markers, regions, convexity, names and host reasons."""

from .annotation import BEGIN, END, compiler_begin, compiler_end, is_annotation
from .bodies import (Scope, bodies, inner_scope, is_control_flow, map_bodies, scope_label,
                     walk_functions, walk_orders)
from .convexity import Units, contract, hull_gap, unit_order
from .explain import HOST_REASONS, completed, host_calls, recorded
from .names import describe, node_key, unique, value_name
from .regions import (HOST_TARGET, MARKED_HOST, IndexGraph, Regions, annotate, find_regions,
                      host_marked, numbered)

__all__ = [
    "BEGIN", "END", "HOST_REASONS", "HOST_TARGET", "IndexGraph", "MARKED_HOST", "Regions",
    "Scope", "Units", "annotate", "bodies", "compiler_begin", "compiler_end", "completed",
    "contract", "describe", "find_regions", "host_calls", "host_marked", "hull_gap",
    "inner_scope", "is_annotation", "is_control_flow", "map_bodies", "node_key", "numbered",
    "recorded", "scope_label", "unique", "unit_order", "value_name", "walk_functions",
    "walk_orders",
]
