"""Failures the fuzzing found, shrunk by hypothesis and written out as small explicit models.

Each runs the way the fuzzing does (``harness.check_case``: host, every engine, and the mixes
it failed in) against onnxruntime. A bug not fixed yet is ``xfail(strict=True)``: it names the
file and function at fault, and the test turns red the day it is fixed, so the marker (and its
entry in ``harness.KNOWN_BUGS``) is removed with the fix.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

from tests.fuzz.harness import CCOMPILER, KNOWN_BUGS, check_case
from tests.fuzz.strategies import FuzzGraph

needs_c = pytest.mark.skipif(CCOMPILER is None, reason="needs the ccompiler backend and a C "
                                                       "compiler")


def case(text: str, **inputs: np.ndarray) -> FuzzGraph:
    """A FuzzGraph from a model in ONNX's text form."""
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    ops = frozenset(n.op_type for n in model.graph.node)
    return FuzzGraph(model, {k: np.asarray(v, np.float32) for k, v in inputs.items()}, ops)


HEADER = '<ir_version: 10, opset_import: ["" : 21]>'


@needs_c
# Max and Min took another path and were right.
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceProd", "ReduceL2", "ReduceMax"])
@pytest.mark.parametrize("shape", ["1", "1, 1"])
def test_ccompiler_reduce_of_one_element(op: str, shape: str) -> None:
    """Fixed (backends/ccompiler/ops/reduce.py emit_reduce): with every dim 1, coalesce() left
    no loop and the output kept the reduction's identity (0, or 1 for Prod)."""
    c = case(f"""{HEADER}
        g (float[{shape}] x) => (float y) {{ y = {op} <keepdims: int = 0> (x) }}""",
             x=np.full([int(d) for d in shape.split(",")], 0.8217))
    check_case(c, {}, [["ccompiler"]], avoid_known=False)


@needs_c
def test_ccompiler_keeps_a_scalar_input_scalar() -> None:
    """Fixed (backends/ccompiler/runtime.py CompiledRegion.__call__): np.ascontiguousarray
    made a 0-d input 1-d, so the region was built for shape (1,) and returned (1,)."""
    c = case(f"""{HEADER}
        g (float[3] x) => (float y) {{
            r = ReduceSum <keepdims: int = 0> (x)
            y = Sigmoid (r)
        }}""", x=[0.5, -1.0, 2.0])
    # fuzz_ref takes the ReduceSum, ccompiler the Sigmoid: a 0-d tensor enters a C region.
    check_case(c, {"fuzz_ref": frozenset({"ReduceSum"})}, [["fuzz_ref", "ccompiler"]],
               avoid_known=False)


def test_a_scalar_stays_scalar_through_an_onnxruntime_region() -> None:
    """Fixed: byoc/runtime/devices.py copy_kernel made a 0-d tensor 1-d on its way to a device
    (np.ascontiguousarray), so an onnxruntime region fed a scalar returned shape (1,)."""
    c = case(f"""{HEADER}
        g (float x) => (float y) {{ y = Abs (x) }}""", x=-2.0)
    check_case(c, {"fuzz_ref": frozenset()}, [["onnxruntime"], ["fuzz_ref", "onnxruntime"]],
               avoid_known=False)


@needs_c
@pytest.mark.parametrize("start", [-3, -5])
def test_ccompiler_slice_backwards_from_before_the_start(start: int) -> None:
    """Fixed (backends/ccompiler/ops/movement.py slice_plan): Python's slice.indices clamps a
    start before the first element to -1 for a negative step (an empty slice) where ONNX clamps
    it to 0; the C then copied from index -1, a read outside the input."""
    c = case(f"""{HEADER}
        g (float[2, 2] x) => (float[1, 2] y) <int64[1] s = {{{start}}}, int64[1] e = {{-100}},
                                             int64[1] a = {{0}}, int64[1] t = {{-1}}> {{
            r = Slice (x, s, e, a, t)
            y = Neg (r)
        }}""", x=[[1, 2], [3, 4]])
    check_case(c, {}, [["ccompiler"]], avoid_known=False)


INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
# (start, end, step) on a dim of 3: each side of both ends, and the sentinels ONNX recommends.
# Not an end of INT64_MAX with a negative step: onnxruntime reads it as "to the first element"
# where the spec (and ONNX's shape inference, so byoc) clamps it to dim - 1, an empty slice.
SLICES = [(s, e, t) for t in (1, 2, -1, -2) for s, e in [
    (-5, INT64_MAX), (-5, 2), (0, -1), (1, 5), (5, INT64_MIN), (3, -100), (-1, INT64_MIN),
    (INT64_MAX, INT64_MIN), (INT64_MIN, INT64_MAX), (INT64_MIN, INT64_MIN), (-4, -5), (2, 2),
    (-3, -4), (2, -4)]
    if not (t < 0 and e == INT64_MAX)]


@needs_c
def test_ccompiler_slice_clamps_starts_and_ends_as_the_spec_says() -> None:
    """Every side of clamping, both step signs, and the INT64_MAX/MIN sentinels: one Slice per
    case (an output each) in one C region, against onnxruntime."""
    consts = [onnx.helper.make_tensor(f"c{i}", onnx.TensorProto.INT64, [1], [v])
              for i, v in enumerate(sorted({v for c in SLICES for v in c} | {0}))]
    by_value = {t.int64_data[0]: t.name for t in consts}
    nodes = [onnx.helper.make_node("Slice", ["x", by_value[s], by_value[e], by_value[0],
                                             by_value[t]], [f"y{i}"])
             for i, (s, e, t) in enumerate(SLICES)]
    graph = onnx.helper.make_graph(
        nodes, "slices", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
        [onnx.helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, None)
         for i in range(len(SLICES))], consts)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    del model.graph.value_info[:]
    c = FuzzGraph(model, {"x": np.array([1.0, 2.0, 3.0], np.float32)}, frozenset({"Slice"}))
    check_case(c, {}, [["ccompiler"]], avoid_known=False)


def test_every_known_bug_has_its_regression_test() -> None:
    names = {name for name in globals() if name.startswith("test_")}
    assert {test for _, _, test in KNOWN_BUGS} <= names


def test_a_ceil_mode_pool_whose_last_window_starts_past_the_input() -> None:
    """Fixed (byoc/op/type_rules.py ceil_pool_types, frontends/onnx/importer.py _retype): ONNX's
    shape inference (onnx 1.23) counts a last ceil_mode window that starts past the input when
    `pads` is given, where the spec, byoc's kernels and onnxruntime drop it; the static type was
    one too long from the pool on, and an onnxruntime region fed the pool's output refused it."""
    c = case(f"""{HEADER}
        g (float[1, 1, 2, 2] x) => (float[1, 1, 2, w] y) {{
            v = MaxPool <ceil_mode: int = 1, kernel_shape: ints = [1, 1],
                         pads: ints = [0, 0, 0, 0], strides: ints = [1, 2]> (x)
            y = LeakyRelu (v)
        }}""", x=[[[[0.8, -1.4], [-2.7, -2.9]]]])
    check_case(c, {"fuzz_ort": frozenset({"LeakyRelu"})}, [["fuzz_ort"]], avoid_known=False)
