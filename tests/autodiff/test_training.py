"""End to end: examples/train_mlp.py trains with SGD over byoc.gradient and its loss falls;
one training step partitioned for a backend gives the host's numbers."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import byoc
from byoc.errors import ByocError

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_mlp.py")


def _example():
    spec = importlib.util.spec_from_file_location("train_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_loss_falls():
    losses = _example().train(steps=40, log=lambda line: None)
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.6 * losses[0], losses


def test_the_loss_falls_with_recompute_too_and_takes_the_same_steps():
    example = _example()
    plain = example.train(steps=5, log=lambda line: None)
    mirrored = example.train(steps=5, recompute="elementwise", log=lambda line: None)
    np.testing.assert_allclose(mirrored, plain, rtol=1e-6)


def test_the_example_runs_as_a_script(capsys):
    assert _example().main(["--steps", "3"]) == 0
    text = capsys.readouterr().out
    assert "step    0  loss" in text and "forward+backward  peak" in text and "recompute" in text


def _backend_or_skip(name: str):
    if not hasattr(byoc, "partition"):
        pytest.skip("byoc.partition is not available yet")
    try:
        backend = byoc.backend.find_backend(name)
    except ByocError as exc:
        pytest.skip(f"backend {name!r} cannot load here: {exc}")
    if backend is None:
        pytest.skip(f"backend {name!r} is not available (not written yet, or not installed)")
    return backend


@pytest.mark.parametrize("name, rtol, atol", [("reference", 0, 0), ("ccompiler", 1e-5, 1e-6)])
def test_a_partitioned_step_gives_the_host_numbers(name, rtol, atol):
    _backend_or_skip(name)
    example = _example()
    model = example.mlp()
    x, labels = example.spirals()
    feed = {"x": x, "labels": labels, **example.initial_weights(model)}
    host = example.training_step(model)(feed)
    step = byoc.gradient(byoc.load_onnx(model), loss="loss", wrt=example.WEIGHTS)
    part = byoc.partition(step, backends=[name])
    assert any(f.attrs.get("Compiler") == name for f in part.functions.values()), \
        f"nothing of the step went to {name}"
    got = byoc.build(part).run(feed)
    assert set(got) == set(host)
    for key in host:  # float32: the C code may round differently, the reference may not
        np.testing.assert_allclose(got[key], host[key], rtol=rtol, atol=atol, err_msg=key)
