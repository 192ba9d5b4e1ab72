"""byoc tune on real models: the plan replays to onnxruntime's outputs, a warm tune measures
nothing new and writes the same bytes (slow: it compiles and times for real)."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.tuning import MeasurementCache
from tests.models.zoo import MODELS, light_models

ZOO = {m.name: m for m in (*MODELS, *light_models())}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert_tiny", "light_squeezenet", "silero_vad_16k"])
def test_a_tuned_plan_replays_to_onnxruntimes_outputs(name, tmp_path):
    entry = ZOO[name]
    proto = entry.load()
    feeds = entry.make_inputs(np.random.default_rng(0))
    mod = byoc.load_onnx(proto)
    cache = MeasurementCache(tmp_path)
    seen = []
    plan = byoc.tune(mod, ["native", "onnxruntime"], feeds, atoms=6, budget=300, cache=cache,
                     threads=1)
    part = byoc.partition(mod, plan=plan)
    got = byoc.build(part, threads=1).run(feeds)
    want = run_onnxruntime(proto, feeds)
    bad = [c for c in compare_outputs(got, want, entry.rel_tol) if not c.ok]
    assert not bad, bad
    if plan.data["search"]["complete"]:
        again = byoc.tune(mod, ["native", "onnxruntime"], feeds, atoms=6, budget=300,
                          cache=cache, threads=1, progress=seen.append)
        assert seen[-1].measured == 0
        assert again.to_json() == plan.to_json()
