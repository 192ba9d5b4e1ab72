"""The fuzz tests build C regions into a fresh cache, never the user's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="package", autouse=True)
def private_build_cache(tmp_path_factory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BYOC_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz-cache")))
        yield
