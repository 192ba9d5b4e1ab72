"""One thread setting: where the count comes from, and every engine that takes it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper

import byoc
from byoc.runtime import threads
from tests.conftest import make_model
from tests.test_cli import byoc_cli

FLOAT = TensorProto.FLOAT


@pytest.fixture(autouse=True)
def _no_setting(monkeypatch):
    monkeypatch.delenv(threads.ENV, raising=False)
    before = threads.configured()
    threads.set_threads(None)
    yield
    threads.set_threads(before)


def _matmul_model(m: int, k: int, n: int):
    w = helper.make_tensor("w", FLOAT, [k, n], np.ones(k * n, np.float32))
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                      [("x", FLOAT, [m, k])], [("y", FLOAT, [m, n])], [w])


def test_the_count_comes_from_the_call_then_set_threads_then_the_environment_then_cores(
        monkeypatch):
    cores = threads.physical_cores()
    assert 1 <= cores <= (__import__("os").cpu_count() or 1)
    assert threads.resolve(None) == cores
    monkeypatch.setenv(threads.ENV, "3")
    assert threads.resolve(None) == 3
    threads.set_threads(5)
    assert threads.resolve(None) == 5
    assert threads.resolve(2) == 2
    threads.set_threads(None)
    assert threads.resolve(None) == 3


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5])
def test_a_bad_count_is_refused_with_what_is_wrong(bad):
    with pytest.raises(byoc.InputError, match="threads"):
        threads.resolve(bad)


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(threads.ENV, "many")
    with pytest.raises(byoc.InputError, match="BYOC_THREADS"):
        byoc.build(byoc.load_onnx(_matmul_model(2, 2, 2)))


def test_backends_read_the_build_s_count():
    seen = []

    def compile_region(func):
        seen.append(threads.build_threads())
        return lambda *a: (a[0],)

    byoc.register_backend("count_threads", supports={"Relu"}, compile=compile_region)
    try:
        model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                           [("x", FLOAT, [4])], [("y", FLOAT, [4])])
        part = byoc.partition(byoc.load_onnx(model), backends=["count_threads"])
        assert byoc.build(part, threads=3).threads == 3
        threads.set_threads(2)
        byoc.build(part)
    finally:
        from byoc.backend import unregister_backend

        unregister_backend("count_threads")
    assert seen == [3, 2]


def test_onnxruntime_regions_and_one_node_kernels_get_the_count(monkeypatch):
    import onnxruntime as ort

    made = []
    real = ort.InferenceSession

    def spy(model, options=None, **kw):
        made.append(options.intra_op_num_threads)
        return real(model, options, **kw)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                       [("x", FLOAT, [4])], [("y", FLOAT, [4])])
    part = byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"])
    made.clear()  # the support checks' sessions
    byoc.build(part, threads=3)
    assert made == [3]
    # a contrib op runs on the host through a one-node onnxruntime session
    gelu = make_model([helper.make_node("FastGelu", ["x"], ["y"], name="g", domain="com.microsoft")],
                      [("x", FLOAT, [4])], [("y", FLOAT, [4])],
                      extra_opsets={"com.microsoft": 1})
    made.clear()
    byoc.build(byoc.load_onnx(gelu), threads=2).run({"x": np.ones(4, np.float32)})
    assert made == [2]


def test_host_blas_takes_the_count_for_big_products_one_thread_for_small(monkeypatch):
    asked = []
    monkeypatch.setattr(threads.BLAS, "use", lambda n: asked.append(n))
    rng = np.random.default_rng(0)
    for (m, k, n), want in [((4, 8, 8), 1), ((128, 128, 128), 3)]:
        asked.clear()
        exe = byoc.build(byoc.load_onnx(_matmul_model(m, k, n)), threads=3)
        x = rng.standard_normal((m, k)).astype(np.float32)
        np.testing.assert_allclose(exe.run({"x": x})["y"], x @ np.ones((k, n), np.float32),
                                   rtol=1e-5)
        assert asked == [want]


@pytest.mark.parametrize("fallback", ["host", "next"])
def test_a_region_that_falls_back_at_a_call_runs_on_the_host_at_the_build_s_count(
        monkeypatch, fallback):
    """The host compile happens at the call, outside ``build``: it still takes the build's
    count (3), not the default (2), for the BLAS of its big product."""
    from byoc.backend import unregister_backend
    from byoc.codegen.build_cache import BuildError

    def fails_at_call(func):
        def run(*arrays):
            raise BuildError("no compiler for these shapes")
        return run

    asked = []
    monkeypatch.setattr(threads.BLAS, "use", lambda n: asked.append(n))
    byoc.register_backend("fails_at_call", supports={"MatMul"}, compile=fails_at_call)
    try:
        part = byoc.partition(byoc.load_onnx(_matmul_model(128, 128, 128)),
                              backends=["fails_at_call"])
        threads.set_threads(2)
        exe = byoc.build(part, threads=3, fallback=fallback)
        x = np.ones((128, 128), np.float32)
        with pytest.warns(RuntimeWarning, match="runs on the host: fails_at_call cannot build"):
            y = exe.run({"x": x})["y"]
    finally:
        unregister_backend("fails_at_call")
    np.testing.assert_array_equal(y, np.full((128, 128), 128, np.float32))
    assert list(exe.fallbacks) == [n for n in part.functions if n != "main"]
    assert asked == [3]


def test_a_c_region_that_runs_a_signature_on_the_host_keeps_its_count(monkeypatch):
    """ccompiler runs arrays it cannot specialize for (here float64 for a float32 region) on
    the host, compiled at that call: at the region's count (3), not the default (2)."""
    asked = []
    monkeypatch.setattr(threads.BLAS, "use", lambda n: asked.append(n))
    part = byoc.partition(byoc.load_onnx(_matmul_model(128, 128, 128)), backends=["ccompiler"])
    threads.set_threads(2)
    exe = byoc.build(part, threads=3)
    (region,) = exe.external.values()
    with pytest.warns(RuntimeWarning, match="runs on the host for"):
        (y,) = region(np.ones((128, 128), np.float64))
    np.testing.assert_array_equal(y, np.full((128, 128), 128))
    assert asked == [3]


def test_a_run_gives_numpy_s_blas_its_count_back():
    from threadpoolctl import threadpool_info

    def counts():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = counts()
    exe = byoc.build(byoc.load_onnx(_matmul_model(4, 8, 8)), threads=1)
    exe.run({"x": np.ones((4, 8), np.float32)})
    assert counts() == before


def test_cli_threads_reach_both_sides_of_bench_and_are_printed():
    r = byoc_cli("bench", "--threads", "1", "--repeat", "2", "--warmup", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["threads"] == 1
    r = byoc_cli("bench", "--threads", "2", "--repeat", "2", "--warmup", "0")
    assert "2 threads each side" in r.stdout, r.stdout
    r = byoc_cli("run", "--threads", "0")
    assert r.returncode == 2 and "at least 1" in r.stderr


def test_byoc_s_onnxruntime_sessions_bound_their_spin_the_baseline_keeps_the_default():
    from byoc.compare import onnxruntime_session
    from byoc.runtime.ort_sessions import session

    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                       [("x", FLOAT, [4])], [("y", FLOAT, [4])]).SerializeToString()
    key = "session.intra_op.spin_duration_us"
    engine = session(model, threads=2).get_session_options()
    assert engine.get_session_config_entry(key) == str(threads.ORT_SPIN_US)
    baseline = onnxruntime_session(model, threads=2).get_session_options()
    with pytest.raises(RuntimeError):  # never set: onnxruntime's own spin
        baseline.get_session_config_entry(key)
    with pytest.raises(RuntimeError):  # one thread has no pool to spin
        session(model, threads=1).get_session_options().get_session_config_entry(key)


@pytest.mark.skipif(threads._other_threads() is None, reason="needs /proc")
def test_settle_waits_for_a_spinning_thread_to_stop():
    import threading
    import time

    from backends.ccompiler import pool

    busy = pool.module().lib.byoc_pool_overhead  # multiply-adds in C, the GIL released

    def spin():  # on its own core: a Python loop would only run when the GIL came its way
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:
            busy(1, 1, 3_000_000)  # ~5 ms a call

    t = threading.Thread(target=spin)
    t.start()
    threads.settle(max_s=5.0)
    assert not t.is_alive()
    t.join()


def test_warm_up_runs_once_at_least_then_until_its_time_has_passed():
    import time

    calls = []
    threads.warm_up(lambda: calls.append(1), at_least_s=0.0)
    assert len(calls) == 1
    start = time.perf_counter()
    threads.warm_up(lambda: (calls.append(1), time.sleep(0.004)), at_least_s=0.02)
    assert time.perf_counter() - start >= 0.02 and len(calls) >= 1 + 4
