"""--fallback next: a region its backend cannot build, or whose first run fails, moves to the
next listed backend that takes all its nodes, then to the host; one warning line per move."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from byoc.backends.reference import compile_region

import byoc
from byoc.backend import register_backend, unregister_backend
from byoc.errors import ByocError

from .util import chain_model

X = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
MODEL = chain_model(["Relu", "Abs", "Neg"])


def cannot_build(func):
    raise ByocError("no compiler for this one")


def raises_anything(func):
    raise RuntimeError("the SDK crashed")


def fails_first_run(func):
    def run(*arrays):
        raise RuntimeError("device lost")

    return run


@pytest.fixture
def backends():
    made = {"broken": cannot_build, "crashing": raises_anything, "flaky": fails_first_run}
    for name, compile in made.items():
        register_backend(name, supports={"Relu", "Abs", "Neg"}, compile=compile)
    register_backend("partial", supports={"Relu", "Abs"}, compile=compile_region)
    register_backend("good", supports={"Relu", "Abs", "Neg"}, compile=compile_region)
    yield
    for name in [*made, "partial", "good"]:
        unregister_backend(name)


def where(exe) -> dict[str, str]:
    return {n: f.attrs["Compiler"] for n, f in exe.mod.functions.items()
            if f.attrs.get("Compiler")}


def run(exe):
    return exe.run(X)["y"]


WANT = np.negative(np.abs(np.maximum(X["x"], 0)))


@pytest.mark.parametrize("bad", ["broken", "crashing"])
def test_a_region_that_cannot_build_moves_to_the_next_backend_taking_it(backends, bad):
    part = byoc.partition(byoc.load_onnx(MODEL), [bad, "partial", "good"])
    with pytest.warns(RuntimeWarning) as record:
        exe = byoc.build(part, fallback="next")
    assert list(where(exe).values()) == ["good"], "partial does not take Neg: skipped"
    (name,) = exe.moves
    assert exe.moves[name].startswith(f"region {name} moved from {bad} to good: {bad} cannot "
                                      "build it: ")
    assert len([w for w in record if "moved" in str(w.message)]) == 1
    assert not exe.fallbacks
    np.testing.assert_array_equal(run(exe), WANT)


def test_no_backend_left_means_the_host(backends):
    part = byoc.partition(byoc.load_onnx(MODEL), ["broken", "partial"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = byoc.build(part, fallback="next")
    assert not where(exe) and not exe.moves
    assert list(exe.fallbacks.values())[0].endswith("broken cannot build it: no compiler for "
                                                    "this one")
    np.testing.assert_array_equal(run(exe), WANT)


def test_the_next_is_after_its_own_place_in_the_list_then_before(backends):
    from byoc.runtime.fallback import next_backends

    assert next_backends(["a", "b", "c", "d"], "c") == ["d", "a", "b"]
    assert next_backends(["a", "b"], "x") == ["a", "b"]


def test_a_first_run_that_fails_moves_the_region_across_devices(backends):
    part = byoc.partition(byoc.load_onnx(MODEL), ["flaky", "onnxruntime"])
    exe = byoc.build(part, fallback="next")
    with pytest.warns(RuntimeWarning, match="moved from flaky to onnxruntime: flaky cannot run "
                                            "it: device lost"):
        got = run(exe)
    np.testing.assert_allclose(got, WANT, rtol=0, atol=0)
    assert len(exe.moves) == 1
    np.testing.assert_allclose(run(exe), WANT)  # and from then on, without a warning


def test_without_fallback_the_error_is_raised(backends):
    part = byoc.partition(byoc.load_onnx(MODEL), ["broken", "good"])
    with pytest.raises(ByocError, match="no compiler"):
        byoc.build(part)
    with pytest.raises(ByocError, match="fallback must be 'host', 'next' or None"):
        byoc.build(part, fallback="elsewhere")


def test_a_plan_replayed_with_fallback_next(backends, tmp_path, capsys):
    from byoc.cli import main
    from tests.tuning.util import Costs, FakeMeasurer

    node = {n: {"host": 5.0, "broken": 1.0, "good": 2.0} for n in ("n0", "n1", "n2")}
    costs = Costs(node, {"broken": 0.1, "good": 0.1}, {"broken": 0.0, "good": 0.0})
    mod = byoc.load_onnx(MODEL)
    plan = byoc.tune(mod, ["broken", "good"], X, atoms=3,
                     measurer=lambda t: FakeMeasurer(t, costs))
    assert set(plan.placement().values()) == {"broken"}
    path = tmp_path / "plan.json"
    plan.save(path)
    model = tmp_path / "m.onnx"
    model.write_bytes(MODEL.SerializeToString())
    assert main(["run", str(model), "--plan", str(path), "--fallback", "next"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("byoc: warning: region ") and \
        "moved from broken to good" in err[0]
    assert main(["run", str(model), "--plan", str(path)]) == 2
    assert "no compiler for this one" in capsys.readouterr().err


def test_tune_records_the_moves_in_the_plan(backends):
    from tests.tuning.util import Costs, FakeMeasurer

    node = {n: {"host": 5.0, "broken": 1.0, "good": 2.0} for n in ("n0", "n1", "n2")}
    costs = Costs(node, {"broken": 0.1, "good": 0.1}, {"broken": 0.0, "good": 0.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = byoc.tune(byoc.load_onnx(MODEL), ["broken", "good"], X, atoms=3,
                         measurer=lambda t: FakeMeasurer(t, costs), fallback="next")
    (move,) = plan.data["moves"]
    assert (move["from"], move["to"]) == ("broken", "good")
    assert plan.placement() == {"n0": "good", "n1": "good", "n2": "good"}
    part = byoc.partition(byoc.load_onnx(MODEL), plan=plan)
    np.testing.assert_array_equal(byoc.build(part).run(X)["y"], WANT)
