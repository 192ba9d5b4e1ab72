"""The IR: text form, structural equality, and graphs too deep for recursion."""

from __future__ import annotations

import numpy as np
import pytest

import byoc
from byoc import op
from byoc.ir import (Call, Function, IRModule, Span, TensorType, Tuple, TupleGetItem, Var,
                     assert_structural_equal, post_order, structural_equal)
from byoc.ir.equality import StructuralMismatch
from byoc.ir.printer import quote


def small_module() -> IRModule:
    x = op.var("x", (1, 3, 8, 8))
    w = op.const(np.ones((4, 3, 3, 3), np.float32), name="w")
    conv = op.Conv(x, w, pads=[1, 1, 1, 1], span="conv1")
    relu = op.Relu(conv, span="relu1")
    return IRModule({"main": Function((x,), relu, {"output_names": ["y"]})})


def test_text_form_golden():
    assert small_module().astext() == (
        "def @main(%x: Tensor[(1, 3, 8, 8), float32]) -> Tensor[(1, 4, 8, 8), float32] {\n"
        "  %0 = Conv(%x, meta[Constant][0], pads=[1, 1, 1, 1]) /* ty=Tensor[(1, 4, 8, 8), float32] span=conv1 */;\n"
        "  %1 = Relu(%0) /* ty=Tensor[(1, 4, 8, 8), float32] span=relu1 */;\n"
        "  %1\n"
        "}")


def test_text_form_of_multi_output_and_symbolic_dims():
    x = op.var("x", ("N", 4))
    split = op.Split(x, axis=1, num_outputs=2, span="split")
    a, b = op.outputs(split)
    body = Tuple((op.Add(a, b, span="add"), b))
    printed = byoc.ir.astext(Function((x,), body))
    assert "Split(%x, axis=1, num_outputs=2) /* ty=(Tensor[(N, 2), float32], Tensor[(N, 2), float32])" in printed
    assert "%1 = %0.0 /* ty=Tensor[(N, 2), float32] */;" in printed
    assert printed.splitlines()[-3].strip() == "%4 = (%3, %2);"
    assert printed.splitlines()[-2].strip() == "%4"


@pytest.mark.parametrize("name", ['a"b', "x */ y", "line\nbreak", "tab\there", "a*/b", "back\\slash"])
def test_model_strings_cannot_break_out_of_the_text(name):
    q = quote(name)
    assert "*/" not in q and "\n" not in q and q.startswith('"') and q.endswith('"')
    x = Var(name, TensorType((2,), "float32"))
    call = Call("Relu", (x,), {}, x.type, Span(name, "Relu"))
    text = byoc.ir.astext(Function((x,), call))
    for line in text.splitlines():
        assert line.count("/*") == line.count("*/") <= 1


def test_structural_equality_ignores_names_and_spans_but_not_structure():
    a, b = small_module(), small_module()
    assert structural_equal(a, b)
    assert_structural_equal(a, b)
    x = op.var("other_name", (1, 3, 8, 8))
    w = op.const(np.ones((4, 3, 3, 3), np.float32))
    different = IRModule({"main": Function((x,), op.Sigmoid(op.Conv(x, w, pads=[1, 1, 1, 1])),
                                           {"output_names": ["y"]})})
    assert not structural_equal(a, different)
    with pytest.raises(StructuralMismatch, match="op Relu vs Sigmoid"):
        assert_structural_equal(a, different)
    w2 = op.const(np.zeros((4, 3, 3, 3), np.float32))
    other_weights = IRModule({"main": Function((x,), op.Relu(op.Conv(x, w2, pads=[1, 1, 1, 1])),
                                               {"output_names": ["y"]})})
    assert not structural_equal(a, other_weights)


def test_structural_equality_sees_sharing():
    x = op.var("x", (2,))
    r = op.Relu(x)
    shared = Function((x,), op.Add(r, r))
    y = op.var("x", (2,))
    unshared = Function((y,), op.Add(op.Relu(y), op.Relu(y)))
    assert not structural_equal(shared, unshared)


def test_post_order_is_iterative_and_deterministic():
    x = op.var("x", (2,))
    e = x
    for _ in range(50_000):
        e = Call("Relu", (e,), {}, x.type)
    order = post_order(e)
    assert len(order) == 50_001 and order[0] is x and order[-1] is e


def test_tuple_get_item_types():
    x = op.var("x", (6, 2))
    split = op.Split(x, axis=0, num_outputs=3)
    items = op.outputs(split)
    assert [i.type for i in items] == [TensorType((2, 2), "float32")] * 3
    assert isinstance(items[0], TupleGetItem)


def test_calls_without_attributes_share_one_read_only_empty_attrs():
    import copy
    import pickle

    from onnx import TensorProto, helper

    from byoc.ir import NO_ATTRS

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    mod = byoc.load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)]))
    calls = [e for e in byoc.ir.post_order(mod.main.body) if isinstance(e, byoc.ir.Call)]
    assert [c.op for c in calls] == ["Relu", "Neg"] and all(c.attrs is NO_ATTRS for c in calls)
    assert NO_ATTRS == {} and {**NO_ATTRS, "alpha": 1.0} == {"alpha": 1.0}
    for change in (lambda d: d.update(a=1), lambda d: d.setdefault("a", 1),
                   lambda d: d.__setitem__("a", 1), lambda d: d.__ior__({"a": 1})):
        with pytest.raises(TypeError, match="shared by every call"):
            change(NO_ATTRS)
    assert NO_ATTRS == {}
    assert pickle.loads(pickle.dumps(NO_ATTRS)) is NO_ATTRS and copy.deepcopy(NO_ATTRS) is NO_ATTRS
