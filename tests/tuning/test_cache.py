"""The measurement cache: a second tune measures nothing new, shared work is reused, entries
are checked before use, and keys change with what decides a time."""

from __future__ import annotations

import json
import os
import stat
import time

import numpy as np
import pytest

import byoc
from byoc.tuning import MeasurementCache
from byoc.tuning import measure as measure_mod

from .util import chain_model, fake_backends

OPS = ["Relu", "Abs", "Neg", "Sigmoid", "Relu"]
INPUTS = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
TAKES = {"fa": {"Relu", "Abs"}, "fb": {"Neg", "Sigmoid", "Relu"}}


def tune(model, cache, **kw):
    seen = []
    plan = byoc.tune(byoc.load_onnx(model), ["fa", "fb"], INPUTS, atoms=4, cache=cache,
                     progress=seen.append, **kw)
    return plan, seen[-1]


@pytest.fixture
def backends():
    with fake_backends(**TAKES):
        yield


def test_a_second_tune_measures_nothing_and_writes_the_same_bytes(backends, tmp_path):
    cache = MeasurementCache(tmp_path)
    first, p1 = tune(chain_model(OPS), cache)
    assert p1.measured > 0
    second, p2 = tune(chain_model(OPS), cache)
    assert p2.measured == 0 and p2.cached > 0
    assert second.to_json() == first.to_json()
    third, _ = tune(chain_model(OPS), MeasurementCache(tmp_path))
    assert third.to_json() == first.to_json()


def test_a_model_with_the_same_work_reuses_every_measurement(backends, tmp_path):
    cache = MeasurementCache(tmp_path)
    tune(chain_model(OPS), cache)
    renamed = chain_model(OPS, name="other")
    for k, node in enumerate(renamed.graph.node):
        node.name = f"layer{k}"  # other node names, the same work
    plan, p = tune(renamed, cache)
    assert p.measured == 0
    assert plan.data["nodes"][0]["node"] == "layer0"


def test_a_model_sharing_some_regions_reuses_those(backends, tmp_path):
    cache = MeasurementCache(tmp_path)
    _, p1 = tune(chain_model(OPS), cache)
    _, p2 = tune(chain_model(OPS[:3] + ["Abs", "Abs"]), cache)
    assert 0 < p2.measured < p1.measured
    assert p2.cached > 0


def entries(root) -> list:
    return sorted(p for p in (root / "tune").rglob("*.json"))


def test_entries_are_private_and_checked_before_use(backends, tmp_path):
    cache = MeasurementCache(tmp_path)
    first, p1 = tune(chain_model(OPS), cache)
    files = entries(tmp_path)
    assert len(files) >= p1.measured
    assert stat.S_IMODE(os.stat(tmp_path / "tune").st_mode) == 0o700
    assert not [p for p in (tmp_path / "tune").rglob(".entry-*")], "temporary files left"
    # a truncated entry, a hand-edited time, an entry under another key's name
    files[0].write_text(files[0].read_text()[:20])
    data = json.loads(files[1].read_text())
    data["payload"]["seconds"] = 1e-12
    files[1].write_text(json.dumps(data))
    files[3].write_text(files[2].read_text())
    intact = {f: f.read_bytes() for f in files[4:]}
    _, p2 = tune(chain_model(OPS), cache)
    # each damaged entry is measured again and the others reused; a repaired time can steer
    # the search to a candidate the first tune never measured, which adds a new entry
    assert p2.measured >= 3
    assert len(entries(tmp_path)) == len(files) + p2.measured - 3
    assert all(f.read_bytes() == data for f, data in intact.items()), "an intact entry rewritten"
    for f in files[:4]:  # and written back whole
        entry = json.loads(f.read_text())
        assert entry["key"] == f.stem


def test_cache_off_measures_everything(backends, tmp_path):
    tune(chain_model(OPS), MeasurementCache(tmp_path))
    _, p = tune(chain_model(OPS), MeasurementCache(tmp_path, enabled=False))
    assert p.measured > 0 and p.cached == 0
    assert not entries(tmp_path / "nothing")


@pytest.mark.parametrize("what", ["threads", "machine", "inputs"])
def test_keys_change_with_what_decides_a_time(backends, tmp_path, monkeypatch, what):
    cache = MeasurementCache(tmp_path)
    tune(chain_model(OPS), cache, threads=1)
    kw = {"threads": 1}
    if what == "threads":
        kw["threads"] = 3
    elif what == "machine":
        monkeypatch.setattr(measure_mod, "machine", lambda: {"cpu": "another"})
    else:
        global INPUTS
        monkeypatch.setitem(globals(), "INPUTS", {"x": np.ones((4, 8), np.float32)})
    _, p = tune(chain_model(OPS), cache, **kw)
    if what == "inputs":  # float values do not decide the time: same shapes, same keys
        assert p.measured == 0
    else:
        assert p.measured > 0


def test_an_unwritable_cache_warns_once_and_tuning_goes_on(backends, tmp_path):
    root = tmp_path / "ro"
    root.mkdir(mode=0o700)
    (root / "tune").write_text("a file where the folder should be")
    with pytest.warns(RuntimeWarning, match="cannot write the tune cache") as record:
        plan, p = tune(chain_model(OPS), MeasurementCache(root))
    assert p.measured > 0 and plan.data["latency"]["measured_s"] is not None
    assert sum("tune cache" in str(w.message) for w in record) == 1


def test_a_tune_the_budget_cut_replays_its_stop_measures_nothing_and_writes_the_same_bytes(
        backends, tmp_path, monkeypatch):
    """A cold tune cut by its budget stops where its clock said; run again with the same
    budget, every measurement comes from the cache in no time, so the clock alone would let
    it search further and write another plan: the journal replays the stop instead. A larger
    budget is another tune and does search further."""
    real = measure_mod.Measurer._measure

    def slow(self, part, feeds):  # every new measurement takes 0.15 s
        time.sleep(0.15)
        return real(self, part, feeds)

    monkeypatch.setattr(measure_mod.Measurer, "_measure", slow)
    cache = MeasurementCache(tmp_path)
    first, p1 = tune(chain_model(OPS), cache, budget=1.2)
    assert first.data["search"]["complete"] is False and p1.measured > 0
    second, p2 = tune(chain_model(OPS), cache, budget=1.2)
    assert p2.measured == 0
    assert second.to_json() == first.to_json()
    _, p3 = tune(chain_model(OPS), cache, budget=60)
    assert p3.measured > 0  # it goes on from the cache
