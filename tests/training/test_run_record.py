"""The run record's comparison on resume: settings added after a run was recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcse_weince.training.config import ConfigError
from simcse_weince.training.run_record import RECORD, check_resume


def test_a_run_recorded_before_a_setting_existed_resumes_with_its_old_value(tmp_path: Path) -> None:
    """A checkpoint whose record lacks ``data.validation`` (recorded before the setting) resumes under the value
    every such run had (``stsb``), and is refused under another one."""
    (tmp_path / RECORD).write_text(json.dumps({"data.max_seq_length": 32}))
    now = {"data.max_seq_length": 32, "data.validation": "stsb"}
    assert check_resume(tmp_path, now, set()) == {}
    with pytest.raises(ConfigError, match=r"validation: 'stsb' in the checkpoint, 'retrieval:x' now"):
        check_resume(tmp_path, now | {"data.validation": "retrieval:x"}, set())


def test_a_run_recorded_before_the_top_m_terms_resumes_with_them_off(tmp_path: Path) -> None:
    """A record without the ``topm_*`` settings (written before they existed) resumes with the terms off, and is
    refused with a term on."""
    from simcse_weince.losses.topm import TopMConfig

    (tmp_path / RECORD).write_text(json.dumps({"loss.temperature": 0.5}))
    now = {"loss.temperature": 0.5} | {f"loss.{k}": v for k, v in TopMConfig().__dict__.items()}
    assert check_resume(tmp_path, now, set()) == {}
    with pytest.raises(ConfigError, match=r"topm_weibit_weight: 0.0 in the checkpoint, 0.5 now"):
        check_resume(tmp_path, now | {"loss.topm_weibit_weight": 0.5}, set())


def test_a_run_recorded_before_length_groups_resumes_with_one_forward(tmp_path: Path) -> None:
    """A record without ``model.length_groups`` encoded each batch in one forward: it resumes with
    ``length_groups 1``; the new default (2) draws other dropout masks, a difference named until allowed."""
    (tmp_path / RECORD).write_text(json.dumps({"data.max_seq_length": 32}))
    now = {"data.max_seq_length": 32, "model.length_groups": 1}
    assert check_resume(tmp_path, now, set()) == {}
    with pytest.raises(ConfigError, match=r"length_groups: 1 in the checkpoint, 2 now"):
        check_resume(tmp_path, now | {"model.length_groups": 2}, set())
    assert check_resume(tmp_path, now | {"model.length_groups": 2}, {"length_groups"}) == {
        "model.length_groups": (1, 2)
    }
