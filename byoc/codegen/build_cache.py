"""Build generated C as a cffi extension module (API mode, out of line), cached by content.

    mod = build("void f(float *y) { y[0] = 1; }", "void f(float *y);", region="my_region")
    mod.lib.f(mod.ffi.from_buffer("float[]", y))

The module is named ``_byoc_<sha256[:16]>`` of everything that decides the binary: the source,
the declarations, the flags, the compiler's ``--version``, the CPU (for ``-march=native``) and
Python's extension ABI. It lives in ``$BYOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/byoc``, else
``~/.cache/byoc`` (under ``c/``), a folder only its owner may enter. A build happens in a private
temporary folder and its result is renamed into place, so a half-written module is never seen
and two processes building the same module at once both succeed. A failed compile leaves no
module behind; its C file is kept under ``c/failed/`` for the error message.

Beside each module (and object) is ``<name>.sha256``, the digest of its bytes, written when it
is built. Only a file whose bytes match it is loaded: a truncated module would kill the process
at dlopen (SIGBUS), and one whose content is not what its name says would run other code. Any
other file is rebuilt. An OSError writing the cache (a full disk, a file size limit) is a
CacheError naming the folder.

The C compiler is run without a shell; its command line holds only flags and paths named by
hashes, never a string from a model.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import platform
import shlex
import shutil
import signal
import stat
import subprocess
import sysconfig
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import cffi
import cffi.recompiler

from ..errors import ByocError, ByocWarning
from ..files.reading import NotRegular, read_regular, sha256_file
from ..files.scratch import remove_stale, scratch_prefix

KEY_VERSION = "1"  # bump when the way modules are built changes
# -fno-math-errno and -fno-trapping-math let loops calling sqrtf or comparing floats vectorize;
# neither changes a result. -march=native is dropped if the compiler refuses it. A call of a
# function the source does not declare is an error, not C89's guess of its type (a library
# entry left out of runtime_c's declarations was called that way and ran by luck).
# -fno-tree-loop-distribute-patterns: a loop that zero-fills or copies stays a vector loop, not
# a memset or memcpy, which GCC expands for AMD Zen (and for sizes it cannot know) as `rep stos`
# or `rep movs`, whose start-up took 60% of a stride-2 depthwise conv's time (a plane's short
# zero runs, on a Zen 3; 0.39x with the flag) and of the packers' zero tails.
COMMON_FLAGS = ("-march=native", "-fno-math-errno", "-fno-trapping-math", "-std=gnu11",
                "-Werror=implicit-function-declaration", "-fno-tree-loop-distribute-patterns")
OPTIONAL_FLAGS = ("-march=native", "-fno-tree-loop-distribute-patterns")  # dropped if refused
# Generated regions are large and compiled often: -O2 with the cheap vectorizer cost model
# compiles in two thirds of -O3's time and runs their loops as fast. Libraries built once
# (the GEMM) get -O3, and hidden symbols: the modules linking them do not export them.
# -ffp-contract=off: a region's a * b + c rounds twice, as onnxruntime's separate Mul and Add
# do; fused into one FMA its last bit differs, and a quantizer downstream turns that into a
# whole step (docs/decisions.md, "Bit-exact where onnxruntime is"). The GEMM keeps its FMAs.
REGION_OPT = ("-O2", "-fvect-cost-model=cheap", "-ffp-contract=off")
LIBRARY_OPT = ("-O3", "-fvisibility=hidden")
_EXT_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
_COMPILE_TIMEOUT_S = 600


class BuildError(ByocError):
    """A region cannot be built on this machine (the compiler, the cache): what
    ``byoc.build(..., fallback="host")`` runs on the host instead."""


class CompileError(BuildError):
    """The C compiler rejected generated code: which region, which file, what it said."""

    def __init__(self, region: str, c_file: Path, message: str, command: list[str]):
        self.region, self.c_file, self.message, self.command = region, c_file, message, command
        first = next((ln for ln in message.splitlines() if "error" in ln), "")
        first = first or (message.splitlines()[0] if message.strip() else "no message")
        super().__init__(f"region {region!r}: the C compiler failed on {c_file}: {first}\n"
                         f"{message}")


class CacheError(BuildError):
    """The cache folder cannot be made safe (not ours), or cannot be written (full disk)."""


class CompileTimeout(BuildError):
    """The C compiler ran past ``compile_timeout()``; its process group was killed."""


class ToolchainError(BuildError):
    """No C compiler, or one that does not answer ``--version``."""


@contextmanager
def _writing(folder: Path):
    """An OSError writing the cache (ENOSPC, EFBIG, EACCES) as a CacheError naming the folder."""
    try:
        yield
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
        raise CacheError(f"cannot write the build cache {folder}: "
                         f"{exc.strerror or type(exc).__name__}; "
                         f"{'free some space or ' if full else ''}set BYOC_CACHE_DIR") from None


@dataclass
class BuildStats:
    """What this process built: modules compiled, found in the cache, seconds compiling."""

    compiled: int = 0
    cached: int = 0
    seconds: float = 0.0


STATS = BuildStats()
_LOCK = threading.Lock()
_LOADED: dict[str, ModuleType] = {}
_TOOLCHAIN: tuple[list[str], str, tuple[str, ...]] | None = None
_SWEPT: set[Path] = set()
_BUILD_PREFIX = ".build-"  # + pid, host and random: files/scratch.py tells when one is stale
# No module byoc builds comes near this; a cache file beyond it is damage, not read whole.
MAX_ENTRY_BYTES = 1 << 30
_MAX_DIGEST_BYTES = 128


# -- where -----------------------------------------------------------------------------------------


def cache_root() -> Path:
    """``$BYOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/byoc``, else ``~/.cache/byoc``."""
    if os.environ.get("BYOC_CACHE_DIR"):
        return Path(os.environ["BYOC_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "byoc"
    return Path.home() / ".cache" / "byoc"


def _private_dir(path: Path) -> Path:
    """``path`` created if needed, owned by us, mode 0o700 (a module here is code we run)."""
    with _writing(path):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
        if st.st_uid != os.getuid():
            raise CacheError(f"cache folder {path} belongs to another user; set BYOC_CACHE_DIR")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
    return path


def module_dir() -> Path:
    """The folder of built modules, created private; build folders that killed processes left
    behind are removed the first time a process asks for it."""
    root = _private_dir(cache_root())
    folder = _private_dir(root / "c")
    if folder not in _SWEPT:
        _SWEPT.add(folder)
        remove_stale(folder, _BUILD_PREFIX)
    return folder


# -- the toolchain ---------------------------------------------------------------------------------


def compiler_command() -> list[str]:
    """The C compiler: ``$CC``, else the one Python was built with, else ``cc``."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def compile_timeout() -> float:
    """Seconds a compile may take (``$BYOC_COMPILE_TIMEOUT``, default 600)."""
    value = os.environ.get("BYOC_COMPILE_TIMEOUT", "")
    try:
        return float(value) if float(value) > 0 else _COMPILE_TIMEOUT_S
    except ValueError:
        return _COMPILE_TIMEOUT_S


def _run(cmd: list[str], cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run the compiler in a process group of its own, so that when it takes too long (or the
    run is interrupted) the whole group is killed: gcc's cc1 and as with it, none orphaned.
    A compile over its time is a BuildError like a failed one (``fallback="host"`` takes it)."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=compile_timeout())
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CompileTimeout(f"the C compiler took more than {compile_timeout():g} s "
                             f"({os.path.basename(cmd[0])}; set BYOC_COMPILE_TIMEOUT)") from None
    except BaseException:  # KeyboardInterrupt: no compiler left running behind us
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


@functools.lru_cache(maxsize=1)
def _cpu_id() -> str:
    """What -march=native means on this machine, so a shared cache never mixes CPUs."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            info = [ln for ln in f.read().splitlines()
                    if ln.split(":")[0].strip() in ("model name", "flags", "Features")]
        return "\n".join(dict.fromkeys(info))
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


@functools.cache
def native_flags_have(flag: str) -> bool:
    """Whether code compiled here targets a CPU feature (``avx512f``): -march=native is used
    and the CPU lists it."""
    words = {w for ln in _cpu_id().splitlines() if ln.split(":")[0].strip() in ("flags", "Features")
             for w in ln.split(":", 1)[-1].split()}
    if flag not in words:
        return False
    try:
        return "-march=native" in toolchain()[2]
    except ToolchainError:  # no compiler (C written with --emit-c): nothing targets the CPU
        return False


def _probe_flags(cc: list[str]) -> tuple[str, ...]:
    """COMMON_FLAGS, without the optional ones if this compiler refuses them."""
    with tempfile.TemporaryDirectory(prefix="byoc-probe-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("int byoc_probe(void) { return 0; }\n")
        done = _run([*cc, *COMMON_FLAGS, "-fPIC", "-c", str(src), "-o", str(Path(tmp) / "p.o")])
    if done.returncode == 0:
        return COMMON_FLAGS
    return tuple(f for f in COMMON_FLAGS if f not in OPTIONAL_FLAGS)


def toolchain() -> tuple[list[str], str, tuple[str, ...]]:
    """The compiler command, its ``--version`` (asked once per process) and the flags to use."""
    global _TOOLCHAIN
    if _TOOLCHAIN is None:
        cc = compiler_command()
        try:
            version = _run([*cc, "--version"])
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolchainError(f"no C compiler: cannot run {cc[0]!r} ({exc}); set CC") \
                from None
        if version.returncode != 0:
            raise ToolchainError(f"the C compiler {cc[0]!r} does not answer --version: "
                            f"{version.stderr.strip()[:200]}")
        _TOOLCHAIN = (cc, version.stdout.strip(), _probe_flags(cc))
    return _TOOLCHAIN


# -- building --------------------------------------------------------------------------------------


def _digest(opt: tuple[str, ...], *parts: str) -> str:
    """sha256[:16] of the parts and of everything that decides a binary on this machine."""
    _, version, flags = toolchain()
    digest = hashlib.sha256()
    for part in (KEY_VERSION, version, " ".join((*opt, *flags)),
                 _cpu_id() if "-march=native" in flags else "", _EXT_SUFFIX, cffi.__version__,
                 *parts):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def module_name(source: str, cdef: str, objects: tuple[Path, ...] = ()) -> str:
    """``_byoc_<sha256[:16]>`` of the source, the declarations, the objects linked and the
    toolchain (objects are named by their own content hash)."""
    return "_byoc_" + _digest(REGION_OPT, "module", source, cdef, *(p.name for p in objects))


def build_object(source: str, label: str = "library") -> Path:
    """A C file compiled (not linked) once into ``_byoc_obj_<hash>.o`` in the cache."""
    folder = module_dir()
    path = folder / f"_byoc_obj_{_digest(LIBRARY_OPT, 'object', source)}.o"
    if not _intact(path):  # a damaged or foreign object would be linked into every module
        _compile(path, source, label, LIBRARY_OPT,
                 lambda c_file, out: ["-c", str(c_file), "-o", str(out)])
    return path


def build(source: str, cdef: str, *, region: str = "", objects: tuple[Path, ...] = ()
          ) -> ModuleType:
    """The loaded extension module for ``source`` (compiled now, or found in the cache).

    ``cdef`` declares what Python calls (parsed by cffi); ``objects`` are linked in (from
    ``build_object``); ``region`` names the code in errors.
    """
    name = module_name(source, cdef, objects)
    with _LOCK:
        if name in _LOADED:
            return _LOADED[name]
    path = module_dir() / (name + _EXT_SUFFIX)
    if _intact(path):
        try:
            module = _load(name, path)
            STATS.cached += 1
            return module
        except ImportError:  # intact but not loadable here: build it again
            pass
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    wrapped = io.StringIO()
    cffi.recompiler.make_c_source(ffi, name, source, wrapped)
    include = sysconfig.get_paths()["include"]
    _compile(path, wrapped.getvalue(), region or name, REGION_OPT, lambda c_file, out: [
        "-shared", "-I", include, str(c_file), *map(str, objects), "-o", str(out), "-lm"])
    return _load(name, path)


def _compile(target: Path, text: str, label: str, opt: tuple[str, ...], args) -> None:
    """Compile ``text`` into ``target`` through a private temporary folder, then rename."""
    cc, _, flags = toolchain()
    folder = target.parent
    with _writing(folder):
        tmp = Path(tempfile.mkdtemp(prefix=scratch_prefix(_BUILD_PREFIX), dir=folder))
    try:
        c_file = tmp / (target.name.split(".")[0] + ".c")
        with _writing(folder):
            c_file.write_text(text)
        built = tmp / target.name
        # Paths relative to the private folder (the compiler runs in it): the binary records
        # the C file's name, so concurrent builds of one module then write the same bytes.
        cmd = [*cc, *opt, *flags, "-fPIC", *args(Path(c_file.name), Path(built.name))]
        start = time.perf_counter()
        try:
            done = _run(cmd, cwd=str(tmp))
        finally:
            STATS.seconds += time.perf_counter() - start
        if done.returncode != 0 or not built.is_file():
            kept = _private_dir(folder / "failed") / c_file.name
            with _writing(folder):
                os.replace(c_file, kept)
            message = (done.stderr or done.stdout).strip()
            raise CompileError(label, kept, message.replace(str(tmp) + os.sep, ""), cmd)
        with _writing(folder):
            os.chmod(built, 0o700)
            digest = tmp / _digest_path(target).name
            digest.write_text(sha256_file(built) + "\n")
            os.chmod(digest, 0o600)
            _make_way(folder / c_file.name)
            os.replace(c_file, folder / c_file.name)  # kept beside the binary, for reading
            # Atomic renames, the binary first: a reader sees a whole file or none, and a
            # digest that does not match it yet only makes a reader build it once more.
            _make_way(target)
            os.replace(built, target)
            _make_way(_digest_path(target))
            os.replace(digest, _digest_path(target))
        STATS.compiled += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _digest_path(target: Path) -> Path:
    """``<name>.sha256`` beside ``<name>.<suffix>``."""
    return target.with_name(target.name.split(".")[0] + ".sha256")


def _make_way(path: Path) -> None:
    """Remove what is not a regular file at a cache path about to be written (a folder: a
    rename cannot replace it), so that a damaged entry is rebuilt, not refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        return
    try:
        shutil.rmtree(path) if stat.S_ISDIR(st.st_mode) else os.unlink(path)
    except FileNotFoundError:  # another process cleared it first
        pass


def _intact(path: Path) -> bool:
    """True if ``path`` holds the bytes its digest file says it was built with. Both are
    checked to be regular files of a sane size before they are read (a FIFO would block, a
    symlink to /dev/zero read forever). A missing entry is False; a damaged or odd one is
    False with a warning, and is rebuilt."""
    digest = _digest_path(path)
    if not (os.path.lexists(path) and os.path.lexists(digest)):
        return False  # not built yet (or a build is renaming it into place right now)
    try:
        want = read_regular(digest, "digest", max_bytes=_MAX_DIGEST_BYTES).decode("ascii")
        if want.strip() == sha256_file(path, "module", max_bytes=MAX_ENTRY_BYTES):
            return True
        why = "its bytes do not match its digest"
    except UnicodeDecodeError:
        why = "its digest file is not a digest"
    except NotRegular as exc:
        why = str(exc)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    warnings.warn(ByocWarning(f"build cache entry {path.name} is damaged ({why}); rebuilt"),
                  stacklevel=2)
    return False


def _load(name: str, path: Path) -> ModuleType:
    with _LOCK:
        if name in _LOADED:
            return _LOADED[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADED[name] = module
        return module
