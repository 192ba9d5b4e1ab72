"""Hypothesis strategies for the rule tests: small shapes, broadcastable operands, seeds."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# A few examples per rule keep the default run in seconds; BYOC_FD_EXAMPLES=200 for a soak.
EXAMPLES = int(os.environ.get("BYOC_FD_EXAMPLES", "10"))
fd_settings = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                       suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**31 - 1)


def shapes(min_rank: int = 1, max_rank: int = 3, max_dim: int = 4) -> st.SearchStrategy:
    return st.lists(st.integers(1, max_dim), min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def broadcast_shapes(draw, n: int = 2, max_rank: int = 3) -> tuple[tuple[int, ...], ...]:
    """``n`` shapes that broadcast together: leading dims dropped and dims set to 1 at random."""
    full = draw(shapes(1, max_rank))
    out = []
    for _ in range(n):
        lead = draw(st.integers(0, len(full)))
        out.append(tuple(1 if draw(st.booleans()) else d for d in full[lead:]))
    return tuple(out)
