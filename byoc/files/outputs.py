"""Every file and folder byoc writes, written so that no user's file is lost.

    with output_file("partitioned.onnx", force=args.force) as tmp:
        onnx.save(model, tmp)                       # renamed onto the name when the block ends

    with OutputFolder("case", force=args.force, protect=[model_path]) as out:
        onnx.save(model, out.path("model.onnx"))    # each file staged, moved in at the end

The rules (``docs/robustness.md``, "Output paths"):

- An output file that exists is replaced only with ``force``; an output folder that exists and
  is not empty is written into only with ``force``, and then only the files byoc writes are
  replaced: nothing else in it is touched.
- Files byoc wrote into a folder are listed in its ``.byoc-files`` manifest with their sha256.
  A later forced write removes those it does not write again (a case with fewer inputs must
  not keep an old ``input_2.pb``), and only while their bytes are still the ones byoc wrote.
- Everything is written to a temporary sibling first and renamed into place, so a failure or
  Ctrl-C never leaves a half-written output; a temporary left by a killed process is removed
  by the next write of the same output (``scratch``).
- A folder where a file is wanted (or the reverse), a missing parent folder, a FIFO or device
  in the way, or an output that is one of the command's own inputs (``protect``: the model
  being read) is refused in one line, before anything is written; ``force`` does not change it.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from ..errors import OutputError
from .reading import NotRegular, kind, read_regular, sha256_file
from .scratch import remove_stale, scratch_prefix

MANIFEST = ".byoc-files"
_TMP_SUFFIX = ".tmp"
_MAX_MANIFEST_BYTES = 1 << 20


def _shown(path: str | os.PathLike) -> str:
    return repr(os.fspath(path))


def _parent_ready(path: str) -> str:
    """The folder ``path`` goes in, which must exist: byoc does not guess at folders."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(parent):
        raise OutputError(f"cannot write {_shown(path)}: its folder {parent!r} does not exist")
    if not os.path.isdir(parent):
        raise OutputError(f"cannot write {_shown(path)}: {parent!r} is not a folder")
    return parent


def _refuse_protected(path: str, protect: Iterable[str | os.PathLike]) -> None:
    """Refuse to replace a file the command reads (the model, an input), even with --force."""
    for other in protect:
        try:
            if other is None or not os.path.samefile(path, other):
                continue
        except OSError:
            continue
        also = "" if os.path.abspath(other) == os.path.abspath(path) else f" (as {_shown(other)})"
        raise OutputError(f"cannot replace {_shown(path)}: this command reads it{also}")


def check_output_file(path: str | os.PathLike, force: bool = False,
                      protect: Iterable[str | os.PathLike] = ()) -> None:
    """Refuse an output file byoc may not write (see the module's rules); nothing is written."""
    path = os.fspath(path)
    if not path:
        raise OutputError("an output path is empty")
    if path.endswith(("/", os.sep)) or os.path.basename(path) in ("", ".", ".."):
        raise OutputError(f"cannot write {_shown(path)}: it names a folder; give a file name")
    _parent_ready(path)
    if not os.path.lexists(path):
        return
    try:
        st = os.stat(path)
    except OSError:
        raise OutputError(f"cannot write {_shown(path)}: it is a broken symlink") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot write {_shown(path)}: it is a folder; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"cannot write {_shown(path)}: it is {kind(st.st_mode)}")
    _refuse_protected(path, protect)
    if not force:
        raise OutputError(f"{_shown(path)} exists; pass --force to replace it")


def _create_scratch_file(folder: str, stem: str) -> str:
    """A new empty file ``.<stem>.byoc-<pid>-<host>-<random>.tmp`` in ``folder``, made with the
    user's umask (``mkstemp`` would make it 0600, and the output would keep that)."""
    prefix = scratch_prefix(f".{stem[:100]}.byoc-")
    for _ in range(100):
        path = os.path.join(folder, prefix + secrets.token_hex(4) + _TMP_SUFFIX)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
            return path
        except FileExistsError:
            continue
    raise OutputError(f"cannot make a temporary file in {folder!r}")


@contextmanager
def _writing(path: str) -> Iterator[None]:
    """An OSError while writing an output (a full disk, no permission) as an OutputError."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"cannot write {_shown(path)}: "
                          f"{exc.strerror or type(exc).__name__}") from None


def _move_into_place(tmp: str, path: str, force: bool) -> None:
    """Rename ``tmp`` onto ``path``; without ``force`` never over a file that appeared since
    the check (a hard link creates the name only if it is free)."""
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise OutputError(f"{_shown(path)} exists; pass --force to replace it") from None
    except OSError as exc:  # a file system without hard links: check, then rename
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK,
                             errno.EXDEV):
            raise
        if os.path.lexists(path):
            raise OutputError(f"{_shown(path)} exists; pass --force to replace it") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


@contextmanager
def output_file(path: str | os.PathLike, *, force: bool = False,
                protect: Iterable[str | os.PathLike] = ()) -> Iterator[str]:
    """A temporary path beside ``path`` to write the whole output to; renamed onto ``path``
    when the block ends, removed if it raises."""
    path = os.fspath(path)
    protect = list(protect)
    check_output_file(path, force, protect)
    folder = _parent_ready(path)
    stem = os.path.basename(path)
    remove_stale(folder, f".{stem[:100]}.byoc-", _TMP_SUFFIX)
    with _writing(path):
        tmp = _create_scratch_file(folder, stem)
    try:
        with _writing(path):
            yield tmp
            check_output_file(path, force, protect)  # again: the block may have taken minutes
            _move_into_place(tmp, path, force)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def check_output_folder(path: str | os.PathLike, force: bool = False, ignore: str = "") -> None:
    """Refuse an output folder byoc may not write (see the module's rules); nothing is written.
    ``ignore``: an entry of the folder that does not count (byoc's own staging folder)."""
    path = os.fspath(path)
    if not path:
        raise OutputError("an output folder is empty")
    if os.path.lexists(path) and not os.path.exists(path):
        raise OutputError(f"cannot write into {_shown(path)}: it is a broken symlink")
    if not os.path.exists(path):
        _parent_ready(path)
        return
    if not os.path.isdir(path):
        raise OutputError(f"cannot write into {_shown(path)}: it is a file, not a folder")
    if not force and [e for e in _entries(path) if e != ignore]:
        raise OutputError(f"folder {_shown(path)} exists and is not empty; pass --force to "
                          f"replace the files byoc writes there (nothing else is touched)")


def _entries(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError as exc:
        raise OutputError(f"cannot write into {_shown(path)}: "
                          f"{exc.strerror or type(exc).__name__}") from None


def _safe_relative(rel: str) -> bool:
    parts = rel.split("/")
    return (bool(rel) and not os.path.isabs(rel) and "\\" not in rel and "\0" not in rel
            and all(p not in ("", ".", "..") for p in parts))


class OutputFolder:
    """A folder of files byoc writes, staged and moved into place when the ``with`` ends.

    Its constructor checks the path (``check_output_folder``): call it before the long work.
    ``path(rel)`` is where to write the file ``rel`` (``"/"``-separated, fixed by byoc, never
    from a model); ``files`` lists them in the order written.
    """

    def __init__(self, path: str | os.PathLike, *, force: bool = False,
                 protect: Iterable[str | os.PathLike] = ()):
        self.target = os.fspath(path)
        self.force = force
        self.protect = list(protect)
        self.files: list[str] = []
        self._staging: str | None = None
        check_output_folder(self.target, force)

    def __enter__(self) -> OutputFolder:
        return self

    def path(self, rel: str) -> str:
        """The staged path to write ``rel`` to (its folders made)."""
        if not _safe_relative(rel):
            raise ValueError(f"not a relative file name: {rel!r}")
        if rel == MANIFEST or rel in self.files:
            raise ValueError(f"{rel!r} is written twice or is the manifest")
        staging = self._stage()
        full = os.path.join(staging, *rel.split("/"))
        with _writing(self.target):
            os.makedirs(os.path.dirname(full), exist_ok=True)
        self.files.append(rel)
        return full

    def _stage(self) -> str:
        if self._staging is None:
            inside = os.path.isdir(self.target)
            folder = self.target if inside else _parent_ready(self.target)
            prefix = ".byoc-" if inside else f".{os.path.basename(os.path.abspath(self.target))[:100]}.byoc-"
            remove_stale(folder, prefix)
            with _writing(self.target):
                for _ in range(100):
                    staging = os.path.join(folder, scratch_prefix(prefix) + secrets.token_hex(4))
                    try:
                        os.mkdir(staging, 0o777)  # the user's umask decides, as for any folder
                        break
                    except FileExistsError:
                        continue
            self._staging = staging
        return self._staging

    def __exit__(self, typ, exc, tb) -> bool:
        try:
            if typ is None:
                with _writing(self.target):
                    self._commit()
        finally:
            if self._staging is not None and os.path.lexists(self._staging):
                shutil.rmtree(self._staging, ignore_errors=True)
        return False

    # -- moving in ---------------------------------------------------------------------------------

    def _manifest(self, root: str) -> dict[str, str]:
        """{rel: sha256} of the files byoc wrote: those staged in ``root``."""
        return {rel: sha256_file(os.path.join(root, *rel.split("/"))) for rel in self.files}

    def _commit(self) -> None:
        staging = self._stage()  # a folder with no files is still made, with its manifest
        written = self._manifest(staging)
        with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
            json.dump({"written_by": "byoc", "files": written}, f, indent=1, sort_keys=True)
        if not os.path.isdir(self.target):
            self._rename_new(staging)
            return
        # Again: it may have filled meanwhile (the staging folder is in it, and does not count).
        check_output_folder(self.target, self.force, ignore=os.path.basename(staging))
        old = self._old_manifest()
        moves = self._planned_moves(staging)
        for src, dest in moves:
            os.replace(src, dest)
        for rel, digest in old.items():  # byoc's own files from before, not written again
            if rel not in written:
                self._remove_if_unchanged(rel, digest)
        os.replace(os.path.join(staging, MANIFEST), os.path.join(self.target, MANIFEST))

    def _rename_new(self, staging: str) -> None:
        try:
            os.rename(staging, self.target)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise OutputError(f"cannot write into {_shown(self.target)}: something was "
                                  "created there while byoc worked") from None
            raise

    def _planned_moves(self, staging: str) -> list[tuple[str, str]]:
        """(staged, destination) for every file, after checking every destination: a refusal
        leaves the folder as it was."""
        moves = []
        made: set[str] = set()
        for rel in [*self.files]:
            parts = rel.split("/")
            for depth in range(1, len(parts)):
                sub = os.path.join(self.target, *parts[:depth])
                if sub in made:
                    continue
                if os.path.lexists(sub) and not os.path.isdir(sub):
                    raise OutputError(f"cannot write {_shown(os.path.join(self.target, *parts))}:"
                                      f" {_shown(sub)} is a file where byoc writes a folder")
                made.add(sub)
            dest = os.path.join(self.target, *parts)
            if os.path.lexists(dest):
                st = os.lstat(dest)
                if stat.S_ISDIR(st.st_mode):
                    raise OutputError(f"cannot write {_shown(dest)}: it is a folder where byoc "
                                      "writes a file")
                _refuse_protected(dest, self.protect)
            moves.append((os.path.join(staging, *parts), dest))
        for sub in sorted(made, key=len):
            if not os.path.isdir(sub):
                os.mkdir(sub, 0o777)
        return moves

    def _old_manifest(self) -> dict[str, str]:
        """The files a previous byoc wrote here, as its manifest says; {} if there is none or
        it cannot be trusted (then nothing is removed)."""
        path = os.path.join(self.target, MANIFEST)
        try:
            data = json.loads(read_regular(path, max_bytes=_MAX_MANIFEST_BYTES))
            files = data["files"]
            return {rel: digest for rel, digest in files.items()
                    if isinstance(rel, str) and isinstance(digest, str) and _safe_relative(rel)}
        except Exception:  # missing, odd, not ours: remove nothing
            return {}

    def _remove_if_unchanged(self, rel: str, digest: str) -> None:
        """Remove a file byoc wrote before, if its bytes are still the ones byoc wrote (so an
        edited one stays) and it is a regular file inside the folder (not through a symlink)."""
        path = os.path.join(self.target, *rel.split("/"))
        try:
            root = os.path.realpath(self.target)
            if os.path.commonpath([root, os.path.realpath(path)]) != root:
                return
            if not stat.S_ISREG(os.lstat(path).st_mode) or sha256_file(path) != digest:
                return
            os.unlink(path)
            folder = os.path.dirname(path)
            while os.path.realpath(folder) != root and not os.listdir(folder):
                os.rmdir(folder)  # a subfolder byoc made, now empty
                folder = os.path.dirname(folder)
        except (OSError, NotRegular):  # gone, or swapped for something odd: leave it
            return
