"""Properties of partition on random DAGs of 2 to 300 nodes with random support sets.

Checked by brute force against the original graph: regions are convex, the graph of regions and
host nodes has no cycle, no two regions of one backend could still merge without making one,
each node went to the first backend that takes it, and the partitioned module computes exactly
what the original does.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import byoc
from byoc import op
from byoc.ir import Call
from tests.passes.util import make_backend, module, random_inputs, region_spans

UNARY = ("Relu", "Abs", "Neg", "Sigmoid", "Tanh")
BINARY = ("Add", "Sub", "Mul", "Max", "Min")
NAMES = ("pa", "pb", "pc")
_SUPPORT: dict[str, set[str]] = {}  # each backend's ops, set per example
for _name in NAMES:
    make_backend(_name, lambda call, name=_name: call.op in _SUPPORT[name] or "not drawn")


@st.composite
def graphs(draw, max_nodes: int = 300):
    """A random DAG: (module, nodes by span, the support set of each backend in order)."""
    n = draw(st.integers(2, max_nodes) | st.integers(max_nodes - 30, max_nodes))  # big ones too
    inputs = [op.var(f"in{k}", (2, 3)) for k in range(draw(st.integers(1, 3)))]
    values: list = list(inputs)
    nodes = []
    for i in range(n):
        kind = draw(st.sampled_from(UNARY + BINARY))
        arity = 1 if kind in UNARY else 2
        # Mostly recent values, so graphs are deep as well as wide.
        picks = [values[max(0, len(values) - 1 - draw(st.integers(0, min(len(values) - 1, 12))))]
                 if draw(st.booleans()) else draw(st.sampled_from(values)) for _ in range(arity)]
        call = op.make_call(kind, *picks, span=f"n{i}")
        values.append(call)
        nodes.append(call)
    used = {id(a) for c in nodes for a in c.args}
    outputs = [c for c in nodes if id(c) not in used]
    outputs += draw(st.lists(st.sampled_from(nodes), max_size=3, unique_by=id))
    n_backends = draw(st.integers(1, 3))
    supports = [set(draw(st.lists(st.sampled_from(UNARY + BINARY), max_size=8)))
                for _ in range(n_backends)]
    return module(outputs, inputs), nodes, supports


def _partition(mod, supports):
    for name, ops in zip(NAMES, supports):
        _SUPPORT[name] = ops
    return byoc.partition(mod, backends=list(NAMES[:len(supports)]))


def _units(nodes, part):
    """Each node's unit (a region's name, or the node itself on the host) and the unit edges."""
    unit = {c.span.name: c.span.name for c in nodes}
    backend = {}
    for name, spans in region_spans(part).items():
        backend[name] = part[name].attrs["Compiler"]
        for s in spans:
            unit[s] = name
    edges = {(unit[a.span.name], unit[c.span.name]) for c in nodes for a in c.args
             if isinstance(a, Call) and unit[a.span.name] != unit[c.span.name]}
    return unit, backend, edges


def _reach(units: list[str], edges) -> tuple[dict[str, set], dict[str, set]]:
    """Descendants and ancestors of each unit, by a search from every unit (brute force)."""
    succ: dict[str, set[str]] = {u: set() for u in units}
    for a, b in edges:
        succ[a].add(b)
    desc = {}
    for u in units:
        seen, stack = set(), list(succ[u])
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                stack.extend(succ[v])
        assert u not in seen, f"{u} reaches itself: the regions and host nodes form a cycle"
        desc[u] = seen
    anc = {u: {v for v in units if u in desc[v]} for u in units}
    return desc, anc


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_regions_are_convex_acyclic_maximal_and_by_priority(case):
    mod, nodes, supports = case
    part = _partition(mod, supports)
    unit, backend, edges = _units(nodes, part)
    units = sorted(set(unit.values()))
    desc, anc = _reach(units, edges)
    regions = sorted(backend)
    for r in regions:  # convex: no path leaves the region and comes back
        assert not desc[r] & anc[r], f"{r} is not convex"
    for i, a in enumerate(regions):
        for b in regions[i + 1:]:
            if backend[a] == backend[b]:
                between = (desc[a] & anc[b]) | (desc[b] & anc[a])
                assert between, f"{a} and {b} could merge without a cycle"
    for c in nodes:  # the first backend that takes a node has it
        first = next((n for n, ops in zip(NAMES, supports) if c.op in ops), None)
        got = backend.get(unit[c.span.name])
        assert got == first, f"{c.span.name} ({c.op}) went to {got}, not {first}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_the_partitioned_module_computes_what_the_original_does(case):
    mod, _, supports = case
    part = _partition(mod, supports)
    inputs = random_inputs(mod)
    want = byoc.build(mod).run(inputs)
    got = byoc.build(part).run(inputs)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
