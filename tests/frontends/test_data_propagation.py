"""Shape inference skips ONNX's data propagation where a model has nothing to propagate: the
types must come out exactly as with it on, and models that need it must still get it."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import helper, numpy_helper
from onnx.onnx_cpp2py_export import shape_inference as onnx_inference

import byoc
from byoc.frontends.onnx.shape_inference import has_data_to_propagate
from byoc.ir import Call, TensorType, post_order
from tests.conftest import FLOAT, make_model


def test_the_seed_list_matches_onnxs_schemas():
    """An onnx release that gives another op a data propagation function, or infers another op
    through its function body, must have the seeds in shape_inference.PROPAGATION_SEEDS reviewed."""
    schemas = onnx.defs.get_all_schemas_with_history()
    propagating = {s.name for s in schemas if s.has_data_propagation_function}
    assert propagating == {"Add", "Cast", "Concat", "Gather", "Mul", "Shape", "Size", "Slice",
                           "Squeeze", "Sub", "Unsqueeze"}
    through_body = {s.name for s in schemas
                    if s.has_function and not s.has_type_and_shape_inference_function}
    assert through_body == {"MeanVarianceNormalization", "GreaterOrEqual", "LessOrEqual"}


def _elementwise(extra_nodes=(), inits=()):
    c = numpy_helper.from_array(np.full((1, 4), 0.5, np.float32), "c")
    nodes = [helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Mul", ["b", "c"], ["y"]), *extra_nodes]
    return make_model(nodes, [("x", FLOAT, ["n", 4])], [("y", FLOAT, None)], [c, *inits])


@pytest.mark.parametrize("seed", ["none", "Shape", "Size", "Constant", "int64 initializer",
                                  "MeanVarianceNormalization"])
def test_seeds_are_found_in_the_bytes(seed):
    extra = {"Shape": [helper.make_node("Shape", ["x"], ["s"])],
             "Size": [helper.make_node("Size", ["x"], ["s"])],
             "Constant": [helper.make_node("Constant", [], ["k"], value_float=1.0)],
             "MeanVarianceNormalization": [helper.make_node("MeanVarianceNormalization", ["x"],
                                                            ["m"])]}.get(seed, [])
    inits = [numpy_helper.from_array(np.array([1, 4], np.int64), "shape")] \
        if seed == "int64 initializer" else []
    data = _elementwise(extra, inits).SerializeToString()
    assert has_data_to_propagate(data) == (seed != "none")
    assert has_data_to_propagate(None)
    assert has_data_to_propagate(bytes(65 << 20))  # too big to search: left on


def test_without_seeds_inference_is_the_same_with_propagation_off():
    data = _elementwise().SerializeToString()
    assert onnx_inference.infer_shapes(data, False, False, True) == \
        onnx_inference.infer_shapes(data, False, False, False)


@pytest.mark.parametrize("source", ["Shape", "int64 initializers"])
def test_a_computed_shape_is_still_propagated(source):
    if source == "Shape":
        nodes, inits = [helper.make_node("Shape", ["x"], ["s"])], []
    else:  # a shape Concat builds from constants: only propagation sees its value
        inits = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("a", 3), ("b", 2))]
        nodes = [helper.make_node("Concat", ["a", "b"], ["s"], axis=0)]
    nodes.append(helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape"))
    model = make_model(nodes, [("x", FLOAT, [2, 3])], [("y", FLOAT, None)], inits)
    mod = byoc.load_onnx(model)
    reshape = next(e for e in post_order(mod.main.body) if isinstance(e, Call) and e.op == "Reshape")
    assert reshape.type == TensorType((2, 3) if source == "Shape" else (3, 2), "float32")


@pytest.mark.slow
def test_on_onnxs_node_suite_no_model_without_seeds_infers_differently():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.model is not None]
    compared = changed = 0
    for case in cases:
        data = case.model.SerializeToString()
        try:
            on = onnx_inference.infer_shapes(data, False, False, True)
            off = onnx_inference.infer_shapes(data, False, False, False)
        except Exception:  # a case onnx cannot infer either way
            continue
        if not has_data_to_propagate(data):
            compared += 1
            assert on == off, case.name
        else:
            changed += on != off
    assert compared > 1000 and changed > 100  # both kinds are there: the test can fail
