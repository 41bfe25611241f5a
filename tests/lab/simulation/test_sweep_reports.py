"""The reports of the Ground truth II sweeps: the rate read above a floor."""

from __future__ import annotations

import pytest

from weince_lab.simulation.sweep_reports import excess_slope


def test_excess_slope_reads_the_rate_above_a_floor() -> None:
    ks = [4, 16, 64, 256, 1024]
    gaps = [0.07 + 0.5 / k for k in ks]
    # The floor is the smaller gap at the two largest k (0.07 + 0.5/1024), so the fitted rate is close to −1.
    assert excess_slope(ks, gaps) == pytest.approx(-1.0, abs=0.03)
    assert excess_slope(ks, [0.07 + 0.5 / k**0.5 for k in ks]) == pytest.approx(-0.5, abs=0.1)
    assert excess_slope(ks, [0.1, 0.05, 0.2, 0.08, 0.07]) is None  # an excess below the floor
    assert excess_slope(ks[:3], gaps[:3]) is None
