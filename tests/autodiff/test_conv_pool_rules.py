"""Finite-difference checks of Conv (groups, strides, pads, dilations, auto_pad, 1-D to 3-D)
and pooling (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from byoc import op
from byoc.ir import TupleGetItem

from .fd import check, distinct
from .strategies import fd_settings, seeds


@st.composite
def windows(draw, max_nd: int = 2, dilated: bool = True):
    """(nd, kernel, strides, dilations, pads, input size) giving at least one output."""
    nd = draw(st.integers(1, max_nd))
    kernel = [draw(st.integers(1, 3)) for _ in range(nd)]
    strides = [draw(st.integers(1, 3)) for _ in range(nd)]
    dilations = [draw(st.integers(1, 2)) if dilated else 1 for _ in range(nd)]
    pads = [draw(st.integers(0, k - 1)) for k in kernel * 2]
    size = [(k - 1) * d + 1 + draw(st.integers(0, 4)) for k, d in zip(kernel, dilations)]
    return nd, kernel, strides, dilations, pads, size


@fd_settings
@given(win=windows(), seed=seeds, group=st.integers(1, 3), cg=st.integers(1, 2),
       mg=st.integers(1, 2), n=st.integers(1, 2), bias=st.booleans())
def test_conv(win, seed, group, cg, mg, n, bias):
    nd, kernel, strides, dilations, pads, size = win
    rng = np.random.default_rng(seed)
    inputs = {"x": rng.normal(size=(n, group * cg, *size)),
              "w": rng.normal(size=(group * mg, cg, *kernel))}
    if bias:
        inputs["b"] = rng.normal(size=(group * mg,))
    check(lambda *v: op.Conv(*v, strides=strides, dilations=dilations, pads=pads, group=group),
          inputs)


@fd_settings
@given(seed=seeds, auto_pad=st.sampled_from(["SAME_UPPER", "SAME_LOWER", "VALID"]),
       stride=st.integers(1, 2), size=st.integers(3, 6))
def test_conv_auto_pad(seed, auto_pad, stride, size):
    rng = np.random.default_rng(seed)
    inputs = {"x": rng.normal(size=(1, 2, size, size + 1)), "w": rng.normal(size=(3, 2, 2, 3))}
    check(lambda x, w: op.Conv(x, w, auto_pad=auto_pad, strides=[stride, stride]), inputs)


def test_conv_3d_depthwise():
    rng = np.random.default_rng(3)
    inputs = {"x": rng.normal(size=(1, 2, 4, 3, 4)), "w": rng.normal(size=(4, 1, 2, 2, 3))}
    check(lambda x, w: op.Conv(x, w, group=2, strides=[2, 1, 1], pads=[1, 0, 1, 0, 1, 1]),
          inputs)


@fd_settings
@given(win=windows(), seed=seeds, ceil_mode=st.booleans(), with_indices=st.booleans())
def test_max_pool(win, seed, ceil_mode, with_indices):
    nd, kernel, strides, dilations, pads, size = win
    x = distinct(np.random.default_rng(seed), (2, 2, *size))
    attrs = dict(kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads,
                 ceil_mode=int(ceil_mode))

    def build(v):
        if not with_indices:
            return op.MaxPool(v, **attrs)
        return TupleGetItem(op.MaxPool(v, n_outputs=2, storage_order=0, **attrs), 0)

    check(build, {"x": x})


def test_max_pool_with_column_major_indices_asks_for_its_own():
    check(lambda v: TupleGetItem(op.MaxPool(v, n_outputs=2, kernel_shape=[2, 2],
                                            storage_order=1), 0),
          {"x": distinct(np.random.default_rng(0), (1, 2, 5, 4))})


@fd_settings
@given(win=windows(), seed=seeds, include_pad=st.booleans(), ceil_mode=st.booleans())
def test_average_pool(win, seed, include_pad, ceil_mode):
    nd, kernel, strides, dilations, pads, size = win
    x = np.random.default_rng(seed).normal(size=(2, 3, *size))
    check(lambda v: op.AveragePool(v, kernel_shape=kernel, strides=strides, pads=pads,
                                   dilations=dilations, count_include_pad=int(include_pad),
                                   ceil_mode=int(ceil_mode)),
          {"x": x})



@fd_settings
@given(seed=seeds, nd=st.integers(1, 3))
def test_global_pools(seed, nd):
    rng = np.random.default_rng(seed)
    shape = (2, 3, *rng.integers(1, 4, size=nd))
    check(lambda v: op.GlobalAveragePool(v), {"x": rng.normal(size=shape)})
    check(lambda v: op.GlobalMaxPool(v), {"x": distinct(rng, shape)})
