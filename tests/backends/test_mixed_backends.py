"""Several backends at once, in priority order, on every real model: numbers of onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc.compare import compare_outputs, run_onnxruntime
from tests.models.zoo import MODELS, ModelUnavailable, light_models

MIXES = [["ccompiler", "onnxruntime"], ["native", "ccompiler", "onnxruntime"]]


@pytest.mark.slow
@pytest.mark.parametrize("mix", MIXES, ids=",".join)
@pytest.mark.parametrize("entry", [*MODELS, *light_models()], ids=lambda m: m.name)
def test_mixed_backends_match_onnxruntime(entry, mix):
    try:
        proto = entry.load()
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    inputs = entry.make_inputs(np.random.default_rng(0))
    part = byoc.partition(byoc.load_onnx(proto), backends=mix)
    got = byoc.build(part).run(inputs)
    bad = [c for c in compare_outputs(got, run_onnxruntime(proto, inputs), entry.rel_tol) if not c.ok]
    assert not bad, bad
