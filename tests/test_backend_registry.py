"""The backend registry: supports and its combinators, built-ins, entry points, clear errors."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import numpy as np
import pytest

import byoc
from byoc import op
from byoc.backend import (
    BackendError,
    all_of,
    any_of,
    dtypes,
    fewer_than,
    get_backend,
    register_backend,
    unregister_backend,
)
from byoc.ir import Function
from byoc.pattern import is_op, wildcard
from tests.passes.util import assert_same_run, module


def _calls():
    x = op.var("x", (2, 2))
    i = op.var("i", (2, 2), "int64")
    return op.Relu(x, span="relu"), op.Abs(x), op.Relu(i), op.Cast(x, to=7)


def test_supports_takes_op_names_and_predicates(backends):
    relu, abs_, relu_int, _ = _calls()
    names = backends("names", {"Relu"})
    assert names.check(relu) is True
    assert names.check(abs_) == "op Abs is not supported"
    both = backends("both", {"Relu", "Abs", dtypes("float32")})
    assert both.check(relu) is True and both.check(abs_) is True
    assert both.check(relu_int) == "input 0 is int64, not float32"
    only_pred = backends("pred", lambda call: call.op.startswith("A") or "only A* ops")
    assert only_pred.check(abs_) is True and only_pred.check(relu) == "only A* ops"
    assert backends("nothing", set()).check(relu) == "op Relu is not supported"
    assert backends("false", lambda call: False).check(relu) == "not supported"


def test_combinators_say_why():
    relu, abs_, relu_int, cast = _calls()
    fp32_relu = all_of("Relu", dtypes("float32"))
    assert fp32_relu(relu) is True
    assert fp32_relu(relu_int) == "input 0 is int64, not float32"
    assert fp32_relu(abs_) == "op Abs is not supported"
    relu_or_fp32 = any_of({"Relu"}, dtypes("float32"))
    assert relu_or_fp32(relu_int) is True and relu_or_fp32(abs_) is True
    assert any_of("Abs", dtypes("float16"))(relu) == ("op Relu is not supported and input 0 is "
                                                      "float32, not float16")
    assert dtypes("float32")(cast) == "output 0 is int64, not float32"


def test_a_predicate_that_raises_names_the_backend_node_and_op(backends):
    relu, *_ = _calls()
    broken = backends("broken", lambda call: call.attrs["missing"])
    with pytest.raises(BackendError, match=r"node 'relu' \(Relu\): backend 'broken': support "
                                           r"check raised KeyError"):
        broken.check(relu)


def test_bad_registrations_are_refused(backends):
    backends("dup", {"Relu"})
    with pytest.raises(BackendError, match="already registered"):
        register_backend("dup", supports={"Relu"}, compile=lambda f: None)
    with pytest.raises(BackendError, match="identifier"):
        register_backend("no-dashes", supports={"Relu"}, compile=lambda f: None)
    with pytest.raises(BackendError, match="op names and predicates"):
        register_backend("bad_support", supports={"Relu", 3}, compile=lambda f: None)
    with pytest.raises(BackendError, match=r"\(name, pattern\)"):
        register_backend("bad_pattern", supports={"Relu"}, compile=lambda f: None,
                         patterns=[is_op("Relu")(wildcard())])
    with pytest.raises(BackendError, match="compile must be callable"):
        register_backend("bad_compile", supports={"Relu"}, compile=None)


def test_an_unknown_backend_lists_the_known_ones():
    with pytest.raises(BackendError, match=r"unknown backend 'nope'; known backends: .*reference"):
        get_backend("nope")


def test_the_reference_backend_registers_on_first_use_only():
    """Neither importing byoc nor importing the backend's module registers it: get_backend does."""
    code = ("import byoc, byoc.backends.reference\n"
            "from byoc.backend import _REGISTRY\n"
            "assert 'reference' not in _REGISTRY, _REGISTRY\n"
            "assert byoc.get_backend('reference') is _REGISTRY['reference']\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


class _FakeEntryPoint:
    def __init__(self, name, target):
        self.name, self.value, self._target, self.loads = name, f"fake_pkg:{name}", target, 0

    def load(self):
        self.loads += 1
        return self._target


@pytest.fixture
def entry_points(monkeypatch):
    """Fake ``byoc.backends`` entry points: ``entry_points(name=target, ...)``."""
    made = []

    def install(**targets):
        eps = [_FakeEntryPoint(n, t) for n, t in targets.items()]
        made.extend(targets)
        monkeypatch.setattr(importlib.metadata, "entry_points",
                            lambda group=None: eps if group == "byoc.backends" else [])
        return eps

    yield install
    for name in made:
        unregister_backend(name)


def test_an_entry_point_registers_its_backend_the_first_time_it_is_asked_for(entry_points):
    def register():
        register_backend("outside", supports={"Relu"}, compile=get_backend("reference").compile)

    (ep,) = entry_points(outside=register)
    assert ep.loads == 0
    backend = byoc.get_backend("outside")
    assert backend.name == "outside" and ep.loads == 1
    assert byoc.get_backend("outside") is backend and ep.loads == 1
    x = op.var("x", (3,))
    mod = module(op.Relu(x), [x])
    assert_same_run(mod, byoc.partition(mod, backends=["outside"]))


def test_a_broken_entry_point_is_a_clear_error(entry_points):
    def crash():
        raise RuntimeError("no driver")

    entry_points(silent=lambda: None, crashing=crash)
    with pytest.raises(BackendError, match=r"'silent': entry point 'fake_pkg:silent' did not "
                                           "register a backend of that name"):
        get_backend("silent")
    with pytest.raises(BackendError, match=r"'crashing': entry point .* failed: RuntimeError: "
                                           "no driver"):
        get_backend("crashing")


def test_a_backend_may_reuse_another_s_compile(backends):
    """A backend for the Relu/Abs family that compiles its regions as the reference does."""
    family = backends("family", {"Relu", "Abs"})
    assert family.compile is get_backend("reference").compile
    x = op.var("x", (2, 3))
    mod = module(op.Exp(op.Abs(op.Relu(x))), [x])
    part = byoc.partition(mod, backends=["family"])
    assert_same_run(mod, part, {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)})


def test_fewer_than_counts_compute_ops_inside_composites():
    x = op.var("x", (2, 2))
    reshape = op.Reshape(x, op.const(np.array([4], np.int64)))
    one = Function((x,), op.Relu(reshape))
    assert fewer_than(2)(one) == "only 1 compute op(s), fewer than 2"
    assert fewer_than(1)(one) is None
