"""The reverse pass itself: module shape, initializers as parameters, sums over uses, spans,
errors that name the node, unreachable and off-path values, deep graphs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc import op
from byoc.ir import Call, post_order
from tests.conftest import make_model

from .fd import check, module

DOUBLE = TensorProto.DOUBLE


def _mlp_model() -> onnx.ModelProto:
    """x -> MatMul(W) -> Add(b) -> Relu -> ReduceSum = loss, W and b initializers."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(3, 2)), "W"),
             numpy_helper.from_array(rng.normal(size=(2,)), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"),
             helper.make_node("Add", ["h", "b"], ["z"], name="bias"),
             helper.make_node("Relu", ["z"], ["a"], name="act"),
             helper.make_node("ReduceSum", ["a"], ["loss"], name="sum", keepdims=0)]
    return make_model(nodes, [("x", DOUBLE, ["N", 3])], [("loss", DOUBLE, []), ("a", DOUBLE, None)],
                      inits)


def test_initializers_become_parameters_with_their_names():
    mod = byoc.load_onnx(_mlp_model())
    g = byoc.gradient(mod, loss="loss", wrt=["W", "b"])
    assert [p.name for p in g.main.params] == ["x", "W", "b"]
    # outputs first, then the gradients as they are complete: b is read after W
    assert g.main.attrs["output_names"] == ["loss", "a", "grad:b", "grad:W"]
    assert not any(getattr(e, "name", None) in ("W", "b") and type(e).__name__ == "Constant"
                   for e in post_order(g.main.body))
    x = np.random.default_rng(1).normal(size=(5, 3))
    W, b = np.ones((3, 2)), np.array([0.5, -10.0])
    out = byoc.build(g).run({"x": x, "W": W, "b": b})
    z = x @ W + b
    np.testing.assert_allclose(out["loss"], np.maximum(z, 0).sum())  # the fed weights are used
    np.testing.assert_allclose(out["grad:W"], x.T @ (z > 0))
    np.testing.assert_allclose(out["grad:b"], (z > 0).sum(0))


def test_lifted_weights_keep_their_stored_values_as_defaults(tmp_path):
    """As ONNX has an initializer that is also a graph input: a run with only the data inputs
    uses the model's weights, a fed weight overrides its default, and the exported model
    carries the defaults as initializers (onnxruntime runs it with x alone)."""
    from byoc.compare import onnxruntime_session
    from byoc.ir import DEFAULTS

    model = _mlp_model()
    stored = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    g = byoc.gradient(byoc.load_onnx(model), loss="loss", wrt=["W", "b"])
    assert sorted(g.main.attrs[DEFAULTS]) == ["W", "b"]
    exe = byoc.build(g)
    x = np.random.default_rng(1).normal(size=(5, 3))
    z = x @ stored["W"] + stored["b"]
    out = exe.run({"x": x})
    np.testing.assert_allclose(out["loss"], np.maximum(z, 0).sum())
    np.testing.assert_allclose(out["grad:W"], x.T @ (z > 0))
    W = np.ones((3, 2))
    z2 = x @ W + stored["b"]
    out = exe.run({"x": x, "W": W})  # one weight fed, the other its default
    np.testing.assert_allclose(out["loss"], np.maximum(z2, 0).sum())
    np.testing.assert_allclose(out["grad:W"], x.T @ (z2 > 0))
    assert "defaults={" in g.astext()
    exported = byoc.to_onnx(g)
    assert sorted(t.name for t in exported.graph.initializer if t.name in ("W", "b")) == ["W", "b"]
    theirs = onnxruntime_session(exported, optimize=False).run(["loss", "grad:W"], {"x": x})
    np.testing.assert_allclose(theirs[0], np.maximum(z, 0).sum())
    np.testing.assert_allclose(theirs[1], x.T @ (z > 0))
    with pytest.raises(byoc.InputError, match="missing input 'x'"):
        exe.run({"W": W})


def test_a_symbolic_batch_dim_is_handled_at_build_time():
    g = byoc.gradient(byoc.load_onnx(_mlp_model()), loss="loss", wrt=["b"])
    ops = [e.op for e in post_order(g.main.body) if isinstance(e, Call)]
    assert "NonZero" not in ops  # b's broadcast axis was found from the types, N or not


def test_gradient_nodes_are_spanned_at_their_forward_node():
    g = byoc.gradient(byoc.load_onnx(_mlp_model()), loss="loss", wrt=["W", "x"])
    forward = {"fc", "bias", "act", "sum"}
    spans = [e.span.name for e in post_order(g.main.body) if isinstance(e, Call)]
    grads = [s for s in spans if s not in forward]
    assert grads and all(s.endswith("/grad") and s[:-5] in forward | {"loss", "x"}
                         for s in grads), grads


def test_uses_are_summed():
    x = op.var("x", (3,), "float64")
    y = op.Mul(op.Add(x, x), op.Sin(x))  # x read three times
    loss = op.ReduceSum(y, keepdims=0)
    g = byoc.gradient(module([loss], [x], ["loss"]), loss="loss", wrt=["x"])
    sums = [e for e in post_order(g.main.body) if isinstance(e, Call) and e.op in ("Add", "Sum")
            and e.span is not None and e.span.name.endswith("/grad")]
    assert any(e.op == "Sum" and len(e.args) == 3 for e in sums)
    check(lambda v: op.Mul(op.Add(v, v), op.Sin(v)), {"x": np.array([0.1, 0.7, -2.0])})


def test_shared_subexpressions_and_multi_output_ops():
    def build(v):
        s = op.Split(v, op.const(np.array([1, 2])), axis=0, n_outputs=2)
        a, b = byoc.op.outputs(s)
        return [op.Mul(op.ReduceSum(a, keepdims=1), b), op.Tanh(a)]

    check(build, {"x": np.array([0.3, -1.2, 0.8])})


def test_a_missing_rule_on_the_path_names_the_op_and_its_node():
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp1"),
             helper.make_node("CumSum", ["e", "axis"], ["c"], name="running_total"),
             helper.make_node("ReduceSum", ["c"], ["loss"], name="sum", keepdims=0)]
    axis = numpy_helper.from_array(np.array(0, dtype=np.int64), "axis")
    mod = byoc.load_onnx(make_model(nodes, [("x", DOUBLE, [3])], [("loss", DOUBLE, [])], [axis]))
    with pytest.raises(byoc.ModelError, match=r"node 'running_total' \(CumSum\).*no gradient rule"):
        byoc.gradient(mod, loss="loss", wrt=["x"])


def test_ops_off_the_path_need_no_rule():
    nodes = [helper.make_node("CumSum", ["y", "axis"], ["c"], name="off_path"),
             helper.make_node("Mul", ["x", "c"], ["m"], name="mul"),
             helper.make_node("ReduceSum", ["m"], ["loss"], name="sum", keepdims=0),
             helper.make_node("CumSum", ["x", "axis"], ["other"], name="other_output")]
    axis = numpy_helper.from_array(np.array(0, dtype=np.int64), "axis")
    mod = byoc.load_onnx(make_model(nodes, [("x", DOUBLE, [3]), ("y", DOUBLE, [3])],
                                    [("loss", DOUBLE, []), ("other", DOUBLE, [3])], [axis]))
    g = byoc.gradient(mod, loss="loss", wrt=["x"])
    y = np.array([1.0, 2.0, 3.0])
    out = byoc.build(g).run({"x": np.zeros(3), "y": y})
    np.testing.assert_allclose(out["grad:x"], np.cumsum(y))


def test_a_value_the_loss_does_not_read_gets_zeros():
    x, z = op.var("x", (2,), "float64"), op.var("z", (2, 2), "float64")
    g = byoc.gradient(module([op.ReduceSum(x, keepdims=0)], [x, z], ["loss"]), loss="loss",
                      wrt=["z"])
    out = byoc.build(g).run({"x": np.ones(2), "z": np.ones((2, 2))})
    np.testing.assert_array_equal(out["grad:z"], np.zeros((2, 2)))


def test_a_non_scalar_loss_is_seeded_with_ones():
    x = op.var("x", ("N", 2), "float64")
    g = byoc.gradient(module([op.Mul(x, x)], [x], ["y"]), loss="y", wrt=["x"])
    xv = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(byoc.build(g).run({"x": xv})["grad:x"], 2 * xv)


def test_unknown_shapes_fall_back_to_run_time_shape_arithmetic():
    # no shapes at all on the inputs: every broadcast reduction is decided at run time
    a, b = op.var("a", None, "float64"), op.var("b", None, "float64")
    g = byoc.gradient(module([op.ReduceSum(op.Mul(a, b), keepdims=0)], [a, b], ["l"]), "l",
                      ["a", "b"])
    av, bv = np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    out = byoc.build(g).run({"a": av, "b": bv})
    np.testing.assert_allclose(out["grad:a"], np.broadcast_to(bv, (2, 3)))
    np.testing.assert_allclose(out["grad:b"], av.sum(0))


@pytest.mark.parametrize("loss, wrt, message", [
    ("nope", ["x"], "not an output"), ("loss", ["q"], "neither a parameter"),
    ("loss", ["x", "x"], "twice"), ("idx", ["x"], "floating-point"),
    ("loss", ["n"], "only floating-point")])
def test_bad_requests_are_model_errors(loss, wrt, message):
    x, n = op.var("x", (3,), "float64"), op.var("n", (3,), "int64")
    mod = module([op.ReduceSum(op.Mul(x, op.Cast(n, to=11)), keepdims=0), op.ArgMax(x)],
                 [x, n], ["loss", "idx"])
    with pytest.raises(byoc.ModelError, match=message):
        byoc.gradient(mod, loss=loss, wrt=wrt)


def test_recompute_must_be_known():
    x = op.var("x", (3,), "float64")
    with pytest.raises(ValueError, match="recompute"):
        byoc.gradient(module([op.ReduceSum(x, keepdims=0)], [x], ["l"]), "l", ["x"],
                      recompute="everything")


def test_a_partitioned_module_says_to_differentiate_first():
    x = op.var("x", (3,), "float64")
    mod = module([op.ReduceSum(op.Exp(x), keepdims=0)], [x], ["l"])
    part = byoc.partition(mod, backends=["reference"])
    with pytest.raises(byoc.ModelError, match="external function"):
        byoc.gradient(part, "l", ["x"])


def test_a_deep_chain_is_differentiated_without_recursion():
    x = op.var("x", (2,), "float64")
    v = x
    for i in range(3000):  # well past Python's recursion limit of 1000
        v = op.Tanh(v) if i % 2 else op.Mul(v, op.const(np.float64(1.5)))
    g = byoc.gradient(module([op.ReduceSum(v, keepdims=0)], [x], ["l"]), "l", ["x"])
    out = byoc.build(g).run({"x": np.array([0.1, -0.2])})
    assert np.all(np.isfinite(out["grad:x"]))


def test_the_module_docstring_example():
    x, w = op.var("x", (2, 3)), op.var("w", (3, 4))
    mod = module([op.ReduceSum(op.MatMul(x, w), keepdims=0)], [x, w], ["loss"])
    text = byoc.gradient(mod, "loss", ["w"]).astext()
    assert "Gemm(%x, %2, transA=1)" in text and "span=MatMul/grad" in text
