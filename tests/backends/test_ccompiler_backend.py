"""The ccompiler backend as a whole: what it declines, specialization, the full partition path,
untrusted names, seeing the C, compile errors, host fallback, threads."""

from __future__ import annotations

import re
import threading
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc import op
from byoc.backends import ccompiler
from byoc.backends.ccompiler import compile_region, emit_c, supports, write_c_sources
from byoc.codegen import STATS, CompileError
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.ir import Call, Function, Tuple, post_order

RNG = np.random.default_rng(3)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)], ir_version=10)


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _assert_matches_ort(model, feeds, got):
    bad = [c for c in compare_outputs(got, run_onnxruntime(model, feeds)) if not c.ok]
    assert not bad, bad


# -- what it takes --------------------------------------------------------------------------------


def test_registered_through_get_backend():
    backend = byoc.get_backend("ccompiler")
    assert backend.name == "ccompiler" and backend.compile is compile_region


@pytest.mark.parametrize("build, reason", [
    (lambda: op.Sigmoid(op.var("x", (2, 3), "float16")),
     "ccompiler: float32 only (input 0 is float16)"),
    (lambda: op.Relu(op.var("x", (2, 3), "float16")),
     "ccompiler: input 0 is float16, not float32/int32/int64"),
    (lambda: op.Reshape(op.var("x", (2, 3)), op.var("s", (1,), "int64")),
     "ccompiler: Reshape's input 1 must be a constant"),
    (lambda: op.MaxPool(op.var("x", (1, 1, 4, 4)), kernel_shape=[2, 2], n_outputs=2),
     "ccompiler: MaxPool's Indices output is not supported"),
    (lambda: op.Conv(op.var("x", (1, 1, 4, 4, 4)), op.const(np.ones((1, 1, 1, 1, 1), np.float32))),
     "ccompiler: Conv over 3 spatial dims is not supported"),
    (lambda: op.Conv(op.var("x", None), op.const(np.ones((1, 1, 1, 1), np.float32))),
     "ccompiler: Conv needs a known rank"),
    (lambda: op.Gelu(op.var("x", (3,)), approximate="fast"),
     "ccompiler: Gelu with approximate='fast' is not supported"),
    (lambda: op.TopK(op.var("x", (3,)), op.const(np.array([1], np.int64))),
     "ccompiler: op TopK is not supported"),
])
def test_declines_with_a_reason(build, reason):
    verdict = supports(build())
    assert isinstance(verdict, str) and verdict.startswith(reason), verdict


def test_dynamic_dims_are_taken():
    x = op.var("x", ("batch", 3, "h", "w"))
    assert supports(op.Conv(x, op.const(np.ones((2, 3, 3, 3), np.float32)))) is True
    assert supports(op.Relu(op.var("y", ("n",)))) is True


# -- specialization -------------------------------------------------------------------------------


def test_specialized_per_shape_and_cached_per_signature():
    x = op.var("x", ("n", 4))
    w = op.const(_f32(4, 3), "w")
    func = Function((x,), op.Relu(op.MatMul(x, w)), {"global_symbol": "dyn"})
    run = compile_region(func)
    assert run.specializations == []  # dynamic: nothing built before the first call
    for n in (2, 5, 2):
        a = _f32(n, 4)
        np.testing.assert_allclose(run(a)[0], np.maximum(a @ w.value, 0), rtol=1e-5)
    assert len(run.specializations) == 2
    compiled = STATS.compiled
    run(_f32(5, 4))
    assert STATS.compiled == compiled


def test_a_large_output_is_reused_only_once_nothing_else_refers_to_it(monkeypatch):
    import weakref

    from byoc.backends.ccompiler.runtime import _Recycler

    monkeypatch.setattr(_Recycler, "budget", _Recycler._held + (4 << 20))  # others may keep some
    x = op.var("x", (512, 1024))  # 2 MB: above the size whose outputs are kept for reuse
    run = compile_region(Function((x,), op.Neg(x)))
    a, b = _f32(512, 1024), _f32(512, 1024)
    ptr = lambda arr: arr.__array_interface__["data"][0]  # noqa: E731
    (first,) = run(a)
    (second,) = run(b)  # first is still held: not overwritten
    np.testing.assert_array_equal(first, -a)
    assert ptr(second) != ptr(first)
    old = ptr(second)
    del first, second
    (third,) = run(a)  # the last call's output, which nothing refers to now
    assert ptr(third) == old
    np.testing.assert_array_equal(third, -a)
    for holder in (lambda arr: arr[1:], lambda arr: memoryview(arr), weakref.ref):
        kept = holder(third)
        held = ptr(third)
        del third
        (third,) = run(b)
        assert ptr(third) != held  # a view, a buffer or a weak reference still sees it
        del kept


def test_what_regions_keep_for_reuse_is_capped(monkeypatch):
    from byoc.backends.ccompiler.runtime import _Recycler

    monkeypatch.setattr(_Recycler, "budget", _Recycler._held + (3 << 20))  # room for one
    x = op.var("x", (512, 1024))  # 2 MB outputs
    first, second = (compile_region(Function((x,), f(x))) for f in (op.Neg, op.Abs))
    a = _f32(512, 1024)
    ptr = lambda arr: arr.__array_interface__["data"][0]  # noqa: E731
    kept = ptr(first(a)[0])  # kept by the first region: the budget is full
    held = _Recycler._held
    second(a)  # over the cap: its output is not kept
    assert _Recycler._held == held
    assert ptr(first(a)[0]) == kept
    del first  # a dropped region gives its bytes back
    import gc

    gc.collect()
    assert _Recycler._held == held - (2 << 20)


def test_static_regions_build_when_compiled():
    x = op.var("x", (3, 3))
    run = compile_region(Function((x,), op.Sigmoid(x)))
    assert len(run.specializations) == 1


def test_multiple_outputs_views_and_returned_inputs():
    x = op.var("x", (2, 6))
    r = op.Reshape(x, op.const(np.array([3, 4], np.int64)))
    parts = op.outputs(op.Split(op.Relu(r), op.const(np.array([1, 2], np.int64)), axis=0,
                                n_outputs=2))
    body = Tuple((r, parts[1], parts[0], op.Flatten(parts[1]), x))
    run = compile_region(Function((x,), body))
    a = _f32(2, 6)
    got = run(a)
    relu = np.maximum(a.reshape(3, 4), 0)
    for g, want in zip(got, [a.reshape(3, 4), relu[1:], relu[:1], relu[1:].reshape(2, 4), a]):
        np.testing.assert_array_equal(g, want)


def test_a_scalar_input_stays_scalar():
    x = op.var("x", ())
    run = compile_region(Function((x,), op.Sigmoid(x)))
    out = run(np.array(0.0, np.float32))[0]
    assert out.shape == () and out == 0.5


def test_zero_sized_tensors():
    x = op.var("x", (0, 4))
    run = compile_region(Function((x,), op.Add(op.Relu(x), op.const(np.float32(1)))))
    assert run(np.zeros((0, 4), np.float32))[0].shape == (0, 4)


def test_threads_share_a_specialization():
    x = op.var("x", (64, 64))
    run = compile_region(Function((x,), op.Tanh(op.MatMul(x, x))))
    inputs = [_f32(64, 64) for _ in range(8)]
    results: dict[int, np.ndarray] = {}

    def work(k):
        for _ in range(20):
            results[k] = run(inputs[k])[0]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, a in enumerate(inputs):
        np.testing.assert_allclose(results[k], np.tanh(a @ a), rtol=1e-4, atol=1e-5)


def test_unspecializable_shapes_fall_back_to_the_host_with_a_warning(monkeypatch):
    from byoc.backends.ccompiler import runtime
    from byoc.backends.ccompiler.emitter import Unsupported

    def refuse(func, types):
        raise Unsupported("not today")

    monkeypatch.setattr(runtime.CompiledRegion, "generate", staticmethod(refuse))
    x = op.var("x", ("n",))
    run = compile_region(Function((x,), op.Relu(x)))
    with pytest.warns(RuntimeWarning, match="runs on the host .*not today"):
        out = run(np.array([-1.0, 2.0], np.float32))[0]
    np.testing.assert_array_equal(out, [0, 2])


def test_constant_subgraphs_are_folded_once():
    x = op.var("x", (1, 2, 5, 5))
    fill = op.ConstantOfShape(op.const(np.array([3, 2, 3, 3], np.int64)),
                              value=np.array([0.5], np.float32), span="weights")
    func = Function((x,), op.Conv(x, fill, pads=[1, 1, 1, 1], span="conv"))
    source = emit_c(func)
    assert "weights (ConstantOfShape)" not in source and "conv (Conv)" in source
    a = _f32(1, 2, 5, 5)
    want = byoc.build(byoc.IRModule({"main": func})).run_function(func, [a])[0]
    np.testing.assert_allclose(compile_region(func)(a)[0], want, rtol=1e-5)


def test_arrays_of_another_dtype_run_on_the_host():
    x = op.var("x", ("n",))
    run = compile_region(Function((x,), op.Relu(x)))
    with pytest.warns(RuntimeWarning, match="is float64, the region takes float32"):
        out = run(np.array([-1.0, 3.0]))[0]
    np.testing.assert_array_equal(out, [0, 3])


# -- the full path --------------------------------------------------------------------------------


def _small_cnn():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
             helper.make_node("Softmax", ["y"], ["prob"], name="softmax")]
    inits = [numpy_helper.from_array(v, k) for k, v in {
        "w": _f32(8, 3, 3, 3), "s": _f32(8), "b": _f32(8), "m": _f32(8),
        "v": np.abs(_f32(8)) + 0.5, "fw": _f32(10, 8), "fb": _f32(10)}.items()]
    return _model(nodes, [_vi("x", ["n", 3, 16, 16])], [_vi("prob", None)], inits)


def test_partition_build_run_matches_onnxruntime():
    model = _small_cnn()
    part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
    regions = [f for name, f in part.functions.items() if name != "main"]
    assert [f.attrs["Compiler"] for f in regions] == ["ccompiler"]
    assert not [e for e in post_order(part.main.body) if isinstance(e, Call) and
                isinstance(e.op, str)], "everything runs in the one region"
    exe = byoc.build(part)
    for n in (1, 3):
        feeds = {"x": _f32(n, 3, 16, 16)}
        _assert_matches_ort(model, feeds, exe.run(feeds))


def test_embedded_tiny_resnet_runs_offloaded():
    from byoc.cli import default_model_path

    mod = byoc.load_onnx(default_model_path())
    part = byoc.partition(mod, backends=["ccompiler"])
    x = RNG.standard_normal([d if isinstance(d, int) else 1 for d in mod.main.params[0].type.shape])
    feeds = {mod.main.params[0].name: x.astype(np.float32)}
    _assert_matches_ort(onnx.load(default_model_path()), feeds, byoc.build(part).run(feeds))


# -- untrusted names ------------------------------------------------------------------------------

NASTY = ['quote"d\'s', "*/ int evil = 1; /*", "line\nbreak\r\n", "back\\slash\\",
         "#include <stdlib.h>", "\x01\x02\x7f\u00ff\u2028\U0001f600 junk", "??/ trigraph",
         "x" * 10_000, "", "in_x", "__reserved", "1starts_with_digit", "/* open", "end */"]


def _nasty_model():
    n = NASTY
    w = numpy_helper.from_array(_f32(4, 3, 3, 3), n[1])
    nodes = [helper.make_node("Conv", [n[0], n[1]], [n[2]], name=n[3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", [n[2]], [n[4]], name=n[5]),
             helper.make_node("Reshape", [n[4], n[6]], [n[7]], name=n[7]),
             helper.make_node("MatMul", [n[7], n[9]], [n[10]], name=n[8]),
             helper.make_node("Sigmoid", [n[10]], [n[11]], name=n[12]),
             helper.make_node("Add", [n[11], n[13]], [n[12]], name=n[13] + "!")]
    inits = [w, numpy_helper.from_array(np.array([4, 64], np.int64), n[6]),
             numpy_helper.from_array(_f32(64, 5), n[9]),
             numpy_helper.from_array(_f32(5), n[13])]
    return _model(nodes, [_vi(n[0], [1, 3, 8, 8])], [_vi(n[12], None), _vi(n[4], None)], inits)


def _strip_comments(source: str) -> tuple[str, list[str]]:
    comments = re.findall(r"/\*(.*?)\*/", source, flags=re.S)
    return re.sub(r"/\*.*?\*/", "", source, flags=re.S), comments


def test_untrusted_names_compile_run_and_stay_out_of_the_code(tmp_path):
    model = _nasty_model()
    feeds = {NASTY[0]: _f32(1, 3, 8, 8)}
    part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
    _assert_matches_ort(model, feeds, byoc.build(part).run(feeds))
    files = write_c_sources(part, tmp_path)
    assert files
    for path in files:
        code, comments = _strip_comments(path.read_text())
        for c in comments:
            assert "\n" not in c and "/*" not in c and c.isascii() and c.isprintable(), c
        for line in code.splitlines():
            if line.startswith("#"):  # only byoc's own preprocessor lines
                assert re.fullmatch(r"#(include <(math|stdint|string|immintrin)\.h>|"
                                    r"define BYOC_\w+ .*|"
                                    r"if defined\(__\w+__\)( \|\| defined\(__\w+__\))*|"
                                    r"else|endif)", line), line
        assert '"' not in code and "'" not in code and "\\" not in code and "??" not in code
        for name in NASTY:  # a plain word may sit inside a sanitized identifier; nothing else
            if not re.fullmatch(r"\w*", name, flags=re.ASCII):
                assert name not in code
        assert max(len(w) for w in re.findall(r"\w+", code)) < 64  # the 10 kB name is cut


# -- seeing the code ------------------------------------------------------------------------------


def test_emit_c_names_the_nodes_and_declares_one_function():
    x = op.var("x", (2, 8))
    y = op.Relu(op.Add(x, op.const(np.float32(1)), span="add_one"), span="relu_out")
    source = emit_c(Function((x,), y, {"global_symbol": "my_region"}))
    assert "/* byoc ccompiler: region my_region */" in source
    assert "/*   add_one (Add) */" in source and "/*   relu_out (Relu) */" in source
    assert len(re.findall(r"^void byoc_region\(", source, flags=re.M)) == 1


def test_write_c_sources_for_dynamic_regions(tmp_path):
    model = _small_cnn()
    part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
    with pytest.raises(byoc.ByocError, match="has dynamic dims .*run the model first"):
        write_c_sources(part, tmp_path / "before")  # never a file of comments and no code
    assert not (tmp_path / "before").exists()
    exe = byoc.build(part)
    exe.run({"x": _f32(2, 3, 16, 16)})
    (built,) = write_c_sources(part, tmp_path / "after", exe)
    assert "void byoc_region(" in built.read_text()
    assert "input in_x = x: float32[2, 3, 16, 16]" in built.read_text()


# -- compile errors -------------------------------------------------------------------------------


def test_compile_error_names_region_file_and_message(monkeypatch, byoc_cache_dir):
    from byoc.backends.ccompiler import codegen

    def broken(ctx, call, ins, outs):
        ctx.src.line("this is not C;")

    monkeypatch.setitem(codegen.EMITTERS, "Relu", broken)
    x = op.var("x", (3,))
    func = Function((x,), op.Relu(x), {"global_symbol": "broken_region"})
    before = set((byoc_cache_dir / "c").glob("*.so"))
    with pytest.raises(CompileError) as err:
        compile_region(func)
    e = err.value
    assert "broken_region" in str(e) and str(e.c_file) in str(e) and "error" in e.message
    assert e.c_file.is_file() and "this is not C;" in e.c_file.read_text()
    assert set((byoc_cache_dir / "c").glob("*.so")) == before  # no broken entry
    assert isinstance(e, byoc.ByocError)


def test_no_warnings_on_a_clean_build():
    x = op.var("x", (5,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile_region(Function((x,), op.Exp(x)))(np.zeros(5, np.float32))


def test_module_exports():
    assert ccompiler.NAME == "ccompiler"
    assert callable(ccompiler.register)
