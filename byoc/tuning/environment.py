"""What besides the work itself decides a measured time: the machine, the thread setting, and the
versions of byoc, numpy and each backend. All of it goes into every measurement's cache key and
into the plan.

A built-in backend's version is byoc's source (every .py/.c/.h of the package outside the CLI
and tune, hashed once per process: an edit to a kernel or a code generator is a new version)
plus, for C backends, the compiler's ``--version``; onnxruntime's is its package version; a
backend from another package is that package's version and the digest of its module's file.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform
import sys
from pathlib import Path

import numpy as np

_C_BACKENDS = ("byoc.backends.ccompiler", "byoc.backends.native")


@functools.lru_cache(maxsize=1)
def byoc_source_digest() -> str:
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in (".py", ".c", ".h") or rel.startswith(("cli/", "tuning/")) \
                or "__pycache__" in rel:
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine() -> dict:
    """The machine as the plan records it."""
    from ..codegen.build_cache import _cpu_id

    return {"cpu": cpu_model(), "cores": cores(), "arch": platform.machine(),
            "cpu_digest": hashlib.sha256(_cpu_id().encode()).hexdigest()[:16]}


def thread_setting(threads: int | None = None) -> dict:
    """The thread setting measurements run under: the count every engine may use
    (``byoc/runtime/threads.py``; ``threads`` or the default), and the cores there are."""
    from ..runtime.threads import physical_cores, resolve

    return {"threads": resolve(threads), "physical_cores": physical_cores(), "cores": cores()}


@functools.lru_cache(maxsize=None)
def backend_version(name: str) -> str:
    if not name or name == "host":
        return f"numpy {np.__version__}"
    from ..backend import get_backend

    backend = get_backend(name)
    module = getattr(backend.compile, "__module__", "") or ""
    if module.startswith("byoc."):
        text = f"byoc {byoc_source_digest()}"
        if module.startswith(_C_BACKENDS):
            text += f"; cc {_compiler_version()}"
        if name in ("onnxruntime", "openvino"):  # an engine's own version, too
            text += f"; {name} {importlib.metadata.version(name)}"
        return text
    top = module.split(".")[0]
    dists = importlib.metadata.packages_distributions().get(top, [])
    version = ""
    for dist in dists:
        try:
            version = f"{dist} {importlib.metadata.version(dist)}"
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    mod = sys.modules.get(module)
    source = getattr(mod, "__file__", None)
    if source and os.path.isfile(source):
        with open(source, "rb") as f:
            version += f"; {hashlib.sha256(f.read()).hexdigest()[:16]}"
    return version or module


def _compiler_version() -> str:
    try:
        from ..codegen.build_cache import toolchain

        return toolchain()[1].splitlines()[0]
    except Exception:  # no compiler: such a backend measures nothing anyway
        return "none"


def versions(backends: list[str]) -> dict:
    """The versions the plan records."""
    import byoc

    out = {"byoc": byoc.__version__, "byoc_source": byoc_source_digest(),
           "python": platform.python_version(), "numpy": np.__version__}
    try:
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    out["backends"] = {b: backend_version(b) for b in backends}
    return out
