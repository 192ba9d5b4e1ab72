"""Op emitters by op name, gathered from one module per op family."""

from __future__ import annotations

from . import conv, elementwise, linalg, movement, normalize, pool, reduce
from .movement import VIEW_OPS

EMITTERS = {**elementwise.EMITTERS, **movement.EMITTERS, **linalg.EMITTERS, **conv.EMITTERS,
            **pool.EMITTERS, **normalize.EMITTERS, **reduce.EMITTERS}

__all__ = ["EMITTERS", "VIEW_OPS"]
