"""The zoo's real models partitioned for native (the host runs what it declines) against
onnxruntime, within each model's tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from tests.models import zoo

# ccompiler fails these the same way (an LSTM / Gemm fed a wrongly shaped tensor by a region
# built on ccompiler's shape and emitter code); reported, not fixed here.
KNOWN = {"silero_vad_16k", "silero_vad_8k", "silero_vad_op18_ifless"}


@pytest.mark.slow
@pytest.mark.parametrize("model", [pytest.param(m, id=m.name, marks=[pytest.mark.xfail(
    reason="shared ccompiler bug", strict=False)] if m.name in KNOWN else [])
    for m in (*zoo.MODELS, *zoo.light_models())])
def test_native_matches_onnxruntime(model):
    try:
        model.locate()
    except zoo.ModelUnavailable as err:
        pytest.skip(str(err))
    feeds = model.make_inputs(np.random.default_rng(0))
    part = byoc.partition(byoc.load_onnx(model.load()), backends=["native"])
    got = byoc.build(part).run(feeds)
    ref = zoo.run_ort(zoo.ort_session(model.load().SerializeToString()), feeds)
    for name, value in ref.items():
        assert zoo.output_error(value, got[name]) <= model.rel_tol, name
