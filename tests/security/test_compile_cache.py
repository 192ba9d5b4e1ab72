"""The C build cache under hostile or unlucky conditions, through the CLI where a user meets it.

A module in the cache is code byoc loads and runs, so: the cache is owner-only; an entry that
is not what its name (a hash) says is rebuilt, never loaded; processes building the same model
at once all get correct results; a full disk or a failing compiler is a clear one-line error.
(``tests/codegen/test_build_cache.py`` tests ``build()`` itself; this file the whole path.)
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

from tests.bad_inputs.test_bad_models import assert_refused
from tests.fuzz.harness import CCOMPILER
from tests.security.models import input_of, plain_model

pytestmark = pytest.mark.skipif(CCOMPILER is None, reason="needs the ccompiler backend and a C "
                                                          "compiler")


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(plain_model(), path)
    return path


def byoc(*args, cache: Path, env: dict | None = None, preexec=None, umask: int | None = None
         ) -> subprocess.CompletedProcess:
    """``python -m byoc ARGS`` with ``BYOC_CACHE_DIR=cache``."""
    def setup() -> None:
        if umask is not None:
            os.umask(umask)
        if preexec is not None:
            preexec()

    return subprocess.run([sys.executable, "-m", "byoc", *map(str, args)], capture_output=True,
                          text=True, timeout=300, preexec_fn=setup,
                          env={**os.environ, "BYOC_CACHE_DIR": str(cache), **(env or {})})


def run_ok(model: Path, cache: Path, **kw) -> dict:
    r = byoc("run", model, "--backend", "ccompiler", "--compare", "onnxruntime", "--json",
             cache=cache, **kw)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and result["placement"]["ccompiler"]["nodes"] > 0, result
    return result


def entries(cache: Path, suffix: str) -> list[Path]:
    """The cache's regions (and objects) of that suffix; not the thread pool's module, which
    every process with a C region builds once (backends/ccompiler/pool.py)."""
    from byoc.backends.ccompiler import pool
    from byoc.codegen import build_cache

    thread_pool = build_cache.module_name(pool.SOURCE, pool.CDEF)
    return sorted(p for p in (cache / "c").glob(f"_byoc_*{suffix}")
                  if not p.name.startswith(thread_pool + "."))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """The model and a cache holding its region, built once for the tests that damage it."""
    folder = tmp_path_factory.mktemp("built")
    onnx.save(plain_model(), folder / "m.onnx")
    run_ok(folder / "m.onnx", folder / "cache")
    return folder / "m.onnx", folder / "cache"


@pytest.fixture
def cache_copy(built, tmp_path) -> Path:
    shutil.copytree(built[1], tmp_path / "cache")
    return tmp_path / "cache"


# -- who may read it --------------------------------------------------------------------------


def test_the_cache_is_owner_only_even_with_a_permissive_umask(model, tmp_path) -> None:
    cache = tmp_path / "new" / "deeper" / "cache"
    run_ok(model, cache, umask=0)
    for folder in (cache, cache / "c"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for so in entries(cache, ".so"):
        assert stat.S_IMODE(so.stat().st_mode) & 0o077 == 0, so


def test_an_open_cache_folder_is_closed_before_use(model, tmp_path) -> None:
    cache = tmp_path / "open"
    (cache / "c").mkdir(parents=True)
    os.chmod(cache, 0o777)
    os.chmod(cache / "c", 0o777)
    run_ok(model, cache)
    assert stat.S_IMODE(cache.stat().st_mode) == stat.S_IMODE((cache / "c").stat().st_mode) \
        == 0o700


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_cache_folder_of_another_user_is_refused(model, tmp_path) -> None:
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    assert_refused(byoc("run", model, "--backend", "ccompiler", cache=cache),
                   "belongs to another user; set BYOC_CACHE_DIR")
    assert list(cache.iterdir()) == []


# -- what it holds ----------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated"])
def test_a_damaged_entry_is_rebuilt(built, cache_copy, damage: str) -> None:
    """Fixed (build_cache.build loads only a module whose bytes match its .sha256): a
    truncated module was dlopen()ed and the process died of SIGBUS, with no message."""
    model, cache = built[0], cache_copy
    (so,) = entries(cache, ".so")
    data = so.read_bytes()
    so.write_bytes({"garbage": os.urandom(len(data)), "empty": b"",
                    "truncated": data[: len(data) // 2]}[damage])
    run_ok(model, cache)
    assert so.read_bytes() == data or so.stat().st_size > len(data) // 2


_SAME_NAME = textwrap.dedent("""
    # Build other C under the name the model's region has: a module that loads fine and is
    # not what its hash says.
    import shutil, sys, tempfile, cffi
    from pathlib import Path
    so = Path(sys.argv[1])
    name = so.name.split(".")[0]
    ffi = cffi.FFI()
    ffi.cdef("void byoc_region(void);")
    ffi.set_source(name, "void byoc_region(void) {}")
    with tempfile.TemporaryDirectory() as tmp:
        built = ffi.compile(tmpdir=tmp)
        shutil.copy(built, so)
""")


def test_an_entry_whose_content_is_not_its_hash_is_rebuilt(built, cache_copy) -> None:
    """Fixed: an entry was loaded if its file name matched; now its bytes must match the
    <name>.sha256 written when it was built."""
    model, cache = built[0], cache_copy
    (so,) = entries(cache, ".so")
    subprocess.run([sys.executable, "-c", _SAME_NAME, str(so)], check=True, timeout=120)
    # The impostor is a no-op: the outputs would stay uninitialized, and not match.
    run_ok(model, cache)


def test_a_damaged_object_is_rebuilt_before_it_is_linked(built, cache_copy) -> None:
    """The GEMM object is linked into every new module: a truncated one is compiled again
    (not linked as it is) when a module needs it."""
    model, cache = built[0], cache_copy
    (obj,) = entries(cache, ".o")
    data = obj.read_bytes()
    obj.write_bytes(data[: len(data) // 2])
    for so in entries(cache, ".so"):  # so that a module is linked again
        so.unlink()
    run_ok(model, cache)
    assert obj.read_bytes() == data or obj.stat().st_size > len(data) // 2


def test_digests_are_owner_only_and_match(built) -> None:
    import hashlib

    binaries = [*entries(built[1], ".so"), *entries(built[1], ".o")]
    assert entries(built[1], ".so"), "the build left no library to check"
    for binary in binaries:
        digest = binary.with_name(binary.name.split(".")[0] + ".sha256")
        assert stat.S_IMODE(digest.stat().st_mode) == 0o600, digest
        assert digest.read_text().strip() == hashlib.sha256(binary.read_bytes()).hexdigest()


def test_processes_building_the_same_model_at_once_all_succeed(model, tmp_path) -> None:
    cache = tmp_path / "shared"
    cmd = [sys.executable, "-m", "byoc", "run", str(model), "--backend", "ccompiler",
           "--compare", "onnxruntime", "--json"]
    env = {**os.environ, "BYOC_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and json.loads(out)["ok"], err
    assert len(entries(cache, ".so")) == 1
    assert not [p for p in (cache / "c").iterdir() if p.name.startswith(".build-")]


# -- when it cannot be built ------------------------------------------------------------------


def _file_size_limit(limit: int):
    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_files


def test_a_compiler_killed_by_a_full_disk_is_a_clear_error(model, tmp_path) -> None:
    """Room for the C file but not for what the compiler writes (RLIMIT_FSIZE stands in for a
    full disk): one line naming the region and the compiler's complaint, no entry left."""
    # The limit from a real build's files, so it stays between them as the generated C grows:
    # room for the largest C file byoc writes, not for the library the compiler makes.
    sizes = tmp_path / "sizes"
    assert byoc("run", model, "--backend", "ccompiler", cache=sizes).returncode == 0
    written = [p.stat().st_size for p in (sizes / "c").iterdir()]
    c_files = max(p.stat().st_size for p in (sizes / "c").glob("*.c"))
    limit = c_files + 1024
    assert max(written) > limit, "the compiler's output would fit: the test tests nothing"
    cache = tmp_path / "cache"
    r = byoc("run", model, "--backend", "ccompiler", cache=cache,
             preexec=_file_size_limit(limit))
    assert_refused(r, "the C compiler failed on")
    assert entries(cache, ".so") == []
    assert not [p for p in (cache / "c").iterdir() if p.name.startswith(".build-")]


def test_no_room_for_the_c_file_is_a_clear_error(model, tmp_path) -> None:
    """Fixed (build_cache._compile): an OSError writing the cache escaped as 'internal error:
    OSError: [Errno 27] File too large'."""
    cache = tmp_path / "cache"
    r = byoc("run", model, "--backend", "ccompiler", cache=cache,
             preexec=_file_size_limit(8_000))
    assert_refused(r, f"cannot write the build cache {cache / 'c'}: File too large; free some "
                      "space or set BYOC_CACHE_DIR")
    assert entries(cache, ".so") == []
    assert not [p for p in (cache / "c").iterdir() if p.name.startswith(".build-")]


def _fake_cc(tmp_path: Path) -> Path:
    """A 'compiler' that answers --version and fails every compile."""
    cc = tmp_path / "fakecc"
    cc.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'fakecc 1.0'; exit 0; fi\n"
                  "echo 'fake.c:1:1: error: this compiler compiles nothing' >&2\nexit 1\n")
    cc.chmod(0o755)
    return cc


@pytest.mark.parametrize("compiler, needle", [
    ("missing", "no C compiler: cannot run"),
    ("false", "does not answer --version"),
    ("fake", "the C compiler failed on"),
])
def test_a_failing_compiler_is_a_clear_error(model, tmp_path, compiler: str, needle: str
                                             ) -> None:
    cc = {"missing": str(tmp_path / "no" / "cc"), "false": "false",
          "fake": str(_fake_cc(tmp_path))}[compiler]
    cache = tmp_path / "cache"
    r = byoc("run", model, "--backend", "ccompiler", cache=cache, env={"CC": cc})
    assert_refused(r, needle)
    if compiler == "fake":
        assert "this compiler compiles nothing" in r.stderr
        assert list((cache / "c" / "failed").glob("*.c")), "the C file is kept for reading"
    assert not cache.exists() or entries(cache, ".so") == []


def test_fallback_host_runs_what_the_compiler_cannot_build(model, tmp_path) -> None:
    """Fixed (byoc/cli.py --fallback host, byoc.build(fallback="host")): the region runs on
    the host with one warning line, its nodes counted as host, the results still right."""
    r = byoc("run", model, "--backend", "ccompiler", "--fallback", "host", "--compare",
             "onnxruntime", "--json", cache=tmp_path / "cache",
             env={"CC": str(_fake_cc(tmp_path))})
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and "ccompiler" not in result["placement"], result
    assert result["placement"]["host"]["nodes"] > 0
    (line,) = r.stderr.splitlines()
    assert line.startswith("byoc: warning: region ") and "runs on the host: ccompiler cannot " \
        "build it: region" in line and "the C compiler failed on" in line, line
    assert list(result["fallbacks"]) == [line.split()[3]]


@pytest.mark.parametrize("command", ["run", "bench", "build"])
@pytest.mark.parametrize("trouble", ["no compiler", "no room"])
def test_fallback_host_in_each_command(model, tmp_path, command: str, trouble: str) -> None:
    """Each command that builds takes --fallback host, for each way a build can fail: no
    compiler (a ToolchainError) and a cache that cannot be written (a CacheError)."""
    env, preexec = {}, None
    if trouble == "no compiler":
        env["CC"] = str(tmp_path / "no" / "cc")
    else:
        preexec = _file_size_limit(8_000)
    extra = ["--repeat", "1", "--warmup", "1"] if command == "bench" else []
    r = byoc(command, model, "--backend", "ccompiler", "--fallback", "host", *extra,
             cache=tmp_path / "cache", env=env, preexec=preexec)
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert "runs on the host: ccompiler cannot build it: " in line, line
    assert ("no C compiler" if trouble == "no compiler" else "cannot write the build cache") \
        in line, line
    if command == "build":
        assert "0 region(s)" in r.stdout and "host " in r.stdout, r.stdout


def test_fallback_host_when_a_build_per_shape_fails_at_the_first_call(tmp_path) -> None:
    """A symbolic batch: ccompiler builds at the first call, which fails; the run goes on with
    the region on the host, and the placement (of the timed second run) counts it as host."""
    path = tmp_path / "m.onnx"
    onnx.save(_symbolic_batch(plain_model()), path)
    r = byoc("run", path, "--backend", "ccompiler", "--fallback", "host", "--compare",
             "onnxruntime", "--json", "--dim", "n=2", cache=tmp_path / "cache",
             env={"CC": str(_fake_cc(tmp_path))})
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and list(result["placement"]) == ["host", "executor"], result
    assert result["placement"]["host"]["nodes"] == 8  # plain_model's nodes
    (line,) = r.stderr.splitlines()
    assert "runs on the host: ccompiler cannot build it: " in line, line


def test_fallback_and_no_fallback_contradict(model, tmp_path) -> None:
    assert_refused(byoc("run", model, "--backend", "ccompiler", "--fallback", "host",
                        "--no-fallback", cache=tmp_path / "cache"), "contradict each other")


# -- the same fallback, in the library --------------------------------------------------------


@pytest.fixture
def failing_compiler(tmp_path, monkeypatch) -> None:
    """This process's builds go to the fake compiler, with nothing found already built."""
    from byoc.codegen import build_cache

    monkeypatch.setenv("CC", str(_fake_cc(tmp_path)))
    monkeypatch.setenv("BYOC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build_cache, "_TOOLCHAIN", None)  # asked once per process
    monkeypatch.setattr(build_cache, "_LOADED", {})


def _symbolic_batch(model: onnx.ModelProto) -> onnx.ModelProto:
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "n"
    return model


@pytest.mark.parametrize("shapes", ["static", "symbolic"])
def test_build_with_fallback_host_runs_the_region_on_the_host(failing_compiler, shapes: str
                                                             ) -> None:
    """Static shapes fail while ``build`` compiles (the region is inlined back: host nodes for
    placement and explain); a symbolic batch fails at the first call (the region then runs
    with the reference compile). Either way: a warning, ``exe.fallbacks``, right numbers."""
    import byoc
    from byoc.compare import compare_outputs, run_onnxruntime
    from byoc.placement import placement

    model = plain_model() if shapes == "static" else _symbolic_batch(plain_model())
    part = byoc.partition(byoc.load_onnx(model), backends=["ccompiler"])
    (region,) = [n for n in part.functions if n != "main"]
    inputs = input_of(model)
    with pytest.raises(byoc.ByocError, match="the C compiler failed on"):  # as before
        byoc.build(part).run(inputs)
    with pytest.warns(RuntimeWarning, match=f"region {region} runs on the host: ccompiler "
                                            "cannot build it: "):
        exe = byoc.build(part, fallback="host")
        got = exe.run(inputs)
    assert list(exe.fallbacks) == [region] and "\n" not in exe.fallbacks[region]
    assert all(c.ok for c in compare_outputs(got, run_onnxruntime(model, inputs)))
    if shapes == "static":
        assert set(exe.mod.functions) == {"main"}
        assert placement(exe.mod)["host"]["nodes"] == placement(part)["ccompiler"]["nodes"]
        assert set(byoc.explain(exe.mod).values()) == {exe.fallbacks[region]}


def test_build_knows_only_the_host_and_next_fallbacks() -> None:
    import byoc

    with pytest.raises(byoc.ByocError, match="fallback must be 'host', 'next' or None, not 'cpu'"):
        byoc.build(byoc.load_onnx(plain_model()), fallback="cpu")


def test_fallback_host_reaches_regions_inside_if_branches() -> None:
    """A backend that refuses to build anything: its regions in both branches of an If go back
    into their bodies, and the model still computes what onnxruntime does."""
    import numpy as np

    import byoc
    from byoc.backend import register_backend, unregister_backend
    from byoc.compare import compare_outputs, run_onnxruntime
    from byoc.placement import placement
    from tests.test_partition_control_flow import if_model

    def refuse(func):
        raise byoc.ByocError("this backend builds nothing")

    register_backend("builds_nothing", supports=lambda call: True, compile=refuse)
    try:
        model = if_model()
        part = byoc.partition(byoc.load_onnx(model), backends=["builds_nothing"])
        regions = {n for n in part.functions if n != "main"}
        assert len(regions) >= 3  # main's, and one in each branch
        with pytest.warns(RuntimeWarning, match="builds_nothing cannot build it: this backend"):
            exe = byoc.build(part, fallback="host")
        assert set(exe.fallbacks) == regions and set(exe.mod.functions) == {"main"}
        assert list(placement(exe.mod)) == ["host"]
        for x in ([1.0, -2.0, 3.0], [-1.0, -2.0, 0.5]):  # each branch taken
            inputs = {"x": np.array(x, np.float32)}
            assert all(c.ok for c in compare_outputs(exe.run(inputs),
                                                     run_onnxruntime(model, inputs)))
    finally:
        unregister_backend("builds_nothing")
