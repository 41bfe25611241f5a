"""E3 in one small cell: what WEINCE's online λ responds to, asserted with margins."""

from __future__ import annotations

import pytest
import torch

from simcse_weince.losses import WeinceLoss
from weince_lab.simulation.batches import ScoreSetting, simulate_batch
from weince_lab.simulation.online_lambda import cell_statistics, knob_lambda, knob_sweep, summarise_cell
from weince_lab.simulation.shortfall import ShortfallLaw
from weince_lab.simulation.winners import BlendedLaw

WEIBULL = ShortfallLaw("power", alpha=2.5)
GUMBEL = ShortfallLaw("gumbel", theta=1.0)


@pytest.fixture(scope="module")
def cells() -> dict[str, dict]:
    loss = WeinceLoss(temperature=0.05)
    out = {}
    for tail_name, tail in (("weibull", WEIBULL), ("gumbel", GUMBEL)):
        for law_name, law in (("softmax", BlendedLaw.softmax(0.1)), ("weibit", BlendedLaw.weibit(3.0))):
            setting = ScoreSetting(tail, 1.0, 0.5, anchors=128, candidates=128)
            stats = cell_statistics(setting, law, loss, num_batches=3, seed=0)
            out[f"{tail_name}/{law_name}"] = {"summary": summarise_cell(stats), "stats": stats}
    return out


def test_share_above_half_is_set_by_q(cells: dict) -> None:
    """λ > 1/2 for the q-share of anchors whatever the tail and the winners: ρ_i < ρ_0 decides it, and ΔAIC ≫ m
    holds for the Gumbel-domain tail as much as for the Weibull one."""
    for cell in cells.values():
        assert cell["summary"]["share_gt_half"] == pytest.approx(0.2, abs=0.01)
        for q in (0.1, 0.5):
            lam = knob_lambda(cell["stats"], q, 10.0, 1.0, 2.0)
            assert float((lam > 0.5).double().mean()) == pytest.approx(q, abs=0.015)
    assert cells["gumbel/softmax"]["summary"]["delta_aic_mean"] > 40  # "Weibull" by the AIC, though ξ = 0


def test_lambda_barely_sees_the_winner_law(cells: dict) -> None:
    for tail in ("weibull", "gumbel"):
        soft, weib = cells[f"{tail}/softmax"]["summary"], cells[f"{tail}/weibit"]["summary"]
        assert abs(soft["lambda_mean"] - weib["lambda_mean"]) < 0.03


def test_hill_beta_reads_the_weibull_index(cells: dict) -> None:
    """On the power-law tail β̂ (Hill) estimates α = 2.5 (within its finite-tail bias), so β ≠ the winner law's β*."""
    assert cells["weibull/softmax"]["summary"]["beta_hill_mean"] == pytest.approx(2.5, rel=0.15)


def test_knob_lambda_is_the_loss_lambda() -> None:
    """Recomputing λ from the stored ρ and ΔAIC with the loss's own knobs gives the loss's λ."""
    loss = WeinceLoss(temperature=0.05, q=0.3, kappa_rho=5.0, kappa_aic=2.0, margin=6.0)
    setting = ScoreSetting(WEIBULL, 1.0, 0.5, anchors=64, candidates=64)
    stats = cell_statistics(setting, BlendedLaw.softmax(0.1), loss, num_batches=2, seed=1)
    torch.testing.assert_close(knob_lambda(stats, 0.3, 5.0, 2.0, 6.0), stats.lam, rtol=1e-5, atol=1e-6)
    grid = knob_sweep(stats, qs=(0.3,), margins=(6.0,), kappa_rhos=(5.0,), kappa_aics=(2.0,))
    assert grid[0]["lambda_mean"] == pytest.approx(float(stats.lam.mean()), rel=1e-5)
    assert len(knob_sweep(stats)) == 4 * 27
    assert simulate_batch(setting, BlendedLaw.softmax(0.1), torch.Generator()).scores.shape == (64, 64)
