"""Whole graphs against central differences along random directions: a CNN (Conv, BN in
training mode, pools, skip, SoftmaxCrossEntropyLoss), a transformer block (Gather, LayerNorm,
attention with Where and Softmax, erf Gelu, Split/Concat/Slice), byoc's tiny ResNet, and the
exported transformers of tests/models (BERT, GPT-2, Llama, ViT) in float64."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc.ir import Function, IRModule

from .graphs import cnn, tiny_resnet_float64, transformer, zoo_float64

from onnx import numpy_helper


def directional_check(model, inputs, params, rtol=1e-6, directions=2, eps=(1e-6,),
                      together=True, atol=1e-9, **options):
    """<grad, d> against (L(p + e d) - L(p - e d)) / 2 e for a random d over every parameter
    at once (unless not ``together``), then for each parameter alone (the first ``directions``
    of those checks; 0 for all). With several steps ``eps``, one of them must agree: a large
    step may straddle a Relu kink, a small one drowns in rounding, a wrong gradient fails all.
    Returns the gradient run's outputs."""
    g = byoc.gradient(byoc.load_onnx(model), loss="loss", wrt=params, **options)
    exe = byoc.build(g)
    loss_only = Function(g.main.params, g.main.body.fields[0], {"output_names": ["loss"]})
    forward = byoc.build(IRModule({"main": loss_only}))
    init = {t.name: numpy_helper.to_array(t).copy() for t in model.graph.initializer}
    base = {**inputs, **{p: init[p] for p in params}}
    out = exe.run(base)
    rng = np.random.default_rng(42)

    def loss(feed):
        return float(forward.run(feed)["loss"])

    def numeric(d, group, e):
        up = {**base, **{p: base[p] + e * d[p] for p in group}}
        down = {**base, **{p: base[p] - e * d[p] for p in group}}
        return (loss(up) - loss(down)) / (2 * e)

    groups = ([params] if together else []) + [[p] for p in params]
    for group in groups[:directions] if directions else groups:
        d = {p: rng.normal(size=base[p].shape) for p in group}
        analytic = sum(float(np.sum(out[f"grad:{p}"] * d[p])) for p in group)
        tries = (numeric(d, group, e) for e in eps)  # smaller steps only when needed
        assert any(analytic == pytest.approx(n, rel=rtol, abs=atol) for n in tries), \
            (group, analytic, [numeric(d, group, e) for e in eps])
    return out


def test_cnn():
    model, inputs, params = cnn()
    directional_check(model, inputs, params, directions=0)


def test_transformer_block():
    model, inputs, params = transformer()
    # the erf in Gelu is the host kernel's approximation (see test_elementwise_rules)
    out = directional_check(model, inputs, params, rtol=1e-5, directions=0)
    assert out["grad:emb"].shape == (11, 8)


def test_transformer_block_with_recompute_gives_the_same_gradients():
    model, inputs, params = transformer()
    plain = directional_check(model, inputs, params, rtol=1e-5)
    mirrored = directional_check(model, inputs, params, rtol=1e-5, recompute="elementwise")
    for p in params:
        np.testing.assert_allclose(mirrored[f"grad:{p}"], plain[f"grad:{p}"], rtol=1e-12,
                                   atol=1e-15)


def test_tiny_resnet_first_and_last_layers():
    model, inputs, params = tiny_resnet_float64()
    out = directional_check(model, inputs, params[:2] + params[-2:], directions=0,
                            eps=(1e-6, 1e-7, 1e-8), together=False, atol=1e-7)
    assert set(out) == {"loss", "probabilities", *(f"grad:{p}" for p in params[:2] + params[-2:])}


@pytest.mark.slow
def test_tiny_resnet():
    model, inputs, params = tiny_resnet_float64()
    # 32k Relu inputs: some sit within 1e-6 of the kink (one stem BN output is 3e-6 from it),
    # and a step along all 78k weights at once crosses kinks like it. One weight at a time,
    # with steps down to 1e-8 where rounding is ~1e-7 of the derivative, keeps to one side.
    directional_check(model, inputs, params, directions=0, eps=(1e-6, 1e-7, 1e-8),
                      together=False, atol=1e-7)


@pytest.mark.parametrize("name", ["bert_tiny", "gpt2_tiny", "llama_tiny", "vit_tiny"])
def test_exported_transformers(name):
    model, inputs, params = zoo_float64(name)
    # erf in bert's and vit's Gelu is the host kernel's approximation (rtol 1e-5)
    directional_check(model, inputs, params, rtol=1e-5, directions=0, eps=(1e-6, 1e-7),
                      together=False, atol=1e-7)
