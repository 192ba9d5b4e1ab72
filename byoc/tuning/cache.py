"""The measurement cache: one small JSON file per measurement, beside the build cache.

    cache = MeasurementCache()          # $BYOC_CACHE_DIR/tune (see codegen/build_cache.py)
    cache.get(key)                      # the entry, or None if absent or not intact
    cache.put(key, {"seconds": 0.0012, "runs": 9})

Same safety as the build cache: folders only their owner may enter, every file written in the
folder under a temporary name and renamed into place (a reader sees a whole entry or none), and
every entry checked before use: it must name its own key and carry the sha256 of its content,
so a truncated, hand-edited or misplaced file is measured again rather than trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

from ..codegen.build_cache import CacheError, _private_dir, cache_root
from ..files.reading import NotRegular, read_regular

ENTRY_VERSION = 1
_MAX_ENTRY_BYTES = 1 << 20


def _checksum(key: str, payload: dict) -> str:
    text = json.dumps({"key": key, "payload": payload}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class MeasurementCache:
    """Measurements by key (a hex digest of everything that decides the time)."""

    def __init__(self, root: Path | None = None, enabled: bool = True):
        self.root = root
        self.enabled = enabled
        self._warned = False

    def folder(self) -> Path:
        base = self.root if self.root is not None else cache_root()
        return _private_dir(_private_dir(Path(base)) / "tune")

    def path(self, key: str) -> Path:
        return self.folder() / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        if not self.enabled:
            return None
        try:
            path = self.path(key)
            if not path.exists():
                return None
            # A regular file of a sane size only: a FIFO would block, /dev/zero never end.
            entry = json.loads(read_regular(path, "tune cache entry", max_bytes=_MAX_ENTRY_BYTES))
        except (OSError, ValueError, CacheError, NotRegular):
            return None
        if not isinstance(entry, dict) or entry.get("version") != ENTRY_VERSION \
                or entry.get("key") != key or not isinstance(entry.get("payload"), dict):
            return None
        if entry.get("sha256") != _checksum(key, entry["payload"]):
            return None
        return entry["payload"]

    def put(self, key: str, payload: dict) -> None:
        if not self.enabled:
            return
        entry = {"version": ENTRY_VERSION, "key": key, "payload": payload,
                 "sha256": _checksum(key, payload)}
        tmp = None
        try:
            path = self.path(key)
            folder = _private_dir(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=".entry-", dir=folder)
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f, sort_keys=True)
            os.replace(tmp, path)
            tmp = None
        except (OSError, CacheError) as exc:
            if not self._warned:  # tuning goes on; only the next tune measures again
                self._warned = True
                warnings.warn(f"cannot write the tune cache: {exc}", RuntimeWarning, stacklevel=2)
        finally:
            if tmp is not None:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
