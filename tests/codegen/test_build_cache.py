"""The cffi build cache: where it lives, who may read it, content addressing, atomic builds."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from byoc.codegen import CompileError, build, build_cache, cache_root

pytestmark = pytest.mark.skipif(not build_cache.compiler_command(), reason="needs a C compiler")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _source(token: str) -> tuple[str, str]:
    """A tiny module unique to ``token`` (so no earlier build in this process answers)."""
    tag = int(uuid.uuid5(uuid.NAMESPACE_OID, token).int % 100_000)
    return (f"void fill(float *y, long n) {{ for (long i = 0; i < n; i++) y[i] = {tag}.0f; }}",
            "void fill(float *y, long n);")


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "a"
    monkeypatch.delenv("BYOC_CACHE_DIR")
    assert cache_root() == tmp_path / "xdg" / "byoc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "byoc"


def test_cache_folders_are_owner_only(cache):
    cache.mkdir(mode=0o755)
    os.chmod(cache, 0o755)
    folder = build_cache.module_dir()
    for path in (cache, folder):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_module_names_are_content_addressed(cache):
    src, cdef = _source("names")
    name = build_cache.module_name(src, cdef)
    assert name == build_cache.module_name(src, cdef)
    assert name.startswith("_byoc_") and len(name) == 6 + 16
    assert name != build_cache.module_name(src + " ", cdef)
    assert name != build_cache.module_name(src, cdef + " ")


def test_build_loads_and_runs(cache):
    src, cdef = _source(str(uuid.uuid4()))
    mod = build(src, cdef, region="r")
    y = np.zeros(3, np.float32)
    mod.lib.fill(mod.ffi.from_buffer("float[]", y), 3)
    assert (y == y[0]).all() and y[0] > 0
    assert len(list((cache / "c").glob("_byoc_*.so"))) == 1


def test_compile_error_keeps_source_and_leaves_no_module(cache):
    with pytest.raises(CompileError) as err:
        build("void f(void) { undeclared_thing(; }", "void f(void);", region="the_region")
    e = err.value
    assert "the_region" in str(e) and "error" in e.message and e.c_file.is_file()
    assert e.c_file.parent == cache / "c" / "failed"
    assert not list((cache / "c").glob("*.so"))
    assert not [p for p in (cache / "c").iterdir() if p.name.startswith(".build-")]


def test_compiler_runs_without_a_shell_and_version_is_asked_once(cache, monkeypatch):
    calls = []
    real = subprocess.Popen  # the compiler runs through Popen, in a process group of its own

    def spy(cmd, *args, **kwargs):
        calls.append((cmd, kwargs))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(build_cache, "_TOOLCHAIN", None)
    monkeypatch.setattr(subprocess, "Popen", spy)
    for token in ("a", "b"):
        src, cdef = _source(str(uuid.uuid4()) + token)
        build(src, cdef, region="evil'; rm -rf /")
    assert sum("--version" in cmd for cmd, _ in calls) == 1
    for cmd, kwargs in calls:
        assert isinstance(cmd, list) and not kwargs.get("shell")
        assert not any("rm -rf" in part or "fill" in part for part in cmd)


def test_flags_fall_back_when_march_native_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "fakecc"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -march=native ] && exit 1; done\n'
                    'exec cc "$@"\n')
    fake.chmod(0o755)
    assert "-march=native" not in build_cache._probe_flags([str(fake)])
    assert "-march=native" in build_cache._probe_flags(["cc"])


def test_flags_fall_back_when_a_tuning_flag_is_refused(tmp_path, monkeypatch):
    """A compiler that knows -march=native but not GCC's loop-distribution switch (or the
    reverse) still builds: the optional flags go, the required ones stay."""
    fake = tmp_path / "fakecc"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -fno-tree-loop-distribute-patterns ] '
                    '&& exit 1; done\nexec cc "$@"\n')
    fake.chmod(0o755)
    flags = build_cache._probe_flags([str(fake)])
    assert "-fno-tree-loop-distribute-patterns" not in flags
    assert "-std=gnu11" in flags and "-Werror=implicit-function-declaration" in flags
    assert "-fno-tree-loop-distribute-patterns" in build_cache._probe_flags(["cc"])


_BUILD_SCRIPT = textwrap.dedent("""
    import sys
    from byoc.codegen import build, STATS
    src = "void fill(float *y) { y[0] = 41.0f + 1.0f; }" + " " * int(sys.argv[1])
    mod = build(src, "void fill(float *y);", region="shared")
    print(mod.__file__, STATS.compiled, STATS.cached)
""")


def _spawn(cache: Path, pad: int) -> subprocess.Popen:
    env = {**os.environ, "BYOC_CACHE_DIR": str(cache)}
    return subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, str(pad)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_building_the_same_module_both_succeed(tmp_path):
    cache = tmp_path / "shared"
    procs = [_spawn(cache, 7), _spawn(cache, 7)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    paths = {out.split()[0] for out, _ in outs}
    assert len(paths) == 1 and len(list((cache / "c").glob("*.so"))) == 1


def test_a_second_process_compiles_nothing(tmp_path):
    cache = tmp_path / "again"
    first = _spawn(cache, 3).communicate(timeout=120)[0].split()
    second = _spawn(cache, 3).communicate(timeout=120)[0].split()
    assert first[1:] == ["1", "0"] and second[1:] == ["0", "1"]
