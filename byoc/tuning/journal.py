"""Where a budget stopped a tune, kept so that the same tune again stops at the same place.

A tune cut short by ``--budget`` depends on the clock: run again with its measurements cached,
it would get further in the same seconds, measure more and write another plan. So a tune that
the budget cut records, beside its measurements, how many of its budget checks passed before
the first that failed, and whether the final whole-model comparison ran. The same tune (same
model, tensors, options, atoms, search settings, budget, machine and thread setting) replays
those answers instead of reading the clock: the search, deterministic given its measurements,
takes the same steps, all from the cache, and writes the same plan. A larger budget is another
tune: it reads the clock and goes on from the cached measurements.

    clock = BudgetClock(budget, started, journal, key)
    clock.out_of_time()        # the search's checks: the clock, or the recorded answers
    clock.may_compare()        # the final comparison: in the budget, or as recorded
    clock.record()             # after the search: kept only if the budget cut something
"""

from __future__ import annotations

import time

from .cache import MeasurementCache

# the share of the budget the search may use; the rest is for the final comparison
SEARCH_SHARE = 0.8


class BudgetClock:
    """The budget's answers for one tune: from the clock, or replayed from the journal."""

    def __init__(self, budget: float | None, started: float,
                 journal: MeasurementCache | None, key: str | None):
        self.budget, self.started = budget, started
        self.journal = journal if budget is not None and key is not None else None
        self.key = key
        self.checks = 0  # checks answered "in time" so far
        self.stopped = False  # a check answered "out of time"
        self.compared: bool | None = None
        self.replay: dict | None = None
        if self.journal is not None:
            entry = self.journal.get(key)
            if entry is not None and isinstance(entry.get("checks"), int) \
                    and isinstance(entry.get("compared"), bool):
                self.replay = entry

    def out_of_time(self) -> bool:
        if self.budget is None:
            return False
        if self.stopped:
            return True
        if self.replay is not None:
            late = self.checks >= self.replay["checks"]
        else:
            late = time.perf_counter() - self.started > SEARCH_SHARE * self.budget
        if late:
            self.stopped = True
        else:
            self.checks += 1
        return late

    def may_compare(self) -> bool:
        if self.budget is None:
            self.compared = True
        elif self.replay is not None:
            self.compared = self.replay["compared"]
        else:
            self.compared = time.perf_counter() - self.started < self.budget
        return self.compared

    def record(self) -> None:
        """Keep this tune's answers if the budget cut the search or the comparison."""
        if self.journal is None or self.replay is not None:
            return
        if self.stopped or self.compared is False:
            self.journal.put(self.key, {"checks": self.checks,
                                        "compared": bool(self.compared)})
