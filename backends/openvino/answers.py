"""OpenVINO's support answers kept on disk, so that a model's next partition asks nothing.

Asking costs: a query of a few hundred node signatures takes OpenVINO about a second, a dtype
probe a compile. The answers depend only on OpenVINO's version, the CPU, and this backend's own
code, so they are kept in byoc's cache folder (``$BYOC_CACHE_DIR``, else
``$XDG_CACHE_HOME/byoc``, else ``~/.cache/byoc``, private to its owner), in
``openvino/answers-<digest of those three>.json``: a node signature's digest -> verdict, a
dtype -> how it is held. The file is written whole to a temporary file and renamed into place,
merged with what another process wrote meanwhile; one that does not parse is ignored, and a
cache that cannot be written is skipped (the answers are asked again next time).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from pathlib import Path

from . import engine

_MAX_BYTES = 64 << 20  # far beyond the answers any set of models gives

_lock = threading.Lock()
_loaded: dict | None = None


def digest(key: tuple) -> str:
    """A node signature's name on disk."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def _path() -> Path | None:
    from byoc.codegen.build_cache import _private_dir, cache_root

    ov = engine.load()
    here = Path(__file__).parent
    parts = [ov.__version__, engine.core().get_property(engine.PLUGIN, "FULL_DEVICE_NAME")]
    parts += [(here / name).read_text() for name in sorted(os.listdir(here)) if name.endswith(".py")]
    name = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    try:
        return _private_dir(_private_dir(cache_root()) / "openvino") / f"answers-{name}.json"
    except Exception:  # no cache folder to be had: answers live as long as the process
        return None


def _read(path: Path | None) -> dict:
    empty: dict = {"verdicts": {}, "held": {}}
    if path is None:
        return empty
    from byoc.files.reading import NotRegular, read_regular

    try:  # a regular file of a sane size only: a FIFO would block, /dev/zero never end
        data = json.loads(read_regular(path, "openvino answers", max_bytes=_MAX_BYTES))
        if isinstance(data.get("verdicts"), dict) and isinstance(data.get("held"), dict):
            return data
    except (OSError, ValueError, AttributeError, NotRegular):
        pass
    return empty


def load() -> dict:
    """What earlier processes learnt: {"verdicts": {digest: True | reason}, "held": {dtype:
    [verdict, exact range or None]}} (read once per process)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _read(_path())
        return _loaded


def save(verdicts: dict[str, bool | str], held: dict[str, list]) -> None:
    """Add answers to the file (merged with what is there now), written atomically."""
    data = load()
    with _lock:
        data["verdicts"].update(verdicts)
        data["held"].update(held)
        path = _path()
        if path is None:
            return
        current = _read(path)
        current["verdicts"].update(data["verdicts"])
        current["held"].update(data["held"])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(current, f)
            os.replace(tmp, path)
        except OSError:
            pass  # a full disk or a read-only cache: asked again next time
        finally:
            if tmp.exists():
                tmp.unlink()
