"""Text tests build their token caches in a temporary folder, not in the user's Hugging Face cache."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def token_cache_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hf-datasets-cache")


@pytest.fixture(autouse=True)
def _isolated_token_cache(token_cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    # the attribute for this process, the variable for the subprocesses (accelerate launch) that read it
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", token_cache_home)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(token_cache_home))
