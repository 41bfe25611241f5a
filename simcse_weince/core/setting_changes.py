"""Whether a run goes on with the settings it was saved with: the one comparison behind every "same settings as the
saved run?" check (a resumed training run's record, a reused protocol run's ``run_config.yaml``, a resumed sweep's
settings file).

Each caller keeps its own refusal (its own words and error type); what they share is which settings count and
how a setting missing on one side compares: as ``None``, or, for a setting added after the saved run was
written, as the value every run had before it existed (``added``), so that an older save still resumes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def setting_changes(
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    keys: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    added: Mapping[str, Any] | None = None,
) -> dict[str, tuple[Any, Any]]:
    """``{name: (saved value, current value)}`` for every setting whose value differs (``!=``).

    Args:
        saved: the settings the saved run recorded.
        current: the settings now.
        keys: the settings to compare, in this order; default: every name of either side, sorted.
        ignore: names never compared (settings that do not change the result, or entries that are not settings).
        added: for a name ``saved`` lacks, the value it stands for (a setting the saved run predates); any other
            missing name on either side is ``None``.

    Returns:
        The differing settings, in the order of ``keys`` (sorted by default); empty when the settings are the
        same.

    Example:
        >>> setting_changes({"lr": 0.1, "seed": 1}, {"lr": 0.2, "seed": 1, "workers": 4}, ignore={"workers"})
        {'lr': (0.1, 0.2)}
    """
    skip = set(ignore)
    names = sorted(set(saved) | set(current)) if keys is None else list(keys)
    defaults = added or {}
    out = {}
    for name in names:
        if name in skip:
            continue
        before = saved[name] if name in saved else defaults.get(name)
        now = current.get(name)
        if before != now:
            out[name] = (before, now)
    return out
