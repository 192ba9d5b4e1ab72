"""collector_paused: the cyclic collector is off inside, restored after, and what the block
built is not walked again as young objects by the first allocation after it."""

import gc

import pytest

from byoc.ir.collector import collector_paused


class _Node:
    def __init__(self, kids):
        self.kids = kids


def _build(n):
    return [_Node([]) for _ in range(n)]


def test_paused_inside_and_restored_after_even_on_error():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with collector_paused():
            assert not gc.isenabled()
            raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_objects_built_inside_are_not_walked_as_young_afterwards():
    collections = []

    def record(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(record)
    try:
        with collector_paused():
            built = _build(50_000)
        after = [[] for _ in range(10)]  # allocations after the block, as a caller's would be
    finally:
        gc.callbacks.remove(record)
    # Without the promotion the block's 50,000 objects count as young, and the first
    # allocation after it walks them all (a generation-0 collection here).
    assert collections == []
    assert len(after) == 10
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(n) in oldest for n in (built[0], built[-1]))  # promoted, not left young


def test_garbage_cycles_made_inside_are_still_collected():
    with collector_paused():
        a = _Node([])
        a.kids.append(a)
        del a
    assert gc.collect() >= 1


def test_objects_the_program_froze_stay_frozen():
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            _build(1_000)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
