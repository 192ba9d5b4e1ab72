"""Automatic differentiation of byoc modules: ``byoc.gradient(mod, loss=..., wrt=[...])``.

    grad_mod = byoc.gradient(mod, loss="loss", wrt=["w1", "b1"])
    out = byoc.build(grad_mod).run({"x": x, "w1": w1, "b1": b1})
    out["loss"], out["grad:w1"], out["grad:b1"]

Initializers named in ``wrt`` become parameters of the new main under their own names, their
stored values kept as defaults (``byoc.ir.DEFAULTS``): ``run({"x": x})`` uses the model's
weights, and a training loop feeds the current ones; the gradients follow main's outputs, named
``grad:<name>``.

``reverse`` holds the algorithm, ``rules/`` one gradient rule per op (read by the op registry
into ``OpDef.gradient``), ``recompute`` the mirror option, ``memory`` the liveness report.
"""

from .memory import MemoryReport, measure_memory
from .reverse import backprop, gradient
from .rule import Backward, GradientError, GradientRule

__all__ = ["Backward", "GradientError", "GradientRule", "MemoryReport", "backprop", "gradient",
           "measure_memory"]
