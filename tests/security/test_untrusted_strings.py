"""Strings from a model are data everywhere byoc writes them: text form, JSON, the CLI's text,
error lines, file names, C source and the compiler's command line.

Most tests compare a model whose every string is hostile (``models.HOSTILE``: quotes, ``*/``,
newlines, backslashes, ``#include``, escape sequences, 10 kB, ``..`` and path separators) with
its twin named ``n0``, ``n1``...: the output may differ inside quotes and comments, never in
its shape (lines, comments, statements, files).
"""

from __future__ import annotations

import json
import os
from collections import Counter
import re
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import byoc
from byoc.compare import compare_outputs, run_onnxruntime
from tests.bad_inputs.test_bad_models import assert_refused, run_cli
from tests.fuzz.harness import CCOMPILER, COMMON
from tests.security.models import (FRAGMENTS, HOSTILE, hostile_model, input_of, named_model,
                                   plain_model)

needs_c = pytest.mark.skipif(CCOMPILER is None, reason="needs the ccompiler backend and a C "
                                                       "compiler")
ENGINES = ["reference", "onnxruntime"] + (["ccompiler"] if CCOMPILER else [])
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


@pytest.fixture(scope="module", autouse=True)
def private_build_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BYOC_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture
def models(tmp_path) -> tuple[Path, Path]:
    """The hostile model and its plain twin, saved."""
    paths = tmp_path / "hostile.onnx", tmp_path / "plain.onnx"
    onnx.save(hostile_model(), paths[0])
    onnx.save(plain_model(), paths[1])
    return paths


def cli(capsys, *argv) -> tuple[int, str, str]:
    """The CLI in this process: exit code, stdout, stderr."""
    from byoc.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- the text form ----------------------------------------------------------------------------


def _shape_of_text(text: str) -> list[tuple]:
    """Per line, what a reader relies on: comment and statement marks outside quotes."""
    out = []
    for line in text.split("\n"):
        bare = _QUOTED.sub('""', line)
        out.append((bare.count("/*"), bare.count("*/"), bare.count(";"), bare.count("{"),
                    bare.count("}"), bare.endswith("*/;") or "/*" not in bare))
    return out


@pytest.mark.parametrize("backend", [None, *ENGINES])
def test_the_text_form_has_the_same_shape_whatever_the_names(backend: str | None) -> None:
    texts = []
    for model in (hostile_model(), plain_model()):
        mod = byoc.load_onnx(model)
        mod = byoc.partition(mod, backends=[backend]) if backend else mod
        texts.append(mod.astext(show_meta=True))
    hostile, plain = texts
    assert all(line.isprintable() for line in hostile.split("\n")), "a raw control character"
    assert _shape_of_text(hostile) == _shape_of_text(plain)
    assert "x" * 10_000 in hostile  # shown whole: the text form is for reading models


@settings(max_examples=25, **COMMON)
@given(st.lists(st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)),
                        max_size=30), min_size=3, max_size=12))
def test_any_names_keep_the_text_form_and_json_intact(names: list[str]) -> None:
    """Random strings (no NUL, which protobuf keeps but C strings cannot) as every name."""
    model = named_model(names)
    mod = byoc.load_onnx(model)
    part = byoc.partition(mod, backends=["reference"])
    for m in (mod, part):
        assert _shape_of_text(m.astext()) == _shape_of_text(
            (byoc.load_onnx(plain_model()) if m is mod else
             byoc.partition(byoc.load_onnx(plain_model()), backends=["reference"])).astext())
    from byoc.report import partition_report

    report = partition_report(part)
    assert json.loads(json.dumps(report)) == report
    once = Counter(n.name for n in model.graph.node)  # a repeated name gets a suffix
    assert set(report["regions"][0]["nodes"]) >= {k for k, c in once.items() if k and c == 1}
    for name in part.functions:
        assert re.fullmatch(r"[A-Za-z0-9_]{1,80}", name), name


# -- JSON and the CLI's text --------------------------------------------------------------------


@pytest.mark.parametrize("backend", [None, *ENGINES])
def test_json_outputs_are_valid_and_keep_every_name(models, capsys, backend) -> None:
    model = hostile_model()
    names_in = [i.name for i in model.graph.input]
    names_out = [o.name for o in model.graph.output]
    flags = ["--backend", backend] if backend else []
    code, out, _ = cli(capsys, "run", models[0], *flags, "--compare", "onnxruntime", "--json")
    assert code == 0 and list(json.loads(out)["outputs"]) == names_out
    code, out, _ = cli(capsys, "info", models[0], "--json")
    assert code == 0 and list(json.loads(out)["inputs"]) == names_in
    if backend:
        code, out, _ = cli(capsys, "partition", models[0], "--backend", backend, "--json")
        (region,) = json.loads(out)["regions"]
        assert code == 0 and region["outputs"] == names_out and region["inputs"] == names_in
        assert set(region["nodes"]) >= {n.name for n in model.graph.node if n.name}


def _same_text_shape(capsys, models, *argv) -> None:
    """The command's text output: printable lines, as many as for the plain twin."""
    outs = []
    for path in models:
        code, out, err = cli(capsys, *argv[:1], path, *argv[1:])
        assert code == 0, err
        outs.append(out)
    hostile, plain = outs
    assert all(line.isprintable() for line in hostile.splitlines()), hostile
    assert len(hostile.splitlines()) == len(plain.splitlines())


@pytest.mark.parametrize("argv", [["run"], ["run", "--backend", "onnxruntime"], ["info"],
                                  ["run", "--compare", "onnxruntime"]], ids=" ".join)
def test_text_outputs_show_names_on_one_line(models, capsys, argv) -> None:
    _same_text_shape(capsys, models, *argv)


def test_the_partition_table_shows_names_on_one_line(models, capsys, tmp_path) -> None:
    """Fixed (byoc/report.py format_table shows names with report.show)."""
    rotated = tmp_path / "rotated.onnx"  # the input and first output named with a newline
    onnx.save(named_model(HOSTILE[3:] + HOSTILE[:3]), rotated)
    _same_text_shape(capsys, (rotated, models[1]), "partition", "--backend", "onnxruntime")


def test_the_profile_shows_names_on_one_line(models, capsys) -> None:
    """Fixed (byoc/profile.py format_profile shows names with report.show)."""
    _same_text_shape(capsys, models, "run", "--profile")


def test_error_lines_escape_model_strings(tmp_path) -> None:
    """An error naming a hostile node or tensor is one printable line (a real process)."""
    for name in ("line\nbreak", "\x1b[2J\x1b]0;title\x07", "\u2028", "x" * 10_000):
        graph = helper.make_graph([helper.make_node("Add", ["x", name], ["y"], name=name)],
                                  name, [helper.make_tensor_value_info("x", 1, [2])],
                                  [helper.make_tensor_value_info("y", 1, [2])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]),
                  tmp_path / "m.onnx")
        r = run_cli("run", "m.onnx", cwd=tmp_path)
        assert_refused(r, "reads tensor")
        assert r.stderr.rstrip("\n").isprintable(), r.stderr


def test_names_that_are_not_utf8_are_refused(tmp_path) -> None:
    """protobuf hands a non-UTF-8 name to Python as bytes: refused with one line."""
    model = named_model([f"NAME{k:04d}" for k in range(30)])
    data = model.SerializeToString().replace(b"NAME0003", b"\xff\xfe\x80\xc0\xafNAM")
    (tmp_path / "m.onnx").write_bytes(data)
    assert_refused(run_cli("run", "m.onnx", cwd=tmp_path), "is not valid UTF-8")
    assert_refused(run_cli("partition", "m.onnx", "--backend", "reference", cwd=tmp_path),
                   "is not valid UTF-8")


# -- files ------------------------------------------------------------------------------------


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize("backend", ENGINES)
def test_extract_writes_fixed_names_inside_its_folder(models, capsys, tmp_path, backend) -> None:
    before = _tree(tmp_path)
    code, out, err = cli(capsys, "extract", models[0], "--backend", backend, "--region", "0",
                         "-o", tmp_path / "case")
    assert code == 0, err
    assert all(line.isprintable() for line in out.splitlines())
    written = _tree(tmp_path) - before
    n_in, n_out = 1, 2
    expected = {"case", "case/model.onnx", "case/README.md", "case/test_data_set_0",
                "case/.byoc-files",  # byoc's manifest of what it wrote (byoc/files/outputs.py)
                *(f"case/test_data_set_0/input_{k}.pb" for k in range(n_in)),
                *(f"case/test_data_set_0/output_{k}.pb" for k in range(n_out))}
    if backend == "ccompiler":
        expected.add("case/region.c")
    assert written == expected
    case = onnx.load(tmp_path / "case" / "model.onnx")
    assert [o.name for o in case.graph.output] == [o.name for o in hostile_model().graph.output]
    code, out, err = cli(capsys, "repro", tmp_path / "case", "--backend", backend)
    assert code == 0, (out, err)


def test_the_extract_readme_keeps_names_on_one_line(models, capsys, tmp_path) -> None:
    """Fixed (byoc/extract.py _readme shows names with report.show, `|` escaped)."""
    for k, path in enumerate(models):
        assert cli(capsys, "extract", path, "--backend", "reference", "--region", "0", "-o",
                   tmp_path / f"case{k}")[0] == 0
    hostile, plain = ((tmp_path / f"case{k}" / "README.md").read_text() for k in (0, 1))
    assert len(hostile.splitlines()) == len(plain.splitlines())
    assert all(line.isprintable() for line in hostile.splitlines())


def test_the_partitioned_model_written_by_partition_o_runs_alike(models, capsys, tmp_path
                                                                 ) -> None:
    out = tmp_path / "out" / "part.onnx"
    out.parent.mkdir()  # byoc makes no folder it is not asked for
    assert cli(capsys, "partition", models[0], "--backend", "reference", "-o", out)[0] == 0
    assert _tree(tmp_path / "out") == {"part.onnx"}
    part = onnx.load(out)
    onnx.checker.check_model(part)
    model = hostile_model()
    want = run_onnxruntime(model, input_of(model))
    got = run_onnxruntime(part, input_of(model))
    assert all(c.ok for c in compare_outputs(got, want))


# -- C source, compiler and cache -------------------------------------------------------------

_COMMENT = re.compile(r"/\*.*?\*/")
_IDENT = re.compile(r"\b(?:in|out|k|t|v|a)_[A-Za-z0-9_]*")


def _c_sources(model: onnx.ModelProto, folder: Path) -> dict[str, str]:
    from byoc.backends.ccompiler import write_c_sources

    part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
    files = write_c_sources(part, folder)
    assert all(f.parent == folder for f in files)
    return {f.name: f.read_text() for f in files}


@needs_c
def test_model_strings_reach_c_only_as_identifiers_and_escaped_comments(tmp_path) -> None:
    hostile = _c_sources(hostile_model(), tmp_path / "hostile")
    plain = _c_sources(plain_model(), tmp_path / "plain")
    for name in hostile:
        assert re.fullmatch(r"region_[A-Za-z0-9_]{1,80}(__\d+)?\.c", name), name
    (h,), (p,) = hostile.values(), plain.values()
    for line in h.splitlines():
        assert line.isprintable() and line.isascii() and not line.endswith("\\"), line
        assert "??" not in line, line  # no trigraph
        code = _COMMENT.sub("", line)
        assert "/*" not in code and "*/" not in code, line  # every comment ends on its line
        # Sanitized identifiers may spell a fragment (t_etc_passwd); the code around them may not.
        assert not any(f in _IDENT.sub("ID", code) for f in FRAGMENTS), line

    def code_only(text: str) -> list[str]:
        return [_IDENT.sub("ID", _COMMENT.sub("", line)).rstrip() for line in text.splitlines()]

    assert code_only(h) == code_only(p)  # the names changed nothing but names


@needs_c
def test_the_compiler_runs_without_a_shell_and_sees_no_model_string(monkeypatch, tmp_path
                                                                    ) -> None:
    """Compile the hostile model's region (fresh cache): every command is an argument list,
    no shell, nothing from the model in it; every file in the cache has a hash for a name."""
    from byoc.codegen import build_cache

    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[tuple[object, dict]] = []

    class Spy(subprocess.Popen):  # every child process, whoever starts it (cffi included)
        def __init__(self, args, *rest, **kwargs):
            calls.append((args, kwargs))
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(build_cache, "_TOOLCHAIN", None)
    monkeypatch.setattr(build_cache, "_LOADED", {})
    monkeypatch.setattr(subprocess, "Popen", Spy)
    model = hostile_model()
    got = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
                     ).run(input_of(model))
    assert all(c.ok for c in compare_outputs(got, run_onnxruntime(model, input_of(model))))
    assert any("-shared" in cmd for cmd, _ in calls), "nothing was compiled"
    for cmd, kwargs in calls:
        assert isinstance(cmd, list) and not kwargs.get("shell"), cmd
        assert not any(f in part for part in cmd for f in FRAGMENTS), cmd
    suffix = re.escape(build_cache._EXT_SUFFIX)
    for path in (tmp_path / "cache").rglob("*"):
        assert re.fullmatch(rf"c|failed|_byoc_(obj_)?[0-9a-f]{{16}}(\.c|\.o|\.sha256|{suffix})",
                            path.name), path


def test_no_hostile_string_is_a_path(models, capsys, tmp_path, monkeypatch) -> None:
    """Running, partitioning and extracting the hostile model writes nothing anywhere but where
    it was told (the cwd is a fresh folder that must stay empty)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for argv in (["run", models[0]], ["partition", models[0], "--backend", "reference"],
                 ["extract", models[0], "--backend", "reference", "--region", "0", "-o",
                  tmp_path / "case"]):
        assert cli(capsys, *argv)[0] == 0
    assert os.listdir(work) == []
    assert not any(h and h in str(p) for p in _tree(tmp_path) for h in HOSTILE if len(h) > 2)


def test_string_tensors_and_attributes_are_data(tmp_path, capsys) -> None:
    """Hostile strings as string-tensor values, a string input and string attributes: the text
    form keeps its shape, the run's JSON is valid, and onnxruntime agrees."""
    words = np.array(HOSTILE[:12], dtype=object)
    nodes = [helper.make_node("Constant", [], ["words"], name="words",
                              value=onnx.numpy_helper.from_array(words, "words")),
             helper.make_node("Concat", ["words", "given"], ["y"], name="concat", axis=0)]
    graph = helper.make_graph(nodes, "strings", [helper.make_tensor_value_info(
        "given", onnx.TensorProto.STRING, [2])], [helper.make_tensor_value_info(
            "y", onnx.TensorProto.STRING, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.save(model, tmp_path / "s.onnx")
    np.save(tmp_path / "given.npy", np.array(HOSTILE[2:4]))  # a numpy str array, not object
    code, out, err = cli(capsys, "run", tmp_path / "s.onnx", "--input",
                         f"given={tmp_path / 'given.npy'}", "--compare", "onnxruntime", "--json")
    assert code == 0, (out, err)
    assert json.loads(out)["outputs"]["y"]["dtype"] == "object"
    # String attributes (stopwords, locale) are only printed: onnxruntime needs the locale.
    normalize = helper.make_node("StringNormalizer", ["y"], ["z"], name=HOSTILE[2],
                                 stopwords=HOSTILE[:12], locale=HOSTILE[3])
    graph.node.append(normalize)
    graph.output[0].name = "z"
    text = byoc.load_onnx(model).astext(show_meta=True)
    assert all(line.isprintable() for line in text.split("\n"))
    for line in text.split("\n"):
        bare = _QUOTED.sub('""', line)
        assert bare.count("*/") <= 1 and bare.count("/*") <= 1, line
