"""The one "same settings as the saved run?" comparison (``simcse_weince/core/setting_changes.py``)."""

from __future__ import annotations

from simcse_weince.core.setting_changes import setting_changes


def test_the_same_settings_are_no_change_and_other_ones_are_listed_sorted() -> None:
    saved = {"seed": 1, "lr": 0.1, "batch": 64}
    assert setting_changes(saved, dict(saved)) == {}
    changes = setting_changes(saved, {"seed": 2, "lr": 0.1, "batch": 32})
    assert changes == {"batch": (64, 32), "seed": (1, 2)} and list(changes) == ["batch", "seed"]


def test_a_setting_missing_on_one_side_is_none_there() -> None:
    assert setting_changes({"a": 1}, {"b": 2}) == {"a": (1, None), "b": (None, 2)}
    assert setting_changes({"a": None}, {}) == {}  # None recorded and nothing now: the same


def test_keys_choose_the_settings_compared_and_their_order() -> None:
    saved, now = {"z": 1, "a": 1, "m": 1}, {"z": 2, "a": 2, "m": 2}
    assert list(setting_changes(saved, now, keys=("z", "a"))) == ["z", "a"]  # m is not compared


def test_ignored_names_are_never_compared() -> None:
    """The sweep store's case: settings the sweep does not read, and the record's digests, which are no setting."""
    saved, now = {"lr": 0.1, "workers": 2, "files": {"x": 1}}, {"lr": 0.2, "workers": 8}
    assert list(setting_changes(saved, now, ignore={"workers", "files"})) == ["lr"]


def test_a_setting_the_saved_run_predates_stands_for_its_old_value() -> None:
    """An older save lacks a setting added since: it compares as the value every run had then, so it resumes with
    that value and is refused with another. ``added`` never fills the current side."""
    added = {"data.validation": "stsb"}
    assert setting_changes({}, {"data.validation": "stsb"}, added=added) == {}
    assert setting_changes({}, {"data.validation": "sick"}, added=added) == {"data.validation": ("stsb", "sick")}
    assert setting_changes({"data.validation": "stsb"}, {}, added=added) == {"data.validation": ("stsb", None)}
    assert setting_changes({"data.validation": None}, {}, added=added) == {}  # recorded: the record's value counts
