"""Every gradient rule, by op name: the table the op registry reads into ``OpDef.gradient``.

One module per family; each lists its rules in a ``RULES`` dict at its end, and this is the one
place they are put together (no rule registers itself on import).
"""

from __future__ import annotations

from ..rule import GradientRule
from . import conv, elementwise, linear, norm, pool, reduce, shape, softmax

GRADIENTS: dict[str, GradientRule] = {
    **elementwise.RULES, **linear.RULES, **conv.RULES, **pool.RULES, **norm.RULES,
    **softmax.RULES, **shape.RULES, **reduce.RULES,
}

__all__ = ["GRADIENTS"]
