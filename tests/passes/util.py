"""Helpers for the partitioning tests: test backends, hand-built graphs, running both ways."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

import byoc
from byoc.backend import Backend, get_backend, register_backend, unregister_backend
from byoc.ir import Call, Function, IRModule, Tuple, post_order


def make_backend(name: str, supports, **options) -> Backend:
    """A backend that runs its regions with the host kernels (the reference backend's compile)."""
    unregister_backend(name)
    return register_backend(name, supports=supports, compile=get_backend("reference").compile,
                            **options)


def module(outputs, params, names: Iterable[str] | None = None) -> IRModule:
    """An IRModule whose main returns ``outputs`` (one value or a list) over ``params``."""
    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    body = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
    names = list(names) if names is not None else [f"out{k}" for k in range(len(outs))]
    return IRModule({"main": Function(tuple(params), body, {"output_names": names})})


def random_inputs(mod: IRModule, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {p.name: rng.standard_normal(p.type.shape).astype(p.type.dtype)
            for p in mod.main.params}


def assert_same_run(original: IRModule, partitioned: IRModule, inputs=None) -> None:
    """The partitioned module computes what the original does, to the last bit (the test
    backends run the same host kernels)."""
    inputs = inputs if inputs is not None else random_inputs(original)
    want = byoc.build(original).run(inputs)
    got = byoc.build(partitioned).run(inputs)
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=0, err_msg=name)


def assert_fully_offloaded(mod: IRModule, backend: str) -> None:
    """Every call of main is a call of an external function of ``backend`` (TVM's check); an
    If, Loop or Scan stays on the host (issue 8), and every call of its bodies is checked."""
    from byoc.analysis import is_control_flow, walk_functions

    for _, func in walk_functions(mod.main):
        for e in post_order(func.body):
            if not isinstance(e, Call) or is_control_flow(e):
                continue
            assert isinstance(e.op, byoc.ir.GlobalVar), f"{e!r} runs on the host"
            assert mod[e.op.name].attrs["Compiler"] == backend


def region_spans(mod: IRModule) -> dict[str, set[str]]:
    """The spans of the nodes in each external function, composites opened up."""
    out = {}
    for name, func in mod.functions.items():
        if name == "main":
            continue
        spans, stack = set(), [func]
        while stack:
            for e in post_order(stack.pop().body):
                if isinstance(e, Call) and isinstance(e.op, Function):
                    stack.append(e.op)
                elif isinstance(e, Call) and e.span is not None:
                    spans.add(e.span.name)
        out[name] = spans
    return out
