"""Numbers that were wrong on some backend (issue 16): each case against onnxruntime where it
answers, against the ONNX spec or byoc's documented choice (docs/decisions.md) where it does not.

Every case runs on the host and partitioned for each backend that takes it.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.errors import ByocError, KernelError, RegionError
from byoc.inputs import random_inputs
from byoc.ir import DEFAULTS
from tests.conftest import FLOAT, INT64, make_model
from tests.fuzz.harness import CCOMPILER

BACKENDS = ["host", "reference", "onnxruntime"] + (["ccompiler", "native"] if CCOMPILER else [])


@pytest.fixture(scope="module", autouse=True)
def private_build_cache(tmp_path_factory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BYOC_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


def _build(model: onnx.ModelProto, backend: str) -> byoc.runtime.Executable:
    mod = byoc.load_onnx(model)
    return byoc.build(mod if backend == "host" else byoc.partition(mod, backends=[backend]))


def _assert_matches_onnxruntime(model: onnx.ModelProto, feeds: dict, backend: str) -> dict:
    got = _build(model, backend).run(feeds)
    bad = [c for c in compare_outputs(got, run_onnxruntime(model, feeds)) if not c.ok]
    assert not bad, (got, bad)
    return got


# -- capture in one thread, runs in another -------------------------------------------------------


def _loop_model(trips: int) -> onnx.ModelProto:
    """acc += x, ``trips`` times; the Loop also scans out each acc."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["acc2"], name="step"),
         helper.make_node("Identity", ["cond"], ["cond2"], name="keep_going"),
         helper.make_node("Identity", ["acc2"], ["seen"], name="scan_out")],
        "body", [helper.make_tensor_value_info("i", INT64, []),
                 helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc", FLOAT, [3])],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in
         [("cond2", TensorProto.BOOL, []), ("acc2", FLOAT, [3]), ("seen", FLOAT, [3])]])
    loop = helper.make_node("Loop", ["trips", "", "zero"], ["total", "all"], name="loop",
                            body=body)
    return make_model([loop], [("x", FLOAT, [3])], [("total", FLOAT, [3]), ("all", FLOAT, None)],
                      [numpy_helper.from_array(np.array(trips, np.int64), "trips"),
                       numpy_helper.from_array(np.zeros(3, np.float32), "zero")])


def test_a_capture_records_only_its_own_threads_body_runs() -> None:
    """Other threads running the same executable feed nothing into a capture (the probe was
    one attribute of the executable, so their Loop bodies were recorded too)."""
    exe = byoc.build(byoc.load_onnx(_loop_model(120)))
    stop = threading.Event()

    def others() -> None:
        while not stop.is_set():
            exe.run({"x": np.full(3, 1000, np.float32)})

    threads = [threading.Thread(target=others) for _ in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads take turns often, as on a busy machine
    for t in threads:
        t.start()
    try:
        for _ in range(4):
            run = exe.run({"x": np.ones(3, np.float32)}, capture="all", iteration=40)
            (body,) = run.bodies.values()
            np.testing.assert_array_equal(body["acc"], np.full(3, 40, np.float32))
            np.testing.assert_array_equal(body["acc2"], np.full(3, 41, np.float32))
            np.testing.assert_array_equal(run.outputs["total"], np.full(3, 120, np.float32))
            assert sum(span == "step" for span, *_ in run.events) == 120  # its own body runs
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(interval)


# -- Max and Min with NaN -------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("backend", BACKENDS)
def test_max_and_min_keep_nan_in_any_operand(op: str, n: int, backend: str) -> None:
    names = [f"x{k}" for k in range(n)]
    model = make_model([helper.make_node(op, names, ["y"], name="the_op")],
                       [(x, FLOAT, [2, 6]) for x in names], [("y", FLOAT, [2, 6])])
    rng = np.random.default_rng(n)
    feeds = {x: rng.standard_normal((2, 6)).astype(np.float32) for x in names}
    for k, x in enumerate(names):  # a NaN in each operand at its own place, and infinities
        feeds[x][k % 2, k] = np.nan
        feeds[x][1 - k % 2, 5] = np.inf if k % 2 else -np.inf
    got = _assert_matches_onnxruntime(model, feeds, backend)
    assert np.isnan(got["y"]).sum() == n


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_max_and_min_of_many_operands(backend: str) -> None:
    names = [f"x{k}" for k in range(4)]
    nodes = [helper.make_node("Max", names, ["hi"], name="hi"),
             helper.make_node("Min", names, ["lo"], name="lo")]
    model = make_model(nodes, [(x, TensorProto.INT32, [5]) for x in names],
                       [("hi", TensorProto.INT32, [5]), ("lo", TensorProto.INT32, [5])])
    edge = np.array([-2**31, 2**31 - 1, 0, -1, 7], np.int32)
    feeds = {x: np.roll(edge, k) for k, x in enumerate(names)}
    _assert_matches_onnxruntime(model, feeds, backend)


# -- integer division where C traps ---------------------------------------------------------------


def _expected_division(op: str, fmod: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """byoc's answers, element by element in Python integers (docs/decisions.md): division
    truncates toward zero, x / 0 and x % 0 are 0, INT_MIN / -1 wraps to INT_MIN."""
    info = np.iinfo(a.dtype)
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if y == 0:
            r = 0
        elif op == "Div":
            r = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            r = info.min if r > info.max else r  # INT_MIN / -1
        else:
            r = x % y if not fmod else abs(x) % abs(y) * (1 if x >= 0 else -1)
        out.append(r)
    return np.array(out, a.dtype)


def _division_case(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    lo = np.iinfo(dtype).min
    a = np.array([lo, lo, 7, -7, 0, 7, -7, 7, -7, lo, np.iinfo(dtype).max, 5], dtype)
    b = np.array([-1, 1, 0, 0, 0, 2, 2, -2, -2, 2, -1, 3], dtype)
    return a, b


DIVISIONS = [("Div", 0), ("Mod", 0), ("Mod", 1)]


@pytest.mark.parametrize("op, fmod", DIVISIONS, ids=["Div", "Mod", "Mod-fmod"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_division_has_one_answer_on_every_backend(op: str, fmod: int, dtype: type,
                                                          backend: str) -> None:
    """INT_MIN / -1 and division by zero: onnxruntime dies of SIGFPE or fails the run there;
    byoc gives every backend the same defined answer and onnxruntime's everywhere else."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    attrs = {"fmod": fmod} if op == "Mod" else {}
    model = make_model([helper.make_node(op, ["a", "b"], ["y"], name="the_div", **attrs)],
                       [("a", elem, ["n"]), ("b", elem, ["n"])], [("y", elem, ["n"])])
    a, b = _division_case(dtype)
    got = _build(model, backend).run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, _expected_division(op, fmod, a, b))
    answered = (b != 0) & ~((a == np.iinfo(dtype).min) & (b == -1))  # where onnxruntime lives
    want = run_onnxruntime(model, {"a": a[answered], "b": b[answered]})["y"]
    np.testing.assert_array_equal(got[answered], want)


def test_onnxruntime_declines_integer_division_it_would_trap_on() -> None:
    nodes = [helper.make_node("Div", ["a", "b"], ["q"], name="by_input"),
             helper.make_node("Div", ["a", "two"], ["h"], name="by_two"),
             helper.make_node("Div", ["a", "minus_one"], ["n"], name="by_minus_one"),
             helper.make_node("Mod", ["a", "two"], ["m"], name="mod_two"),
             helper.make_node("Div", ["f", "f"], ["g"], name="float_div")]
    model = make_model(nodes, [("a", INT64, [4]), ("b", INT64, [4]), ("f", FLOAT, [4])],
                       [(n, INT64, [4]) for n in "qhnm"] + [("g", FLOAT, [4])],
                       [numpy_helper.from_array(np.array(2, np.int64), "two"),
                        numpy_helper.from_array(np.array(-1, np.int64), "minus_one")])
    why = byoc.explain(byoc.partition(byoc.load_onnx(model), backends=["onnxruntime"]))
    assert set(why) == {"by_input", "by_minus_one"}
    assert "integer Div by a divisor that may be 0 or -1" in why["by_input"]


# -- Scan inputs of different lengths -------------------------------------------------------------


def _scan_model() -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "a"], ["t"]), helper.make_node("Add", ["t", "b"], ["s2"]),
         helper.make_node("Identity", ["s2"], ["o"])], "body",
        [helper.make_tensor_value_info(n, FLOAT, [2]) for n in ("s", "a", "b")],
        [helper.make_tensor_value_info(n, FLOAT, [2]) for n in ("s2", "o")])
    scan = helper.make_node("Scan", ["s0", "A", "B"], ["sf", "os"], name="the_scan", body=body,
                            num_scan_inputs=2)
    return make_model([scan], [("s0", FLOAT, [2]), ("A", FLOAT, ["n", 2]), ("B", FLOAT, ["m", 2])],
                      [("sf", FLOAT, [2]), ("os", FLOAT, None)])


@pytest.mark.parametrize("lengths", [(3, 5), (5, 3)])
@pytest.mark.parametrize("backend", ["host", "reference", "onnxruntime"])
def test_scan_inputs_of_different_lengths_are_refused(lengths: tuple[int, int],
                                                      backend: str) -> None:
    """They ran the shorter length and dropped the rest, or overran: onnxruntime refuses both.
    On onnxruntime the Scan runs whole in a region (its body is all onnxruntime's), which says
    so in onnxruntime's words."""
    model = _scan_model()
    feeds = {"s0": np.zeros(2, np.float32), "A": np.ones((lengths[0], 2), np.float32),
             "B": np.ones((lengths[1], 2), np.float32)}
    with pytest.raises(RegionError if backend == "onnxruntime" else KernelError) as info:
        _build(model, backend).run(feeds)
    if backend != "onnxruntime":
        assert str(info.value).startswith("node 'the_scan' (Scan): ValueError: scan inputs "
                                          f"differ in length: 'A' has {lengths[0]} steps")
    else:
        assert "(node 'the_scan')" in str(info.value)
        assert "Scan inputs have inconsistent sequence lengths" in str(info.value)
    with pytest.raises(Exception, match="inconsistent sequence lengths"):
        run_onnxruntime(model, feeds)
    feeds["A"] = feeds["A"][:min(lengths)]  # equal lengths run, equal to onnxruntime
    feeds["B"] = feeds["B"][:min(lengths)]
    _assert_matches_onnxruntime(model, feeds, backend)


# -- outputs never alias inputs, weights or each other --------------------------------------------

W = np.arange(6, dtype=np.float32).reshape(2, 3)


def _aliasing_model() -> onnx.ModelProto:
    """Every op that may hand back its input unchanged, each output its own graph output."""
    shape = helper.make_tensor("shape", INT64, [2], [3, 2])
    axes = helper.make_tensor("axes", INT64, [1], [0])
    nodes = [
        helper.make_node("Identity", ["x"], ["identity"]),
        helper.make_node("Identity", ["x"], ["identity_again"]),
        helper.make_node("Reshape", ["x", "shape"], ["reshape"]),
        helper.make_node("Flatten", ["x"], ["flatten"], axis=1),
        helper.make_node("Unsqueeze", ["x", "axes"], ["unsqueeze"]),
        helper.make_node("Squeeze", ["unsqueeze", "axes"], ["squeeze"]),
        helper.make_node("Cast", ["x"], ["cast"], to=FLOAT),
        helper.make_node("Dropout", ["x"], ["dropout"]),
        helper.make_node("Expand", ["x", "same_shape"], ["expand"]),
        helper.make_node("Max", ["x"], ["max_of_one"]),
        helper.make_node("Sum", ["x"], ["sum_of_one"]),
        helper.make_node("Optional", ["x"], ["opt"]),
        helper.make_node("OptionalGetElement", ["opt"], ["optional"]),
        helper.make_node("Identity", ["w"], ["weight"]),
        helper.make_node("Relu", ["x"], ["relu"]),
        helper.make_node("Identity", ["relu"], ["relu_again"]),
    ]
    outs = ["identity", "identity_again", "reshape", "flatten", "squeeze", "cast", "dropout",
            "expand", "max_of_one", "sum_of_one", "optional", "weight", "relu", "relu_again"]
    shapes = {"reshape": [3, 2], "flatten": [2, 3]}
    return make_model(nodes, [("x", FLOAT, [2, 3])],
                      [(o, FLOAT, shapes.get(o, [2, 3])) for o in outs]
                      + [("x", FLOAT, [2, 3]), ("w", FLOAT, [2, 3])],
                      [shape, axes, numpy_helper.from_array(W, "w"),
                       numpy_helper.from_array(np.array([2, 3], np.int64), "same_shape")],
                      opset=18)  # onnxruntime has no Optional kernel of a later opset


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_into_an_output_changes_no_input_weight_or_other_output(backend: str) -> None:
    model = _aliasing_model()
    exe = _build(model, backend)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    kept = x.copy()
    first = exe.run({"x": x})
    want = run_onnxruntime(model, {"x": kept})
    assert not [c for c in compare_outputs(first, want) if not c.ok]
    for name, out in first.items():
        assert out.flags.writeable, name
        out[...] = 99  # into every output, one after the other
    np.testing.assert_array_equal(x, kept)  # the caller's input
    for name, out in first.items():
        assert (out == 99).all(), name  # no output was another's memory
    again = exe.run({"x": x})  # nor a weight's: the next run is the same
    assert not [c for c in compare_outputs(again, want) if not c.ok]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", [None, "Identity", "Flatten"])
def test_a_model_s_one_output_is_its_own_when_it_is_the_input(backend: str, op: str | None
                                                              ) -> None:
    """One output, the input itself (no node) or a view of it: the check for one fresh output
    (a few comparisons) must not let it through uncopied."""
    nodes = [helper.make_node(op, ["x"], ["y"])] if op else []
    model = make_model(nodes, [("x", FLOAT, [2, 3])], [("y" if op else "x", FLOAT, [2, 3])])
    x = np.zeros((2, 3), np.float32)  # an array of its own (no base), as a caller's often is
    (out,) = _build(model, backend).run({"x": x}).values()
    out[...] = 99
    np.testing.assert_array_equal(x, np.zeros((2, 3), np.float32))


# -- empty axes -----------------------------------------------------------------------------------


def _empty_cases():
    for op in ["Softmax", "LogSoftmax", "Hardmax", "ReduceMean", "ReduceSum", "ReduceMax",
               "ReduceL2", "ReduceLogSumExp", "TopK"]:
        for shape, axis in [((0, 3), 0), ((0, 3), 1), ((3, 0), 1), ((3, 0), 0)]:
            yield op, shape, axis


@pytest.mark.parametrize("op, shape, axis", list(_empty_cases()))
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_axis_gives_what_onnxruntime_gives(op: str, shape: tuple, axis: int,
                                                    backend: str) -> None:
    """A (0, 3) or (3, 0) input: empty results, or each reduction's identity (the mean of
    nothing: undefined in ONNX, 0 in onnxruntime and byoc)."""
    inits, attrs, ins, outs = [], {"axis": axis}, ["x"], [("y", FLOAT, None)]
    if op.startswith("Reduce"):
        attrs = {"keepdims": 0}
        inits = [numpy_helper.from_array(np.array([axis], np.int64), "axes")]
        ins.append("axes")
    elif op == "TopK":
        inits = [numpy_helper.from_array(np.array([0], np.int64), "k")]
        ins.append("k")
        outs.append(("i", INT64, None))
    node = helper.make_node(op, ins, [n for n, _, _ in outs], name="the_op", **attrs)
    model = make_model([node], [("x", FLOAT, list(shape))], outs, inits)
    _assert_matches_onnxruntime(model, {"x": np.zeros(shape, np.float32)}, backend)


def _batch_model(op: str) -> onnx.ModelProto:
    """``op`` on an (n, 4, 6, 6) input; n is fed as 0."""
    w = {"Conv": np.ones((8, 4, 3, 3), np.float32), "GroupConv": np.ones((4, 1, 3, 3), np.float32)}
    inits, attrs, ins = [], {}, ["x"]
    if op in w:
        inits, ins = [numpy_helper.from_array(w[op], "w")], ["x", "w"]
        attrs = {"pads": [1, 1, 1, 1]} if op == "Conv" else {"group": 4}
    node = helper.make_node("Conv" if op in w else op, ins, ["y"], name="the_op", **attrs)
    return make_model([node], [("x", FLOAT, ["n", 4, 6, 6])], [("y", FLOAT, None)], inits)


@pytest.mark.parametrize("op", ["Conv", "GroupConv", "GlobalAveragePool", "MaxPool"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_batch_gives_what_onnxruntime_gives(op: str, backend: str) -> None:
    """``run --dim batch=0`` on the embedded ResNet: the host's Conv and GlobalAveragePool
    reshaped with -1, which numpy cannot infer from an empty array."""
    model = _batch_model(op) if op != "MaxPool" else make_model(
        [helper.make_node("MaxPool", ["x"], ["y"], name="the_op", kernel_shape=[2, 2])],
        [("x", FLOAT, ["n", 4, 6, 6])], [("y", FLOAT, None)])
    for n in (0, 2):
        x = np.arange(n * 144, dtype=np.float32).reshape(n, 4, 6, 6) / 100
        got = _assert_matches_onnxruntime(model, {"x": x}, backend)
        assert got["y"].shape[0] == n


def test_group_normalization_of_an_empty_batch_is_empty() -> None:
    """onnxruntime's own GroupNormalization (a function reshaping with -1) fails on it."""
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    model = make_model([node], [("x", FLOAT, ["n", 4, 6, 6])], [("y", FLOAT, None)],
                       [numpy_helper.from_array(np.ones(4, np.float32), "s"),
                        numpy_helper.from_array(np.zeros(4, np.float32), "b")], opset=21)
    exe = _build(model, "host")
    assert exe.run({"x": np.zeros((0, 4, 6, 6), np.float32)})["y"].shape == (0, 4, 6, 6)


# -- an input with an initializer: an overridable default -----------------------------------------


def _defaulted_model(ir_version: int = 10, declared: list | None = None) -> onnx.ModelProto:
    """y = x * scale + bias; ``bias`` is an input with an initializer (a default)."""
    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"], name="mul"),
             helper.make_node("Add", ["xs", "bias"], ["y"], name="add")]
    return make_model(nodes, [("x", FLOAT, ["n", 3]), ("bias", FLOAT, declared or ["k", 3])],
                      [("y", FLOAT, ["n", 3])],
                      [numpy_helper.from_array(np.full(3, 2, np.float32), "scale"),
                       numpy_helper.from_array(np.arange(3, dtype=np.float32)[None], "bias")],
                      ir_version=ir_version)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_with_an_initializer_is_a_default_the_caller_may_override(backend: str) -> None:
    """onnxruntime takes the feed (IR 4 and later); byoc refused it as an unknown input."""
    model = _defaulted_model()
    x = np.ones((2, 3), np.float32)
    fed = _assert_matches_onnxruntime(model, {"x": x, "bias": np.full((1, 3), 10, np.float32)},
                                      backend)
    np.testing.assert_array_equal(fed["y"], np.full((2, 3), 12, np.float32))
    default = _assert_matches_onnxruntime(model, {"x": x}, backend)
    np.testing.assert_array_equal(default["y"], 2 + np.arange(3, dtype=np.float32)[None] + 0 * x)
    # a feed of another length along its symbolic dim, as its declared type allows
    _assert_matches_onnxruntime(model, {"x": x, "bias": np.ones((2, 3), np.float32)}, backend)
    with pytest.raises(byoc.errors.InputError, match="input 'bias' must be float32"):
        _build(model, backend).run({"x": x, "bias": np.ones((1, 3), np.int64)})


def test_the_default_is_a_parameter_of_main_and_exports_as_an_initializer() -> None:
    mod = byoc.load_onnx(_defaulted_model())
    assert [p.name for p in mod.main.params] == ["x", "bias"]
    (name, value), = mod.main.attrs[DEFAULTS].items()
    assert name == "bias" and not value.flags.writeable
    np.testing.assert_array_equal(value, [[0, 1, 2]])
    for exported in (byoc.to_onnx(mod), byoc.to_onnx(byoc.partition(mod, backends=["reference"]))):
        assert [i.name for i in exported.graph.input] == ["x", "bias"]
        assert "bias" in {t.name for t in exported.graph.initializer}
        x_in = np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(run_onnxruntime(exported, {"x": x_in})["y"],
                                      run_onnxruntime(_defaulted_model(), {"x": x_in})["y"])


def test_before_ir_4_an_initializer_listed_as_an_input_is_a_constant() -> None:
    """Old models list every weight as an input: constants, as onnxruntime reads them (it
    refuses a feed for one), so the backends still see their weights as constants."""
    model = _defaulted_model(ir_version=3, declared=[1, 3])
    mod = byoc.load_onnx(model)
    assert [p.name for p in mod.main.params] == ["x"]
    with pytest.raises(byoc.errors.InputError, match="unknown input 'bias'"):
        byoc.build(mod).run({"x": np.ones((2, 3), np.float32),
                             "bias": np.ones((1, 3), np.float32)})
    _assert_matches_onnxruntime(model, {"x": np.ones((2, 3), np.float32)}, "host")


def test_a_default_that_does_not_fit_its_input_is_refused() -> None:
    model = _defaulted_model(declared=[2, 3])  # the initializer is (1, 3)
    with pytest.raises(byoc.errors.ModelError, match=r"graph input 'bias' is Tensor\[\(2, 3\), "
                                                     r"float32\], but its initializer"):
        byoc.load_onnx(model)


def test_the_cli_uses_the_default_and_does_not_make_it_up(tmp_path, capsys) -> None:
    from byoc.cli import main

    onnx.save(_defaulted_model(), tmp_path / "m.onnx")
    code = main(["run", str(tmp_path / "m.onnx"), "--compare", "onnxruntime", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["ok"] is True, (out, err)
    made_up = random_inputs(byoc.load_onnx(_defaulted_model()).main, {"n": 2})
    assert set(made_up) == {"x"}  # the run takes bias's default


# -- a conv's channels against its weights, known only at run time ------------------------------


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b in ("host", "ccompiler", "native")])
def test_a_conv_fed_channels_its_weights_do_not_take_is_an_error_naming_the_node(backend):
    """6 channels through weights of 2 (the channel dim symbolic, so the import cannot know):
    an error naming the node, where native's C had read the weights past their end."""
    w = numpy_helper.from_array(np.ones((8, 2, 3, 3), np.float32), "w")
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv_c")],
                       [("x", FLOAT, [1, "c", 8, 8])], [("y", FLOAT, None)], [w])
    exe = _build(model, backend)
    good = np.ones((1, 2, 8, 8), np.float32)
    assert float(exe.run({"x": good})["y"][0, 0, 0, 0]) == 18.0
    with pytest.raises(ByocError, match="node 'conv_c' \\(Conv\\): (ValueError: )?input has 6 channels, its "
                                          "weights \\(8, 2, 3, 3\\) take 2 x group 1 = 2"):
        exe.run({"x": np.ones((1, 6, 8, 8), np.float32)})


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b in ("host", "ccompiler", "native")])
def test_a_conv_bias_of_the_wrong_length_is_an_error_naming_the_node(backend):
    """3 biases for 8 output channels, the bias a graph input of symbolic length: native's C
    had read past its end."""
    w = numpy_helper.from_array(np.ones((8, 2, 3, 3), np.float32), "w")
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv_b")],
                       [("x", FLOAT, [1, 2, 8, 8]), ("b", FLOAT, ["m"])], [("y", FLOAT, None)],
                       [w])
    exe = _build(model, backend)
    x = np.ones((1, 2, 8, 8), np.float32)
    assert exe.run({"x": x, "b": np.arange(8, dtype=np.float32)})["y"][0, 7, 0, 0] == 25.0
    with pytest.raises(ByocError, match="node 'conv_b' \\(Conv\\): (ValueError: )?bias of shape "
                                        "\\(3,\\) for 8 output channels"):
        exe.run({"x": x, "b": np.ones(3, np.float32)})



# -- a MatMul's inner dims and a BatchNormalization's scales, known only at run time ----------


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b in ("host", "ccompiler", "native")])
def test_a_matmul_fed_inner_dims_that_differ_is_an_error_naming_the_node(backend):
    """x's last dim symbolic (so the import cannot know) against weights of 4 rows: one line
    saying which dims differ, not numpy's gufunc signature."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm_k")],
                       [("x", FLOAT, [2, "k"])], [("y", FLOAT, None)], [w])
    exe = _build(model, backend)
    assert exe.run({"x": np.ones((2, 4), np.float32)})["y"].tolist() == [[18, 22, 26]] * 2
    with pytest.raises(ByocError, match="node 'mm_k' \\(MatMul\\): (ValueError: )?inner dims "
                                        "differ: A \\(2, 5\\) has 5 columns, B \\(4, 3\\) has 4"):
        exe.run({"x": np.ones((2, 5), np.float32)})


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b in ("host", "ccompiler", "native")])
def test_batch_norm_scales_of_the_wrong_length_are_an_error_naming_the_node(backend):
    """3 scales for 4 channels, the scales a graph input of symbolic length (native folds a
    BN's constants into the conv before it: here they are not constant)."""
    consts = [numpy_helper.from_array(np.full(4, v, np.float32), n)
              for n, v in (("b", 1.0), ("m", 0.0), ("v", 1.0))]
    model = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                         name="bn_s", epsilon=0.0)],
                       [("x", FLOAT, [1, 4, 2, 2]), ("s", FLOAT, ["c"])], [("y", FLOAT, None)],
                       consts)
    exe = _build(model, backend)
    x = np.ones((1, 4, 2, 2), np.float32)
    assert exe.run({"x": x, "s": np.full(4, 2.0, np.float32)})["y"].ravel().tolist() == [3.0] * 16
    with pytest.raises(ByocError, match="node 'bn_s' \\(BatchNormalization\\): (ValueError: )?"
                                        "scale has 3 values for 4 channels"):
        exe.run({"x": x, "s": np.ones(3, np.float32)})
