"""Plans replayed, edited by hand, and refused in one line where an edit is not legal."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from onnx import helper

import byoc
from byoc.errors import ByocError, ModelError
from byoc.tuning import Plan, PlanError
from tests.conftest import make_model

from .util import FLOAT, Costs, chain_model, fake_backends, tune_fake

OPS = ["Relu", "Abs", "Neg", "Relu", "Abs", "Sigmoid"]
NAMES = [f"n{k}" for k in range(len(OPS))]
TAKES = {"fa": {"Relu", "Abs", "Add"}, "fb": {"Relu", "Neg", "Sigmoid"}}


@pytest.fixture
def tuned():
    """A plan placing n0..n1 on fa, n2 on fb, n3..n4 on fa, n5 on fb (fa cheap where it can)."""
    node = {n: {"host": 10.0} for n in NAMES}
    for n, op in zip(NAMES, OPS):
        for b, takes in TAKES.items():
            if op in takes:
                node[n][b] = 1.0 if b == "fa" else 2.0
    costs = Costs(node, {"fa": 0.1, "fb": 0.1}, {"fa": 0.0, "fb": 0.0})
    with fake_backends(**TAKES):
        plan, _, mod = tune_fake(chain_model(OPS), ["fa", "fb"], costs)
        yield plan, mod


def placement(part) -> dict[str, str]:
    from byoc.ir import Call, GlobalVar, post_order

    out = {}
    for e in post_order(part.main.body):
        if isinstance(e, Call) and isinstance(e.op, GlobalVar):
            f = part[e.op.name]
            for c in post_order(f.body):
                if isinstance(c, Call):
                    out[c.span.name] = f.attrs["Compiler"]
        elif isinstance(e, Call):
            out[e.span.name] = "host"
    return out


def edited(plan: Plan, fn) -> dict:
    data = copy.deepcopy(plan.data)
    fn(data)
    return data


def move(data: dict, node: str, region: str) -> None:
    """Move a node in both places, as docs/plan-format.md says."""
    for r in data["regions"]:
        if node in r["nodes"]:
            r["nodes"].remove(node)
        if r["id"] == region:
            r["nodes"].append(node)
    for n in data["nodes"]:
        if n["node"] == node:
            n["region"] = region


def region_of(data: dict, node: str) -> str:
    return next(n["region"] for n in data["nodes"] if n["node"] == node)


def test_replay_places_nodes_as_the_plan_says_and_computes_the_same(tuned):
    plan, mod = tuned
    part = byoc.partition(mod, plan=plan)
    assert placement(part) == plan.placement()
    assert plan.placement() == {"n0": "fa", "n1": "fa", "n2": "fb", "n3": "fa", "n4": "fa",
                                "n5": "fb"}
    x = {"x": np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)}
    np.testing.assert_array_equal(byoc.build(part).run(x)["y"], byoc.build(mod).run(x)["y"])
    assert byoc.explain(part) == {}


def test_replay_from_a_file_and_from_json(tuned, tmp_path):
    plan, mod = tuned
    path = tmp_path / "plan.json"
    plan.save(path)
    for source in (str(path), path, json.loads(path.read_text()), Plan.load(path)):
        assert placement(byoc.partition(mod, plan=source)) == plan.placement()


def test_a_region_moved_to_another_backend_or_the_host(tuned):
    plan, mod = tuned
    rid = region_of(plan.data, "n0")  # n0, n1 on fa: Relu, Abs
    data = edited(plan, lambda d: next(r for r in d["regions"] if r["id"] == rid)
                  .update(backend="host"))
    where = placement(byoc.partition(mod, plan=data))
    assert where["n0"] == where["n1"] == "host"
    assert byoc.explain(byoc.partition(mod, plan=data))["n0"] == "placed on the host by the plan"
    # the fb region of n2 (Neg) cannot go to fa: refused, naming the node and why
    rid2 = region_of(plan.data, "n2")
    data = edited(plan, lambda d: next(r for r in d["regions"] if r["id"] == rid2)
                  .update(backend="fa"))
    with pytest.raises(ModelError, match=r"node 'n2' \(Neg\): the plan puts it in region .* on "
                                         r"fa, which does not take it: .*Neg"):
        byoc.partition(mod, plan=data)


def test_a_node_moved_to_the_host_and_between_regions(tuned):
    plan, mod = tuned
    data = edited(plan, lambda d: move(d, "n1", "host"))
    assert placement(byoc.partition(mod, plan=data))["n1"] == "host"
    # n3 (Relu, on fa) into n2's fb region: fb takes Relu, and n2..n3 stay convex
    target = region_of(plan.data, "n2")
    data = edited(plan, lambda d: move(d, "n3", target))
    where = placement(byoc.partition(mod, plan=data))
    assert where["n3"] == "fb" and where["n2"] == "fb"


def test_a_move_that_would_make_a_cycle_is_refused(tuned):
    plan, mod = tuned
    # n0 joins the region of n5 (fb takes Relu), but n1..n4 lie between them
    target = region_of(plan.data, "n5")
    data = edited(plan, lambda d: move(d, "n0", target))
    with pytest.raises(ModelError, match=r"cannot run in any order: .*not convex.*'n1'"):
        byoc.partition(mod, plan=data)


def test_a_move_made_in_one_place_only_is_refused(tuned):
    plan, mod = tuned

    def table_only(d):
        next(n for n in d["nodes"] if n["node"] == "n1")["region"] = "host"

    with pytest.raises(ModelError, match=r"node 'n1' \(Abs\): region r\d lists it but the nodes "
                                         r"table puts it in host: a move must be made in both"):
        byoc.partition(mod, plan=edited(plan, table_only))


def test_an_unknown_node_is_refused(tuned):
    plan, mod = tuned
    data = edited(plan, lambda d: d["regions"][0]["nodes"].append("no_such_node"))
    with pytest.raises(ModelError, match=r"node 'no_such_node': region r0 lists this node, but "
                                         "the model has no node of that name"):
        byoc.partition(mod, plan=data)
    data = edited(plan, lambda d: d["nodes"].append(
        {"node": "ghost", "op": "Relu", "fingerprint": "0", "segment": "s0", "region": "host"}))
    with pytest.raises(ModelError, match="node 'ghost' .*model has no node of that name"):
        byoc.partition(mod, plan=data)


def test_an_unknown_backend_or_region_is_refused(tuned):
    plan, mod = tuned
    data = edited(plan, lambda d: d["regions"][0].update(backend="nope"))
    with pytest.raises(PlanError, match="region r0: unknown backend 'nope'"):
        byoc.partition(mod, plan=data)
    data = edited(plan, lambda d: d["nodes"][0].update(region="r99"))
    with pytest.raises(ModelError, match="node 'n0'.*region 'r99', which the plan does not have"):
        byoc.partition(mod, plan=data)


def test_a_plan_for_another_model_names_the_first_node_that_differs(tuned):
    plan, _ = tuned
    other = byoc.load_onnx(chain_model(["Relu", "Abs", "Neg", "Neg", "Abs", "Sigmoid"]))
    with pytest.raises(ModelError, match=r"node 'n3' \(Neg\): the model has changed since the "
                                         r"plan was made: Relu in the plan"):
        byoc.partition(other, plan=plan)
    shorter = byoc.load_onnx(chain_model(OPS[:4]))
    with pytest.raises(ModelError, match="node 'n3' .*has changed.*outputs"):
        byoc.partition(shorter, plan=plan)
    renamed = chain_model(OPS)
    renamed.graph.node[2].name = "third"
    with pytest.raises(ModelError, match=r"node 'third' \(Neg\): the plan was made for another "
                                         "model: node 2 is 'n2'"):
        byoc.partition(byoc.load_onnx(renamed), plan=plan)


def test_changed_weights_are_a_changed_model():
    w = np.ones((4, 8), np.float32)
    model = make_model([helper.make_node("Add", ["x", "w"], ["a"], name="add"),
                        helper.make_node("Relu", ["a"], ["y"], name="relu")],
                       [("x", FLOAT, [4, 8])], [("y", FLOAT, [4, 8])],
                       [helper.make_tensor("w", FLOAT, [4, 8], w.ravel())])
    costs = Costs({"add": {"host": 1.0, "fa": 0.5}, "relu": {"host": 1.0, "fa": 0.5}},
                  {"fa": 0.1}, {"fa": 0.0})
    with fake_backends(fa={"Add", "Relu"}):
        plan, _, _ = tune_fake(model, ["fa"], costs)
        model.graph.initializer[0].float_data[0] = 2.0
        with pytest.raises(ModelError, match=r"node 'add' \(Add\): the model has changed .*"
                                             "weights"):
            byoc.partition(byoc.load_onnx(model), plan=plan)


def test_schema_errors_name_the_field(tmp_path):
    with pytest.raises(PlanError, match='"format" must be "byoc-plan"'):
        Plan({"format": "other"})
    with pytest.raises(PlanError, match='"version" is 2, newer than this byoc reads'):
        Plan({"format": "byoc-plan", "version": 2})
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(PlanError, match="not JSON"):
        Plan.load(path)
    with pytest.raises(PlanError, match="no such file"):
        Plan.load(tmp_path / "missing.json")


def test_schema_checks_regions_and_nodes(tuned):
    plan, _ = tuned
    for breaks, field in [(lambda d: d["regions"][0].pop("backend"), r"regions\[0\].backend"),
                          (lambda d: d["regions"].append(dict(d["regions"][0])), "repeats"),
                          (lambda d: d["nodes"][0].update(region=3), r"nodes\[0\].region"),
                          (lambda d: d.update(backends="fa"), '"backends"')]:
        with pytest.raises(PlanError, match=field):
            Plan(edited(plan, breaks))


def test_partition_takes_a_plan_or_backends_not_both(tuned):
    plan, mod = tuned
    with pytest.raises(ByocError, match="a plan or backends"):
        byoc.partition(mod, ["fa"], plan=plan)


def test_a_region_its_backend_rejects_is_refused(tuned):
    """fc takes Relu but rejects regions of fewer than two ops: a plan giving it n0 alone."""
    from byoc.backends.reference import compile_region

    from byoc.backend import fewer_than, register_backend, unregister_backend

    plan, mod = tuned
    register_backend("fc", supports={"Relu", "Abs"}, compile=compile_region,
                     reject_region=fewer_than(2))
    try:
        def n0_alone_on_fc(d):
            move(d, "n1", "host")
            next(r for r in d["regions"] if "n0" in r["nodes"])["backend"] = "fc"

        with pytest.raises(ModelError, match=r"node 'n0' \(Relu\): region r\d on fc is rejected "
                                             r"by its backend: only 1 compute op"):
            byoc.partition(mod, plan=edited(plan, n0_alone_on_fc))
    finally:
        unregister_backend("fc")


def test_a_model_with_several_outputs_and_tuple_items():
    from .util import two_outputs_model

    ops = {"a": "Relu", "b": "Abs", "split": "Split", "c": "Neg", "d": "Concat"}
    node = {n: {"host": 5.0, "fa": 1.0} if op != "Neg" else {"host": 5.0}
            for n, op in ops.items()}
    costs = Costs(node, {"fa": 0.5}, {"fa": 0.1})
    with fake_backends(fa={"Relu", "Abs", "Split", "Concat"}):
        plan, _, mod = tune_fake(two_outputs_model(), ["fa"], costs)
        part = byoc.partition(mod, plan=plan)
        where = placement(part)
        assert where["c"] == "host" and where["split"] == "fa"
        assert byoc.explain(part) == {"c": "placed on the host by the plan"}
        x = {"x": np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)}
        got, want = byoc.build(part).run(x), byoc.build(mod).run(x)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])


def test_if_bodies_are_partitioned_for_the_option_of_their_segment():
    from byoc.ir import Call, GlobalVar, post_order
    from tests.test_partition_control_flow import if_model

    ops = {"sum": "ReduceSum", "positive": "Greater", "if": "If"}
    node = {n: {"host": 5.0, "fa": 1.0} for n in ops}
    node["if"] = {"host": 1.0}
    costs = Costs(node, {"fa": 0.1}, {"fa": 0.0})
    takes = {"ReduceSum", "Greater", "Relu", "Mul", "Abs", "Neg", "Add"}
    with fake_backends(fa=takes):
        model = if_model()
        mod = byoc.load_onnx(model)
        made = []

        def measurer(tensors):
            from .util import FakeMeasurer

            made.append(FakeMeasurer(tensors, costs))
            return made[-1]

        x = {"x": np.array([1.0, -2.0, 3.0], np.float32)}
        plan = byoc.tune(mod, ["fa"], x, atoms=3, measurer=measurer)
        assert plan.data["bodies"] == {"if": ["fa"]}
        part = byoc.partition(mod, plan=plan)
        (if_call,) = [e for e in post_order(part.main.body) if isinstance(e, Call)
                      and e.op == "If"]
        inside = [e for body in (if_call.attrs["then_branch"], if_call.attrs["else_branch"])
                  for e in post_order(body.body)
                  if isinstance(e, Call) and isinstance(e.op, GlobalVar)]
        assert len(inside) == 2 and all(part[c.op.name].attrs["Compiler"] == "fa"
                                        for c in inside)
        for v in (x, {"x": -x["x"]}):  # both branches
            np.testing.assert_array_equal(byoc.build(part).run(v)["y"],
                                          byoc.build(mod).run(v)["y"])
        # edited: the bodies back on the host
        data = copy.deepcopy(plan.data)
        data["bodies"] = {}
        part = byoc.partition(mod, plan=data)
        assert len([f for f in part.functions.values() if f.attrs.get("Compiler")]) == 1
