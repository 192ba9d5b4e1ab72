"""byoc's temporary files and folders: named after the process that made them, so that the
ones a killed process left behind can be told apart and removed.

A scratch name is ``<prefix><pid>-<host>-<random>``: ``host`` is a short hash of the machine's
name (a cache folder may be shared over a network, where another machine's pid means nothing
here). A scratch entry is stale when its process is gone (same machine) or when it is older than
``MAX_AGE_S`` (no byoc step takes that long: a compile times out after ten minutes).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import time
from functools import lru_cache

MAX_AGE_S = 3600


@lru_cache(maxsize=1)
def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def scratch_prefix(prefix: str) -> str:
    """``prefix`` followed by this process's tag: give it to ``mkstemp``/``mkdtemp``."""
    return f"{prefix}{os.getpid()}-{_host()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone's process, or a number we cannot ask about: not ours to judge
    return True


def is_stale(name: str, prefix: str, mtime: float, now: float | None = None) -> bool:
    """Whether the scratch entry ``name`` (made with ``scratch_prefix(prefix)``, or an older
    name with only ``prefix``) was left behind."""
    if not name.startswith(prefix):
        return False
    if (now if now is not None else time.time()) - mtime > MAX_AGE_S:
        return True
    pid, _, rest = name[len(prefix):].partition("-")
    host, _, _ = rest.partition("-")
    return pid.isascii() and pid.isdigit() and host == _host() and not _alive(int(pid))


def remove_stale(folder: str | os.PathLike, prefix: str, suffix: str = "") -> list[str]:
    """Remove the stale scratch entries ``prefix...suffix`` directly in ``folder``; returns
    their names. Errors (a folder we cannot list, an entry gone meanwhile) are ignored: this
    is tidying, never a reason to fail."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(suffix)):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not is_stale(entry.name, prefix, st.st_mtime, now):
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.name)
        except OSError:
            continue
    return removed
