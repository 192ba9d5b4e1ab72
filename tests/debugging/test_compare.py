"""The element-wise comparison behind run --compare, repro and bisect: atol and rtol together,
per-dtype defaults, the errors reported, and the rounding step a value comes after."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import byoc
from byoc.compare import compare_output, rounding_steps
from tests.conftest import FLOAT, make_model


def test_a_tiny_output_s_last_bit_noise_is_not_flagged():
    """A detector's output whose largest value is 1.5e-5, off by 1.4e-7 (issue 17): the
    absolute tolerance covers it, where a purely relative one flagged it."""
    want = np.random.default_rng(0).uniform(0, 1.5e-5, 1000).astype(np.float32)
    got = want.copy()
    got[3] += np.float32(1.4e-7)
    c = compare_output("y", got, want)
    assert c.ok and c.n_out == 0 and c.size == 1000, c
    assert c.max_abs_err == pytest.approx(1.4e-7, rel=0.05)


def test_each_element_is_judged_against_its_own_reference():
    """|got - want| <= atol + rtol * |want| element by element: 0.0179 off on an element near 0
    of an output up to 320 (the planted MaxPool bug's error) is out, while 0.02 off on 320 is
    within rtol."""
    want = np.linspace(-320, 320, 1001, dtype=np.float32)  # want[500] == 0
    got = want.copy()
    got[500] += np.float32(0.0179)
    got[1000] += np.float32(0.02)
    c = compare_output("y", got, want)
    assert not c.ok and c.n_out == 1, c
    assert c.max_abs_err == pytest.approx(0.02, rel=1e-3)
    assert c.max_rel_err == pytest.approx(0.02 / 320, rel=1e-3)  # elements whose want is 0 left out
    assert "out=1/1001 OUT OF TOLERANCE" in c.summary() and "atol=" in c.summary()
    assert compare_output("y", got, want, atol=0.02).ok  # --atol: exactly that


def test_integers_must_be_equal_and_nan_must_meet_nan():
    c = compare_output("q", np.array([1, 2, 3], np.uint8), np.array([1, 2, 4], np.uint8))
    assert not c.ok and c.n_out == 1 and c.max_abs_err == 1.0
    assert compare_output("q", np.array([1, 2], np.int64), np.array([1, 2], np.int64)).ok
    nan = np.array([np.nan, 1.0, np.inf], np.float32)
    assert compare_output("f", nan, nan.copy()).ok
    off = compare_output("f", np.array([np.nan, 1.0, np.inf], np.float32),
                         np.array([0.0, 1.0, np.inf], np.float32))
    assert not off.ok and off.n_out == 1 and off.note == "NaN/Inf differ"
    typed = compare_output("f", np.zeros(2, np.float64), np.zeros(2, np.float32))
    assert not typed.ok and "dtype float64 vs reference float32" in typed.note


def test_a_value_after_integer_rounding_says_so():
    """y = Cast(Floor(x / s)) back to float: a last-bit difference in x / s moves y by a whole
    step, and the report names the step it comes after."""
    s = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
    nodes = [helper.make_node("Div", ["x", "s"], ["d"], name="div"),
             helper.make_node("Floor", ["d"], ["f"], name="floor"),
             helper.make_node("Cast", ["f"], ["i"], to=TensorProto.INT32, name="to_int"),
             helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT, name="to_float"),
             helper.make_node("Relu", ["x"], ["r"], name="relu")]
    model = make_model(nodes, [("x", FLOAT, [4])], [("y", FLOAT, [4]), ("r", FLOAT, [4])], [s])
    steps = rounding_steps(byoc.load_onnx(model).main)
    assert steps == {"y": "'to_int' (Cast)"}  # r follows no rounding step
    got = np.array([1, 2, 3, 5], np.float32)
    c = compare_output("y", got, np.array([1, 2, 3, 4], np.float32), rounding=steps["y"])
    assert not c.ok and "comes after integer rounding at 'to_int' (Cast)" in c.summary()
    assert c.as_dict()["after_rounding"] == "'to_int' (Cast)"
