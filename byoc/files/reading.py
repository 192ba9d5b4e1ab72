"""Opening a file byoc is given to read: only a regular file, and only as much as it holds.

A FIFO blocks ``open`` (or the first read) until someone writes to it, perhaps forever; a symlink
to ``/dev/zero`` or ``/dev/urandom`` reads without end. So a path is opened without blocking,
and the open file itself (not the name, which could be swapped meanwhile) is checked to be a
regular file, and its size against what the caller will take, before a byte is read.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import stat

from ..errors import ByocError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def kind(mode: int) -> str:
    """What a file of this mode is, in words (``a FIFO (named pipe)``)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


class NotRegular(ByocError):
    """The path exists but is not a regular file (folder, FIFO, device), or is too big."""


def open_regular(path: str | os.PathLike, what: str = "file", *, max_bytes: int | None = None,
                 error: type[ByocError] = NotRegular, why: str = "") -> io.BufferedReader:
    """``open(path, "rb")``, refused with ``error`` unless it is a regular file of at most
    ``max_bytes`` (``why`` says where that bound comes from). ``what`` names the file in the
    message (``--input x``, ``model``)."""
    shown = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{what}: no such file {shown!r}") from None
    except IsADirectoryError:
        raise error(f"{what}: {shown!r} is a folder, not a file") from None
    except OSError as exc:
        raise error(f"{what}: cannot open {shown!r}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what}: {shown!r} is {kind(st.st_mode)}, not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise error(f"{what}: {shown!r} holds {st.st_size:,} bytes, more than the "
                        f"{max_bytes:,} it may{why}")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, what: str = "file", *, max_bytes: int | None = None,
                 error: type[ByocError] = NotRegular, why: str = "") -> bytes:
    """The bytes of a regular file (see ``open_regular``); no more than its size when opened,
    even if it grows while it is read."""
    with open_regular(path, what, max_bytes=max_bytes, error=error, why=why) as f:
        return f.read(os.fstat(f.fileno()).st_size)


def sha256_file(path: str | os.PathLike, what: str = "file", *, max_bytes: int | None = None,
                error: type[ByocError] = NotRegular) -> str:
    """The sha256 (hex) of a regular file's bytes, read in blocks (see ``open_regular``)."""
    digest = hashlib.sha256()
    with open_regular(path, what, max_bytes=max_bytes, error=error) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_regular(path: str | os.PathLike) -> bool:
    """Whether ``path`` (followed through symlinks) is a regular file; False if it is missing."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
