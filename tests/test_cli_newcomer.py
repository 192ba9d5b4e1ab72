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
