"""Regions whose C must stay buildable however big they grow (issue 16): the entry is cut into
parts of bounded size, many inputs and outputs go through one array, variadic ops of many
inputs become trees, and a compile that fails or runs past its time is a build error like any
other (``--fallback host`` takes it) that leaves no compiler process behind.

The big cases (10,000+ nodes, 50,000 inputs) are slow-marked; each has a small fast variant
crossing the same limits."""

from __future__ import annotations

import os
import time

import numpy as np
import onnx
import pytest
from byoc.backends.ccompiler import entry, wide
from onnx import TensorProto, helper, numpy_helper

import byoc
from byoc.compare import compare_outputs, run_onnxruntime
from tests.fuzz.harness import CCOMPILER

pytestmark = pytest.mark.skipif(not CCOMPILER, reason="no C compiler")
F = TensorProto.FLOAT


def _vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def _chain(n: int) -> onnx.ModelProto:
    """n binary ops, each with a scalar of its own (no two op functions the same C)."""
    nodes, inits, x = [], [], "x"
    for i in range(n):
        op = ("Add", "Mul", "Sub", "Max", "Min")[i % 5]
        inits.append(numpy_helper.from_array(np.array(1 + i * 1e-5, np.float32), f"c{i}"))
        nodes.append(helper.make_node(op, [x, f"c{i}"], [f"v{i}"], name=f"v{i}"))
        x = f"v{i}"
    return helper.make_model(helper.make_graph(nodes, "chain", [_vi("x", [2, 8])],
                                               [_vi(x, [2, 8])], inits),
                             opset_imports=[helper.make_opsetid("", 17)])


def _wide(op: str, n: int) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(n)]
    attrs = {"axis": 0} if op == "Concat" else {}
    node = helper.make_node(op, names, ["y"], name="wide", **attrs)
    return helper.make_model(helper.make_graph([node], "wide", [_vi(x, [1, 4]) for x in names],
                                               [_vi("y", None)]),
                             opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, backend: str, feeds: dict) -> tuple[dict, list[str]]:
    part = byoc.partition(byoc.load_onnx(model), backends=[backend])
    assert not byoc.explain(part), byoc.explain(part)  # the backend took every node
    exe = byoc.build(part)
    got = exe.run(feeds)
    sources = [g.source for name in part.functions if name != "main"
               for g in exe.external[name].specializations]
    bad = [c for c in compare_outputs(got, run_onnxruntime(model, feeds)) if not c.ok]
    assert not bad, bad
    return got, sources


@pytest.mark.parametrize("backend", ["ccompiler", "native"])
def test_a_long_region_is_cut_into_parts(backend: str, monkeypatch) -> None:
    monkeypatch.setattr(entry, "PART_LINES", 12)  # parts of 12 statements: a small region
    n = 2 * entry.PART_LINES + 5
    _, (source,) = _run(_chain(n), backend, {"x": np.linspace(-1, 1, 16, dtype=np.float32)
                                                 .reshape(2, 8)})
    if backend == "ccompiler":  # native fuses the chain into a few kernels
        assert "byoc_region_part2(" in source and "byoc_region_part3(" not in source


@pytest.mark.parametrize("backend", ["ccompiler", "native"])
@pytest.mark.parametrize("op", ["Sum", "Max", "Concat", "Mean"])
def test_many_inputs_go_through_one_array_and_wide_ops_become_trees(backend: str,
                                                                    op: str) -> None:
    n = entry.MAX_ARGS + 30  # more than the entry's parameters, and than one op's width
    assert n > wide.WIDTH
    rng = np.random.default_rng(n)
    feeds = {f"x{i}": rng.standard_normal((1, 4)).astype(np.float32) for i in range(n)}
    _, (source,) = _run(_wide(op, n), backend, feeds)
    assert "void byoc_region(void *const *args, const void *const *consts, char *ws)" in source


def test_a_split_into_many_outputs_is_declined_with_a_reason() -> None:
    n = 70
    node = helper.make_node("Split", ["x"], [f"y{i}" for i in range(n)], axis=1, name="split",
                            num_outputs=n)
    model = helper.make_model(helper.make_graph([node], "split", [_vi("x", [1, n])],
                                                [_vi(f"y{i}", None) for i in range(n)]),
                              opset_imports=[helper.make_opsetid("", 18)])
    why = byoc.explain(byoc.partition(byoc.load_onnx(model), backends=["ccompiler"]))
    assert why == {"split": "ccompiler: Split into 70 outputs (at most 64)"}


@pytest.mark.slow
@pytest.mark.parametrize("op", ["Sum", "Concat"])
def test_50000_inputs(op: str) -> None:
    """A 50,000-input Sum crashed gcc (a 50,000-parameter C function); a Concat of 50,000 ran
    600 s, then an internal error."""
    n = 50_000
    feeds = {f"x{i}": np.full((1, 4), i % 7, np.float32) for i in range(n)}
    _run(_wide(op, n), "ccompiler", feeds)


@pytest.mark.slow
def test_a_chain_of_30000_nodes_builds() -> None:
    """gcc's time grew with the square of one long chain (10,000 nodes 15 s, 30,000 121 s)."""
    _run(_chain(30_000), "ccompiler", {"x": np.ones((2, 8), np.float32)})


# -- a compile that runs past its time -------------------------------------------------------------

_SLOW_CC = """#!/bin/sh
case "$*" in *--version*) echo "slowcc 1.0"; exit 0;; esac
case "$*" in *probe*) exec cc "$@";; esac
sleep 300 &
echo $! >> "{pids}"
wait
"""


def test_a_compile_past_its_time_is_a_build_error_that_leaves_no_process(tmp_path,
                                                                         monkeypatch) -> None:
    from byoc.codegen import build_cache

    pids = tmp_path / "pids"
    cc = tmp_path / "slowcc"
    cc.write_text(_SLOW_CC.format(pids=pids))
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("BYOC_COMPILE_TIMEOUT", "1")
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build_cache, "_TOOLCHAIN", None)  # asked once per process
    model = _chain(3)
    part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
    with pytest.raises(byoc.errors.ByocError, match="the C compiler took more than 1 s"):
        byoc.build(part)
    with pytest.warns(RuntimeWarning, match="runs on the host.*took more than 1 s"):
        exe = byoc.build(part, fallback="host")
    x = np.ones((2, 8), np.float32)
    assert not [c for c in compare_outputs(exe.run({"x": x}), run_onnxruntime(model, {"x": x}))
                if not c.ok]
    time.sleep(0.2)
    for pid in map(int, pids.read_text().split()):  # the compiler's own child: killed too
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().split()[2] == "Z", pid
