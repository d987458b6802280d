"""Runtime tests compile into a fresh kernel cache directory each, never into ~/.cache."""

import pytest


@pytest.fixture(autouse=True)
def isolated_cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "tilecraft-cache"
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(directory))
    return directory
