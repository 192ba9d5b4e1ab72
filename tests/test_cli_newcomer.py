"""What a newcomer tripped over in the byoc command (issue 21): a closed pipe, a slow --help,
opsets, timing lines, the partition table."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = ("onnx", "numpy", "onnxruntime", "ml_dtypes", "cffi")


def test_help_imports_nothing_heavy():
    """`byoc --help` answers quickly because no command imports onnx, numpy or onnxruntime
    before it runs (`import onnx` alone takes most of a second)."""
    code = ("import sys\nfrom byoc.cli import main\n"
            "for argv in (['--help'], ['run', '--help'], ['partition', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-300:]
    assert "usage: byoc run" in r.stdout and "usage: byoc partition" in r.stdout


def test_the_lazy_api_is_the_whole_api():
    """`import byoc` defers its imports; every public name still resolves, and importing the
    submodule byoc.partition does not replace the function byoc.partition."""
    code = ("import byoc, byoc.partition, byoc.ir\n"
            "assert callable(byoc.partition) and byoc.partition.__module__ == 'byoc.partition'\n"
            "missing = [n for n in byoc.__all__ if getattr(byoc, n, None) is None]\n"
            "assert not missing, missing\n"
            "assert set(byoc.__all__) <= set(dir(byoc))\n"
            "print(byoc.op.Relu.__name__, byoc.build.__module__, byoc.IRModule.__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Relu", "byoc.runtime.executor", "IRModule"]


def test_a_closed_pipe_ends_quietly():
    """`byoc info | head -0`: the reader is gone before byoc writes; no traceback, no
    'internal error', the exit status of a tool ended by SIGPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run([sys.executable, "-m", "byoc", "info"], stdout=write,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert r.stderr == "" and r.returncode == 141, (r.returncode, r.stderr)


def byoc_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "byoc", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_info_says_the_opset_declared_and_the_one_byoc_runs_at(tmp_path):
    import json

    import onnx

    from tests.conftest import FLOAT, make_model

    r = byoc_cli("info")  # the embedded model declares 17
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "opset   declared 17", lines[:3]
    assert lines[2].strip() == "runs at 28: byoc upgraded it on import (onnx's version converter)"
    info = json.loads(byoc_cli("info", "--json").stdout)
    assert info["declared_opset"] == 17 and info["opset"] == 28
    model = make_model([onnx.helper.make_node("Relu", ["x"], ["y"], name="r")],
                       [("x", FLOAT, [2])], [("y", FLOAT, [2])], extra_opsets={"com.example": 3})
    onnx.save(model, tmp_path / "m.onnx")
    lines = byoc_cli("info", tmp_path / "m.onnx").stdout.splitlines()
    assert lines[1:3] == ["opset   declared 28 (also com.example 3)", "        runs at 28, as declared"]


def test_a_model_the_converter_cannot_upgrade_says_so():
    from byoc.cli.info import _runs_at

    assert _runs_at(12, 12) == ("runs at 12: onnx's version converter could not upgrade it to 28, "
                                "so its ops run as opset 12 defines them")


def test_timing_lines_say_what_they_measure_and_the_rows_add_up():
    """The first call (one-time work included) and the steady state are separate lines; the
    per-backend rows, the executor's time between the nodes included, add up to the steady
    state (they were 0.93 ms under a first call of 3085 ms)."""
    import json

    r = byoc_cli("run", "--backend", "reference")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].lstrip().startswith("first call") and "one-time work included" in lines[1]
    assert lines[2].lstrip().startswith("steady state") and "median of" in lines[2]
    assert any(line.lstrip().startswith("executor") for line in lines)
    result = json.loads(byoc_cli("run", "--backend", "reference", "--json").stdout)
    rows = result["placement"]
    assert set(rows) == {"reference", "host", "executor"}
    total = sum(row["time_s"] for row in rows.values())
    assert abs(total - result["steady_state_s"]) <= 1e-9 * max(1.0, total)
    assert abs(sum(row["time_share"] for row in rows.values()) - 1) < 1e-9
    assert result["first_call_s"] > 0 and result["steady_state_calls"] >= 1


def _long_named_model(batch):
    """A chain of ops with 150-character node and tensor names, the batch dim symbolic or not."""
    import onnx
    from onnx import helper

    from tests.conftest import FLOAT, make_model

    long = "/model/encoder/layer.{}/attention/self/query/" + "very_long_segment/" * 5 + "{}"
    names = [long.format(k, "out") for k in range(4)]
    nodes = [helper.make_node(op, [src], [dst], name=long.format(k, op))
             for k, (op, src, dst) in enumerate(zip(["Relu", "Abs", "Neg", "Exp"],
                                                    ["input_" + "x" * 100] + names, names))]
    model = make_model(nodes, [("input_" + "x" * 100, FLOAT, [batch, 8])],
                       [(names[-1], FLOAT, [batch, 8])])
    onnx.checker.check_model(model)
    return model


def test_the_partition_table_fits_120_columns_and_the_json_keeps_whole_names(tmp_path):
    import json

    import onnx

    for batch, marked in (("batch", True), (2, False)):
        onnx.save(_long_named_model(batch), tmp_path / "m.onnx")
        r = byoc_cli("partition", tmp_path / "m.onnx", "--backend", "reference")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert max(map(len, lines)) <= 120, max(lines, key=len)
        assert "..." in lines[1] and lines[1].startswith("0  reference_")  # "#": from 0
        assert lines[1].split()[1].endswith(json.loads(byoc_cli(
            "partition", tmp_path / "m.onnx", "--backend", "reference", "--json").stdout)
            ["regions"][0]["name"][-8:])  # shortened in the middle: the hash kept
        assert lines[1].rstrip().endswith("*") == marked
        assert ("* sizes with the symbolic dims (batch) counted as 1" in lines) == marked
    region = json.loads(byoc_cli("partition", tmp_path / "m.onnx", "--backend", "reference",
                                 "--json").stdout)["regions"][0]
    assert region["inputs"] == ["input_" + "x" * 100] and len(region["nodes"][0]) > 100
    assert region["bytes_symbolic"] == [] and region["bytes_in"] == 64


def test_the_table_cuts_op_types_after_whole_entries_never_a_backend_and_explains_unknown_sizes():
    """Shortened cells stay readable: a backend's name whole (``--backend`` takes it), op types
    as whole entries and how many more, a ``?`` size explained."""
    from byoc.report import format_table

    ops = {"Mul": 90, "Conv": 57, "Add": 44, "HardSwish": 20, "Transpose": 3, "Softmax": 1,
           "LayerNormalization": 2, "GlobalAveragePool": 1}
    region = {"name": "onnxruntime_" + "p2o_Conv_" * 9 + "_b97c2d99", "backend": "onnxruntime",
              "nodes": ["n"] * 218, "op_types": ops, "inputs": ["x" * 60],
              "outputs": ["y" * 60, "z"], "bytes_in": None, "bytes_out": 2560,
              "bytes_symbolic": []}
    report = {"regions": [region], "host_nodes": [], "reasons": {},
              "offload": {"main": {"nodes": 218, "offloaded": 218},
                          "bodies": {"nodes": 0, "offloaded": 0}}}
    lines = format_table(report).splitlines()
    assert max(map(len, lines)) <= 120, max(lines, key=len)
    header, row = lines[0], lines[1]
    start = header.index("op types")
    cell = row[start:header.index("inputs")].strip()
    assert row.split()[2] == "onnxruntime" and "..." not in cell, row
    shown, _, more = cell.rpartition(" (+")
    entries = shown.split(", ")
    expected = [f"{n} {op}" if n > 1 else op for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))]
    assert entries == expected[:len(entries)] and more == f"{len(ops) - len(entries)})", cell
    assert any(line.startswith("? sizes the types do not tell") for line in lines)


def test_partition_takes_input_dims_and_shapes_and_sizes_them(tmp_path, capsys):
    """`byoc partition` takes --input, --dim and --shape as run does: the sizes in the table
    and the JSON are then those of the given shapes (no `*`, no `?`), a dim left open still
    says so, and a shape the model refuses is one line, exit 2."""
    import json

    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from byoc.cli import main

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                               helper.make_node("Add", ["r", "r"], ["s"], name="add"),
                               helper.make_node("Sqrt", ["s"], ["y"], name="sqrt")],
                              "g", [x], [y])
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)

    def report(*extra):
        assert main(["partition", str(model), "--backend", "reference", "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)["regions"][0]

    region = report()  # nothing given: unknown in, output counted with its dims as 1
    assert region["bytes_in"] is None and region["bytes_symbolic"]
    region = report("--shape", "x=2,3,5")
    assert (region["bytes_in"], region["bytes_out"], region["bytes_symbolic"]) == (120, 120, [])
    np.save(tmp_path / "x.npy", np.zeros((4, 3, 6), np.float32))
    region = report("--input", f"x={tmp_path / 'x.npy'}")
    assert (region["bytes_in"], region["bytes_out"], region["bytes_symbolic"]) == (288, 288, [])
    region = report("--dim", "n=7")  # the unnamed batch dim stays unknown
    assert region["bytes_in"] is None

    assert main(["partition", "--backend", "reference", "--dim", "batch=8"]) == 0
    table = capsys.readouterr().out
    assert "96.0KB / 320B\n" in table and "counted as 1" not in table
    assert main(["partition", "--backend", "reference"]) == 0
    table = capsys.readouterr().out
    assert "12.0KB / 40B*" in table and "(batch) counted as 1" in table

    np.save(tmp_path / "bad.npy", np.zeros((4, 3), np.float32))
    assert main(["partition", str(model), "--backend", "reference",
                 "--input", f"x={tmp_path / 'bad.npy'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "the model wants shape (?, 3, n)" in err, err
    assert main(["partition", str(model), "--backend", "reference", "--dim", "m=2"]) == 2
    assert "no dim of that name" in capsys.readouterr().err
