"""Control flow a backend runs whole: an If, Loop or Scan given, bodies and all, to a backend
registered with ``control_flow=True`` (an engine that runs ONNX graphs, as onnxruntime) when
that backend takes every call of its bodies, at any depth.

Otherwise the host runs the call and each body is partitioned on its own: a model of small
branches (silero VAD: 25 If nodes around its LSTMs) then pays a host If and a region call or
more per branch, 12x onnxruntime's time for the whole model on the onnxruntime backend.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..analysis import bodies, is_control_flow, node_key
from ..backend import Backend
from ..ir import Call, Expr, Function, post_order


def whole_control_flow(order: list[Expr], backends: Sequence[Backend],
                       verdicts: dict[tuple[int, str], bool]) -> dict[str, str]:
    """{node name: backend} for the control-flow calls of ``order`` a backend runs whole, the
    first of ``backends`` (priority order) that can. ``verdicts`` remembers each body's answer
    per backend, so that nested bodies asked again from their parents' partitioning (the
    calls not given whole) are walked once."""
    able = [b for b in backends if b.control_flow]
    whole: dict[str, str] = {}
    if not able:
        return whole
    for e in order:
        if isinstance(e, Call) and e.attrs and is_control_flow(e):
            for b in able:
                if all(_takes(body, b, verdicts) for _, body in bodies(e)):
                    whole[node_key(e)] = b.name
                    break
    return whole


def _takes(body: Function, backend: Backend, verdicts: dict[tuple[int, str], bool]) -> bool:
    """Whether ``backend`` takes every call of ``body`` and of the bodies inside it."""
    key = (id(body), backend.name)
    if key not in verdicts:
        verdicts[key] = all(
            all(_takes(inner, backend, verdicts) for _, inner in bodies(e))
            if e.attrs and is_control_flow(e)
            else isinstance(e.op, str) and backend.check(e) is True
            for e in post_order(body.body) if isinstance(e, Call))
    return verdicts[key]
