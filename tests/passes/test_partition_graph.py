"""partition_graph: regions lifted to external functions, with stable names and exact boundaries."""

from __future__ import annotations

import re

import numpy as np

from byoc import op
from byoc.analysis import HOST_REASONS
from byoc.ir import (
    Call,
    Function,
    GlobalVar,
    IRModule,
    Span,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    assert_structural_equal,
)
from byoc.passes import annotate_target, merge_compiler_regions, partition_graph

from .util import module

NAME = re.compile(r"^([a-z]+)_(\w+)_[0-9a-f]{8}$")  # test backends have no "_"


def _partitioned(mod, *bs, **options):
    annotated = annotate_target(mod, list(bs))
    return partition_graph(merge_compiler_regions(annotated, [b.name for b in bs]), **options)


def _external(mod: IRModule) -> list[str]:
    return [n for n in mod.functions if n != "main"]


def _attrs(name, backend, outputs):
    return {"Compiler": backend, "global_symbol": name, "Primitive": 1, "output_names": outputs}


def test_a_region_becomes_a_function_main_calls(backends):
    """
        x -> Conv(x, w) -> Relu -> Softmax        def @main(%x) { Softmax(@ta_conv_<h>(%x)) }
             \\____ ta ______/      host      ->   def @ta_conv_<h>(%x) { Relu(Conv(%x, w)) }
                                                  (the constant w bound inside)
    """
    ta = backends("ta", {"Conv", "Relu"})
    x = op.var("x", (1, 3, 4, 4))
    w = op.const(np.ones((2, 3, 1, 1), np.float32), "w")
    mod = module(op.Softmax(op.Relu(op.Conv(x, w, span="conv"), span="relu"), span="sm"), [x])
    got = _partitioned(mod, ta)

    (name,) = _external(got)
    assert NAME.match(name).group(1, 2) == ("ta", "conv")
    fx = Var("x", x.type)
    body = op.Relu(op.Conv(fx, w))
    func = Function((fx,), body, _attrs(name, "ta", ["relu"]))
    call = Call(GlobalVar(name), (x,), {}, body.type, Span(name, "", ("relu",)))
    want = IRModule({"main": module(op.Softmax(call), [x]).main, name: func})
    assert_structural_equal(got, want)
    assert got.attrs[HOST_REASONS] == {"sm": "ta: op Softmax is not supported"}


def test_several_results_come_back_once_each_as_a_tuple(backends):
    """
        x -> Relu (r) -> Abs (a) -> main's output       region {r, a} returns (r, a); r is read
              |  \\                                       twice on the host, returned once
             Exp  Neg  (host)
    """
    ta = backends("ta", {"Relu", "Abs"})
    x = op.var("x", (4,))
    r = op.Relu(x, span="r")
    a = op.Abs(r, span="a")
    mod = module([a, op.Exp(r), op.Neg(r)], [x])
    got = _partitioned(mod, ta)

    (name,) = _external(got)
    fx = Var("x", x.type)
    fr = op.Relu(fx)
    func = Function((fx,), Tuple((fr, op.Abs(fr))), _attrs(name, "ta", ["r", "a"]))
    call = Call(GlobalVar(name), (x,), {}, TupleType((r.type, a.type)), Span(name, "", ("r", "a")))
    r_out = TupleGetItem(call, 0)
    want_main = module([TupleGetItem(call, 1), op.Exp(r_out), op.Neg(r_out)], [x]).main
    assert_structural_equal(got, IRModule({"main": want_main, name: func}))


def test_constants_are_parameters_where_the_backend_does_not_bind_them(backends):
    """bind_constants=False (C source, say): the constant is passed by main, not embedded."""
    tc = backends("tc", {"Add"}, bind_constants=False)
    x = op.var("x", (4,))
    c = op.const(np.arange(4, dtype=np.float32), "bias")
    mod = module(op.Add(x, c, span="add"), [x])
    got = _partitioned(mod, tc)

    (name,) = _external(got)
    fx, fc = Var("x", x.type), Var("bias", c.type)
    func = Function((fx, fc), op.Add(fx, fc), _attrs(name, "tc", ["add"]))
    call = Call(GlobalVar(name), (x, c), {}, x.type, Span(name, "", ("add",)))
    assert_structural_equal(got, IRModule({"main": module(call, [x]).main, name: func}))


def _two_regions(extra_host_op: str = "Exp"):
    """x -> Relu -> Abs -> <host op> -> Neg -> Sigmoid: regions {Relu, Abs} and {Neg}."""
    x = op.var("x", (4,))
    head = op.Abs(op.Relu(x, span="head/relu"), span="head/abs")
    middle = op.make_call(extra_host_op, head, span="middle")
    return module(op.Sigmoid(op.Neg(middle, span="tail/neg"), span="out"), [x])


def test_names_come_from_content_and_ignore_the_rest_of_the_graph(backends):
    ta = backends("ta", {"Relu", "Abs", "Neg"})
    first = _external(_partitioned(_two_regions("Exp"), ta))
    again = _external(_partitioned(_two_regions("Exp"), ta))
    changed_host = _external(_partitioned(_two_regions("Tanh"), ta))
    assert first == again == changed_host
    assert [NAME.match(n).group(2) for n in first] == ["head_relu", "tail_neg"]


def test_names_change_with_a_region_s_content(backends):
    ta = backends("ta", {"Relu", "Abs", "Neg"})
    tb = backends("tb", {"Relu", "Neg"})
    a, b = _external(_partitioned(_two_regions(), ta)), _external(_partitioned(_two_regions(), tb))
    assert a[1] != b[1].replace("tb_", "ta_")  # {Neg} alike but for the backend
    assert a[0].split("_")[-1] != b[0].split("_")[-1]  # {Relu, Abs} vs {Relu}


def test_equal_regions_get_unique_names(backends):
    """Two regions with the same content (no spans to tell them apart) are named apart."""
    ta = backends("ta", {"Relu"})
    x = op.var("x", (4,))
    mod = module(op.Relu(op.Exp(op.Relu(x))), [x])
    names = _external(_partitioned(mod, ta))
    assert len(names) == 2 and names[1] == names[0] + "_1"


def test_backends_never_claim_each_other_s_nodes(backends):
    """
        x -> Relu (ta) -> Abs (tb) -> Neg (ta) -> Exp (tb)      four regions, two per backend
    """
    ta = backends("ta", {"Relu", "Neg"})
    tb = backends("tb", {"Abs", "Exp"})
    x = op.var("x", (4,))
    mod = module(op.Exp(op.Neg(op.Abs(op.Relu(x)))), [x])
    got = _partitioned(mod, ta, tb)
    claimed = sorted((got[n].attrs["Compiler"], got[n].body.op) for n in _external(got))
    assert claimed == [("ta", "Neg"), ("ta", "Relu"), ("tb", "Abs"), ("tb", "Exp")]


C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def test_region_names_are_c_identifiers_whatever_the_backend_s_name(backends):
    """TVM's test_partition_graph port: a backend named 'unsanitary-name++' through the pass-level
    API (annotate_target -> merge -> partition_graph), and byoc.partition with registered names
    that are Python identifiers but not C ones, or that start with a digit once sanitized."""
    from byoc.backend import Backend, get_backend

    reference = get_backend("reference")
    x = op.var("x", (4,))
    mod = module(op.Exp(op.Abs(op.Relu(x, span="relu-1"), span="abs")), [x])
    for name in ("unsanitary-name++", "3dsp", "", "dsp.v2/fast"):
        weird = Backend(name, reference.support, reference.compile)
        got = _partitioned(mod, weird)
        (region,) = _external(got)
        assert C_IDENTIFIER.match(region), region
        assert got[region].attrs["global_symbol"] == region
        assert got[region].attrs["Compiler"] == name  # the backend keeps its own name
    import byoc
    from tests.test_partition_control_flow import if_model

    model = byoc.load_onnx(if_model())
    inputs = {"x": np.array([-1.0, 2.0, -3.0], np.float32)}
    want = byoc.build(model).run(inputs)["y"]
    for name in ("dsp_\u00e9", "\u00b5dsp"):  # Python identifiers, not C ones
        backends(name, {"ReduceSum", "Greater", "Relu", "Mul", "Abs", "Neg", "Add"})
        part = byoc.partition(model, backends=[name])
        names = _external(part)
        assert len(names) == 3 and all(C_IDENTIFIER.match(n) for n in names), names
        np.testing.assert_array_equal(byoc.build(part).run(inputs)["y"], want)


def test_regions_annotated_for_default_stay_on_the_host(backends):
    """TVM's PartitionGraph leaves regions annotated for "default" in main; so does byoc, at the
    pass level and through byoc.partition(annotated=True), and explain says why."""
    import byoc
    from byoc.analysis import MARKED_HOST
    from byoc.passes import compiler_begin as cb
    from byoc.passes import compiler_end as ce

    backends("ta", {"Abs"})
    x = op.var("x", (4,))
    relu = op.Relu(cb(x, "default"), span="relu")
    absolute = op.Abs(cb(ce(relu, "default"), "ta"), span="abs")
    mod = module(op.Neg(ce(absolute, "ta"), span="neg"), [x])
    inputs = {"x": np.array([-1.0, 2.0, -3.0, 4.0], np.float32)}
    want = np.negative(np.abs(np.maximum(inputs["x"], 0)))
    for got in (partition_graph(mod), partition_graph(merge_compiler_regions(mod)),
                byoc.partition(mod, annotated=True)):
        (region,) = _external(got)
        assert got[region].attrs["Compiler"] == "ta" and got[region].body.op == "Abs"
        assert got.attrs[HOST_REASONS]["relu"] == MARKED_HOST
        assert "default" not in {f.attrs.get("Compiler") for f in got.functions.values()}
        np.testing.assert_array_equal(byoc.build(got).run(inputs)["out0"], want)


def test_no_backend_may_be_called_default():
    import pytest

    from byoc.backend import BackendError, register_backend

    with pytest.raises(BackendError, match="'default' mean the host"):
        register_backend("default", supports={"Relu"}, compile=lambda f: None)
