"""Backend tests share one build cache per session, so each C region compiles once per run."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def byoc_cache_dir(tmp_path_factory):
    """A fresh ``BYOC_CACHE_DIR`` for the session (the user's own cache stays untouched)."""
    path = tmp_path_factory.mktemp("byoc-cache")
    old = os.environ.get("BYOC_CACHE_DIR")
    os.environ["BYOC_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("BYOC_CACHE_DIR", None)
    else:
        os.environ["BYOC_CACHE_DIR"] = old
