"""Real models partitioned for the reference backend compute exactly what they compute whole.

Fully offloaded (every node in regions) and half offloaded (every other op type, so regions and
host nodes alternate all through the graph): the outputs must equal those of the unpartitioned
run bit for bit, since the reference backend runs the same host kernels. The zoo's committed
tiny models and onnx's light models run in the fast suite; VGG-19 and the models that come from
PyPI packages are slow.
"""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc.backend import unregister_backend
from byoc.ir import Call, post_order
from tests.models import zoo
from tests.passes.util import assert_fully_offloaded, make_backend

COMMITTED = {"bert_tiny", "gpt2_tiny", "llama_tiny", "vit_tiny", "lstm_bidir", "gru"}


def _params():
    models = [m for m in zoo.MODELS if m.name in COMMITTED]
    slow = [m for m in zoo.MODELS if m.name not in COMMITTED]
    return ([pytest.param(m, id=m.name) for m in models]
            + [pytest.param(m, id=m.name, marks=pytest.mark.slow) for m in slow]
            + [pytest.param(m, id=m.name, marks=[pytest.mark.slow] if m.slow else [])
               for m in zoo.light_models()])


@pytest.fixture(scope="module", params=_params())
def model(request):
    try:
        proto = request.param.load()
    except zoo.ModelUnavailable as err:
        pytest.skip(f"{request.param.name}: {err}")
    mod = byoc.load_onnx(proto)
    feeds = request.param.make_inputs(np.random.default_rng(0))
    return mod, feeds, byoc.build(mod).run({k: v.copy() for k, v in feeds.items()})


def _assert_equal(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(want[name]), err_msg=name)


def test_fully_offloaded(model):
    mod, feeds, want = model
    part = byoc.partition(mod, backends=["reference"])
    assert_fully_offloaded(part, "reference")
    _assert_equal(byoc.build(part).run({k: v.copy() for k, v in feeds.items()}), want)


def test_half_offloaded(model):
    mod, feeds, want = model
    ops = sorted({e.op for e in post_order(mod.main.body) if isinstance(e, Call)})
    make_backend("every_other_op", set(ops[::2]))
    try:
        part = byoc.partition(mod, backends=["every_other_op"])
        got = byoc.build(part).run({k: v.copy() for k, v in feeds.items()})
    finally:
        unregister_backend("every_other_op")
    host = [e for e in post_order(part.main.body) if isinstance(e, Call) and isinstance(e.op, str)]
    assert len(part.functions) > 1 and (host or len(ops) == 1)
    _assert_equal(got, want)
