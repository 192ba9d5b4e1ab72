"""Build-cache entries that are not regular files, or far too big, and build folders a killed
process left: byoc never hangs on them or reads them whole; it rebuilds the entry with one
warning line, and removes the stale folders (byoc/codegen/build_cache.py ``_intact``,
``_make_way``, ``module_dir``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from byoc.files.scratch import _host
from tests.files.test_outputs import _dead_pid
from tests.security import test_compile_cache as cache_tests
from tests.security.test_compile_cache import byoc, entries, run_ok

pytestmark = cache_tests.pytestmark
built, cache_copy = cache_tests.built, cache_tests.cache_copy  # their fixtures, shared


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.unlink()
    os.symlink("/dev/zero", path)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x")


def _huge(path: Path) -> None:
    with open(path, "r+b") as f:  # sparse: 3 GB that take no room
        f.truncate(3 << 30)


DAMAGE = {  # (which file, how) -> what the warning says
    ("module", "fifo"): "is a FIFO (named pipe), not a regular file",
    ("module", "/dev/zero"): "is a character device, not a regular file",
    ("module", "folder"): "is a folder, not a regular file",
    ("digest", "fifo"): "is a FIFO (named pipe), not a regular file",
    ("digest", "/dev/zero"): "is a character device, not a regular file",
    ("digest", "3 GB"): "holds 3,221,225,472 bytes, more than the 128 it may",
    ("digest", "folder"): "is a folder, not a regular file",
}


@pytest.mark.parametrize("which,how", sorted(DAMAGE))
def test_an_odd_cache_entry_is_rebuilt_with_one_warning(built, cache_copy, which, how) -> None:
    model, cache = built[0], cache_copy
    (so,) = entries(cache, ".so")
    digest = so.with_name(so.name.split(".")[0] + ".sha256")
    good = so.read_bytes()
    {"fifo": _fifo, "/dev/zero": _zero, "folder": _folder, "3 GB": _huge}[how](
        so if which == "module" else digest)
    start = time.perf_counter()
    r = byoc("run", model, "--backend", "ccompiler", "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"byoc: warning: build cache entry {so.name} is damaged (") \
        and DAMAGE[which, how] in line and line.endswith("; rebuilt"), line
    assert time.perf_counter() - start < 120  # not a hang, nor 3 GB read
    assert so.is_file() and not so.is_symlink() and so.read_bytes() == good
    assert digest.is_file() and digest.stat().st_size < 100
    run_ok(model, cache)  # and the next process loads it, quietly
    r = byoc("run", model, "--backend", "ccompiler", cache=cache)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_build_folders_left_by_killed_processes_are_removed(built, cache_copy) -> None:
    model, cache = built[0], cache_copy
    folder = cache / "c"
    dead = folder / f".build-{_dead_pid()}-{_host()}-abcd1234"
    live = folder / f".build-{os.getppid()}-{_host()}-abcd1234"  # pytest's parent: alive
    other_host = folder / f".build-{_dead_pid()}-00000000-abcd1234"
    old = folder / ".build-k2j4h5g6"  # before the pid was in the name, an hour old
    new = folder / ".build-x9y8z7w6"
    for f in (dead, live, other_host, old, new):
        f.mkdir()
        (f / "region.c").write_text("int x;")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    run_ok(model, cache)
    left = {p.name for p in folder.glob(".build-*")}
    assert left == {live.name, other_host.name, new.name}, left
