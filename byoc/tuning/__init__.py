"""Measured placement: ``byoc.tune`` finds where each part of a model runs fastest and writes
it as a plan people can read, edit, diff and replay (docs/plan-format.md).

    plan = byoc.tune(mod, ["native", "onnxruntime"], inputs)   # measures, cached
    plan.save("plan.json"); print(plan.show())
    part = byoc.partition(mod, plan="plan.json")               # replays, measures nothing

Modules: ``view`` (main's nodes, names and fingerprints), ``candidates`` (atoms, segments as
functions), ``digest`` (content keys), ``environment`` (machine, threads, versions),
``measure`` and ``cache`` (timing candidates, cached on disk), ``search`` (the dynamic
program), ``tuner`` (the whole tune), ``plan`` and ``show`` (the file and its table), ``apply``
(a plan onto a model, refusing what is not legal).
"""

from .apply import apply_plan
from .cache import MeasurementCache
from .plan import Plan, PlanError
from .tuner import Progress, tune

__all__ = ["MeasurementCache", "Plan", "PlanError", "Progress", "apply_plan", "tune"]
