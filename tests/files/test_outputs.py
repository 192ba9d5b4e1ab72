"""Output paths: byoc never deletes or overwrites what it did not create (byoc/files/outputs.py).

First the rules on ``OutputFolder`` and ``output_file`` themselves, then each command that
writes (extract -o, bisect -o, partition -o, run --trace, build --emit-c) on the cases a user
meets: ``.``, ``..``, a folder holding the user's files, a file, a missing parent folder, a
temporary file left by a killed run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from byoc.errors import OutputError
from byoc.files.outputs import MANIFEST, OutputFolder, output_file
from byoc.files.scratch import _host, scratch_prefix
from tests.bad_inputs.test_bad_models import assert_refused, run_cli


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry below ``folder``: a file's bytes, None for a folder."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def _write(path, files: dict[str, str], **kw) -> list[str]:
    with OutputFolder(path, **kw) as out:
        for rel, text in files.items():
            Path(out.path(rel)).write_text(text)
    return out.files


def _dead_pid() -> int:
    """The pid of a process that has ended (reused only after the pid space wraps)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


# -- OutputFolder --------------------------------------------------------------------------------


def test_a_new_folder_is_made_whole_with_a_manifest(tmp_path):
    assert _write(tmp_path / "case", {"a.txt": "1", "sub/b.txt": "2"}) == ["a.txt", "sub/b.txt"]
    tree = _tree(tmp_path)
    assert set(tree) == {"case", "case/a.txt", "case/sub", "case/sub/b.txt", f"case/{MANIFEST}"}
    manifest = json.loads(tree[f"case/{MANIFEST}"])
    assert set(manifest["files"]) == {"a.txt", "sub/b.txt"}


def test_an_empty_folder_is_written_into(tmp_path):
    (tmp_path / "out").mkdir()
    _write(tmp_path / "out", {"a.txt": "1"})
    assert (tmp_path / "out" / "a.txt").read_text() == "1"
    assert sorted(os.listdir(tmp_path / "out")) == [MANIFEST, "a.txt"]  # no staging left


def test_a_folder_with_the_users_files_is_refused_then_only_byocs_files_are_replaced(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "a.txt").write_text("my own a.txt")
    before = _tree(tmp_path)
    with pytest.raises(OutputError, match="exists and is not empty; pass --force"):
        _write(out, {"a.txt": "byoc"})
    assert _tree(tmp_path) == before
    _write(out, {"a.txt": "byoc"}, force=True)  # asked for: byoc's name is replaced, not more
    assert (out / "notes.txt").read_text() == "mine" and (out / "a.txt").read_text() == "byoc"


def test_a_forced_write_removes_only_byocs_old_files_that_are_unchanged(tmp_path):
    out = tmp_path / "case"
    _write(out, {"model": "m", "data/input_0": "x", "data/input_1": "y", "data/input_2": "z"})
    (out / "data" / "input_2").write_text("edited by the user")
    (out / "data" / "mine").write_text("the user's")
    _write(out, {"model": "m2", "data/input_0": "x2"}, force=True)
    assert _tree(out) == {MANIFEST: (out / MANIFEST).read_bytes(), "data": None,
                          "data/input_0": b"x2", "data/input_2": b"edited by the user",
                          "data/mine": b"the user's", "model": b"m2"}


def test_a_hostile_manifest_cannot_make_byoc_delete_outside_the_folder(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = tmp_path / "case"
    out.mkdir()
    digest = hashlib.sha256(b"keep").hexdigest()
    os.symlink(victim, out / "link.txt")
    (out / MANIFEST).write_text(json.dumps({"files": {"../victim.txt": digest,
                                                      str(victim): digest,
                                                      "link.txt": digest}}))
    _write(out, {"a.txt": "1"}, force=True)
    assert victim.read_text() == "keep" and (out / "link.txt").is_symlink()


@pytest.mark.parametrize("where", [".", ".."])
def test_dot_and_dotdot_are_folders_that_are_not_empty(tmp_path, monkeypatch, where):
    work = tmp_path / "parent" / "work"
    work.mkdir(parents=True)
    model = work / where / "model.onnx"
    model.write_text("the user's model")
    monkeypatch.chdir(work)
    before = _tree(tmp_path)
    with pytest.raises(OutputError, match=f"folder '{re.escape(where)}' exists and is not empty"):
        _write(where, {"model.onnx": "x"})
    # With --force, a file the command reads is still never replaced.
    with pytest.raises(OutputError, match="cannot replace .*model.onnx.*: this command reads it"):
        _write(where, {"model.onnx": "x"}, force=True, protect=[model])
    assert _tree(tmp_path) == before


def test_a_file_where_a_folder_is_wanted_and_the_reverse(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="it is a file, not a folder"):
        OutputFolder(tmp_path / "file", force=True)
    out = tmp_path / "case"
    out.mkdir()
    (out / "sub").write_text("a file where byoc wants a folder")
    (out / "a.txt").mkdir()
    before = _tree(tmp_path)
    with pytest.raises(OutputError, match="is a file where byoc writes a folder"):
        _write(out, {"sub/b.txt": "1"}, force=True)
    with pytest.raises(OutputError, match="it is a folder where byoc writes a file"):
        _write(out, {"a.txt": "1"}, force=True)
    assert _tree(tmp_path) == before  # refused before anything moved in


def test_a_missing_parent_folder_is_refused(tmp_path):
    with pytest.raises(OutputError, match="its folder .* does not exist"):
        OutputFolder(tmp_path / "no" / "case")
    with pytest.raises(OutputError, match="its folder .* does not exist"):
        with output_file(tmp_path / "no" / "trace.json"):
            pass
    assert os.listdir(tmp_path) == []


def test_a_failure_while_writing_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with OutputFolder(tmp_path / "case") as out:
            Path(out.path("a.txt")).write_text("half")
            raise RuntimeError("the work failed")
    with pytest.raises(KeyboardInterrupt):
        with output_file(tmp_path / "t.json") as tmp:
            Path(tmp).write_text("half")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


# -- output_file -------------------------------------------------------------------------------


def test_an_output_file_is_replaced_only_with_force_and_keeps_the_umask(tmp_path):
    path = tmp_path / "t.json"
    old = os.umask(0o022)
    try:
        with output_file(path) as tmp:
            Path(tmp).write_text("1")
    finally:
        os.umask(old)
    assert path.read_text() == "1" and (path.stat().st_mode & 0o777) == 0o644
    with pytest.raises(OutputError, match="'.*t.json' exists; pass --force to replace it"):
        with output_file(path) as tmp:
            Path(tmp).write_text("2")
    with output_file(path, force=True) as tmp:
        Path(tmp).write_text("2")
    assert path.read_text() == "2" and os.listdir(tmp_path) == ["t.json"]


def test_an_output_file_that_is_a_folder_fifo_or_trailing_slash_is_refused(tmp_path):
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    for name, why in (("dir", "it is a folder; give a file name"),
                      ("fifo", "it is a FIFO"), ("new/", "it names a folder")):
        with pytest.raises(OutputError, match=why):
            with output_file(os.path.join(tmp_path, name), force=True):
                pass
    assert sorted(os.listdir(tmp_path)) == ["dir", "fifo"]


def test_a_leftover_temporary_file_is_removed_only_if_its_process_is_gone(tmp_path):
    dead = tmp_path / f".t.json.byoc-{_dead_pid()}-{_host()}-0badc0de.tmp"
    live = tmp_path / f".t.json.byoc-{os.getppid()}-{_host()}-0badc0de.tmp"
    other = tmp_path / ".t.json.users-own.tmp"
    for f in (dead, live, other):
        f.write_text("left behind")
    with output_file(tmp_path / "t.json") as tmp:
        assert os.path.basename(tmp).startswith(scratch_prefix(".t.json.byoc-"))
        Path(tmp).write_text("new")
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, other.name, "t.json"])


def test_a_leftover_staging_folder_is_removed_only_if_its_process_is_gone(tmp_path):
    out = tmp_path / "case"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    dead = out / f".byoc-{_dead_pid()}-{_host()}-0badc0de"
    dead.mkdir()
    (dead / "a.txt").write_text("half")
    _write(out, {"a.txt": "1"}, force=True)
    assert sorted(os.listdir(out)) == [MANIFEST, "a.txt", "mine.txt"]


# -- each command that writes ----------------------------------------------------------------------


@pytest.fixture
def work(tmp_path):
    """A folder holding the user's model and notes, and a folder of theirs: the CLI's cwd."""
    from byoc.cli import default_model_path

    shutil.copy(default_model_path(), tmp_path / "model.onnx")
    (tmp_path / "notes.txt").write_text("the user's notes")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "mine.txt").write_text("the user's results")
    return tmp_path


EXTRACT = ("extract", "model.onnx", "--backend", "reference", "--region", "0")
REFUSALS = [  # (the command, what its one line says)
    ((*EXTRACT, "-o", "."), "folder '.' exists and is not empty; pass --force"),
    ((*EXTRACT, "-o", ".."), "folder '..' exists and is not empty; pass --force"),
    ((*EXTRACT, "-o", "results"), "folder 'results' exists and is not empty; pass --force"),
    ((*EXTRACT, "-o", "notes.txt"), "cannot write into 'notes.txt': it is a file, not a folder"),
    ((*EXTRACT, "-o", "missing/case"), "cannot write 'missing/case': its folder"),
    ((*EXTRACT, "-o", ".", "--force"), "cannot replace './model.onnx': this command reads it"),
    (("bisect", "model.onnx", "--backend", "reference", "-o", "results"),
     "folder 'results' exists and is not empty"),
    (("partition", "model.onnx", "--backend", "reference", "-o", "results"),
     "cannot write 'results': it is a folder; give a file name"),
    (("partition", "model.onnx", "--backend", "reference", "-o", "notes.txt"),
     "'notes.txt' exists; pass --force to replace it"),
    (("partition", "model.onnx", "--backend", "reference", "-o", "model.onnx", "--force"),
     "cannot replace 'model.onnx': this command reads it"),
    (("run", "model.onnx", "--trace", "results"), "cannot write 'results': it is a folder"),
    (("run", "model.onnx", "--trace", "missing/t.json"), "its folder"),
    (("build", "model.onnx", "--backend", "reference", "--emit-c", "notes.txt"),
     "it is a file, not a folder"),
    (("build", "model.onnx", "--backend", "reference", "--emit-c", "results"),
     "folder 'results' exists and is not empty"),
]


@pytest.mark.parametrize("args,needle", REFUSALS, ids=[" ".join(a[0:1] + a[-2:]) for a, _ in REFUSALS])
def test_each_command_refuses_in_one_line_and_touches_nothing(work, args, needle):
    parent = _tree(work.parent)
    assert_refused(run_cli(*args, cwd=work), needle)
    assert _tree(work.parent) == parent


def test_extract_with_force_into_a_users_folder_keeps_their_files(work):
    r = run_cli(*EXTRACT, "-o", "results", "--force", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "results" / "mine.txt").read_text() == "the user's results"
    assert (work / "results" / "model.onnx").is_file()
    r = run_cli("repro", "results", "--backend", "reference", cwd=work)
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_run_trace_over_a_leftover_temporary_and_an_existing_trace(work):
    left = work / f".t.json.byoc-{_dead_pid()}-{_host()}-0badc0de.tmp"
    left.write_text("{")
    r = run_cli("run", "model.onnx", "--trace", "t.json", cwd=work)
    assert r.returncode == 0, r.stderr
    json.loads((work / "t.json").read_text())
    assert not left.exists()
    assert_refused(run_cli("run", "model.onnx", "--trace", "t.json", cwd=work),
                   "'t.json' exists; pass --force")
    assert run_cli("run", "model.onnx", "--trace", "t.json", "--force", cwd=work).returncode == 0
    assert sorted(p.name for p in work.iterdir()) == ["model.onnx", "notes.txt", "results",
                                                      "t.json"]
