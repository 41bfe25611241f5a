"""Diagnostics against synthetic data with known truth, degenerate input, and the command on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import genpareto

from simcse_weince.diagnostics.geometry import alignment, uniformity
from simcse_weince.diagnostics.link import ScoreBatch, select_link
from simcse_weince.diagnostics.plots import error_bars, plot_stability
from simcse_weince.diagnostics.pot import (
    GPDFit,
    fit_exceedances,
    fit_exceedances_many,
    fit_pot,
    percentile_interval,
    threshold_stability,
)
from tests.helpers import argv


def test_gpd_recovers_negative_shape() -> None:
    rng = np.random.default_rng(0)
    exc = genpareto.rvs(-0.4, scale=0.05, size=3000, random_state=rng)
    scores = np.concatenate([rng.uniform(-1, 0.5, size=297_000), 0.5 + exc])  # the top 1 % is the GPD tail
    fit = fit_pot(scores, q=0.99, bootstrap=200, seed=1)
    assert fit.xi_ci[0] <= -0.4 <= fit.xi_ci[1]
    assert fit.xi == pytest.approx(-0.4, abs=0.08)
    assert fit.endpoint == pytest.approx(0.5 + 0.05 / 0.4, abs=0.02)  # u − σ/ξ
    assert fit.n_exceedances == pytest.approx(3000, abs=5)


def test_beta_scores_give_the_theoretical_shape() -> None:
    # Beta(2, 3) on [0, 1]: P(X > 1 − x) ~ c·x^3 near the endpoint, so ξ = −1/3.
    rng = np.random.default_rng(2)
    s = rng.beta(2.0, 3.0, size=400_000)
    fit = fit_pot(s, q=0.995, bootstrap=100, seed=0)
    assert fit.xi < 0
    assert fit.xi == pytest.approx(-1 / 3, abs=0.1)
    assert fit.endpoint == pytest.approx(1.0, abs=0.05)
    stab = threshold_stability(s, qs=(0.99, 0.995), bootstrap=20)
    assert [f.q for f in stab] == [0.99, 0.995] and all(f.xi < 0 for f in stab)


def test_vectorised_gpd_fit_is_scipys_maximum_likelihood() -> None:
    """Each row's fit reaches at least scipy's likelihood and the same ξ̂ (to its optimiser's tolerance), across
    the Weibull, Gumbel and Fréchet domains."""
    rng = np.random.default_rng(4)
    for xi in (-0.6, -0.3, 0.0, 0.4):
        rows = genpareto.rvs(xi, scale=0.1, size=(3, 400), random_state=rng)
        xi_hat, sigma_hat, ll = fit_exceedances_many(rows)
        for r in range(3):
            ref_xi, _, ref_sigma = genpareto.fit(rows[r], floc=0.0)
            ref_ll = genpareto.logpdf(rows[r], ref_xi, 0.0, ref_sigma).sum()
            assert ll[r] >= ref_ll - 1e-8
            assert xi_hat[r] == pytest.approx(ref_xi, abs=1e-3) and sigma_hat[r] == pytest.approx(ref_sigma, rel=1e-3)
            assert ll[r] == pytest.approx(genpareto.logpdf(rows[r], xi_hat[r], 0.0, sigma_hat[r]).sum(), abs=1e-8)


def test_gpd_fit_at_the_xi_minus_one_boundary_stays_finite() -> None:
    """Where the profile maximum sits on ξ = −1 (ties at the top, or a ξ ≤ −1 sample) the fit returns a finite
    likelihood at ξ̂ ≥ −1, never −inf; an empty batch of rows gives empty results."""
    rng = np.random.default_rng(7)
    rows = np.vstack([np.r_[np.ones(9), 2.0], genpareto.rvs(-1.2, scale=1.0, size=10, random_state=rng)])
    xi, sigma, ll = fit_exceedances_many(rows)
    assert np.all(np.isfinite(ll)) and np.all(xi >= -1 - 1e-9) and np.all(sigma > 0)
    direct = [genpareto.logpdf(r, x, 0, s).sum() for r, x, s in zip(rows, xi, sigma, strict=True)]
    np.testing.assert_allclose(ll, direct, atol=1e-6)
    assert [a.size for a in fit_exceedances_many(np.empty((0, 5)))] == [0, 0, 0]


def test_percentile_interval_contains_its_estimate_on_the_edge() -> None:
    """ξ̂ = −1 with every bootstrap fit at −1 + 1e-15 (the rounding the AVX2-only machine produced): the interval
    is widened to contain ξ̂; a zero-width interval stays zero-width; an inner estimate leaves the quantiles as they
    are; no bootstrap values give (ξ̂, ξ̂)."""
    assert percentile_interval(np.full(50, -1 + 1e-15), -1.0) == (-1.0, -1 + 1e-15)
    assert percentile_interval(np.full(20, 0.3), 0.3) == (0.3, 0.3)
    boots = np.linspace(-0.5, 0.5, 101)
    assert percentile_interval(boots, 0.0) == pytest.approx((-0.475, 0.475))
    assert percentile_interval(boots, 0.9) == pytest.approx((-0.475, 0.9))
    assert percentile_interval([], -0.2) == (-0.2, -0.2)
    with pytest.raises(ValueError, match="level"):
        percentile_interval(boots, 0.0, level=1.0)


def test_fit_on_the_boundary_reports_an_interval_around_its_estimate() -> None:
    """An isolated maximum puts ξ̂ on −1 for the fit and for most bootstrap samples; with these inputs the 2.5 %
    bootstrap quantile lands above ξ̂ by rounding (−0.9999999999999992 vs −0.9999999999999993 before the fix): the
    reported interval holds ξ̂, and the plot of it draws."""
    scores = np.r_[np.zeros(1980), np.linspace(0.01, 0.9, 16), 1.0]
    fit = fit_pot(scores, q=0.99, bootstrap=50, seed=4)
    assert fit.xi == pytest.approx(-1.0, abs=1e-9)
    assert fit.xi_ci[0] <= fit.xi <= fit.xi_ci[1]


def test_stability_plot_accepts_an_estimate_on_the_edge_of_its_interval(tmp_path: Path) -> None:
    """The crash of ``simcse-diagnose`` on the AVX2-only machine: an interval end above ξ̂ = −1 by 1e-15 gave
    matplotlib a negative error bar. Bars are clipped at 0, for that case and for a zero-width interval."""
    fits = [
        GPDFit(0.98, 0.5, 1000, 20, -1.0, 0.1, (-1.0 + 1e-15, -0.7), 1.5, 3.0),
        GPDFit(0.99, 0.6, 1000, 10, -0.4, 0.1, (-0.4, -0.4), 0.8, 2.0),
    ]
    np.testing.assert_allclose(error_bars([-1.0, -0.4], [f.xi_ci for f in fits]), [[0.0, 0.0], [0.3, 0.0]], atol=1e-15)
    out = plot_stability(fits, tmp_path / "stability.png")
    assert out.stat().st_size > 0


def test_degenerate_input_gives_clear_errors() -> None:
    with pytest.raises(ValueError, match="no spread"):
        fit_pot(np.full(1000, 0.3))
    with pytest.raises(ValueError, match=r"only \d+ of 200 scores exceed"):
        fit_pot(np.random.default_rng(0).normal(size=200), q=0.99)
    with pytest.raises(ValueError, match="at least 10 exceedances"):
        fit_exceedances(np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="all 20 exceedances are equal"):
        fit_exceedances(np.full(20, 0.1))
    with pytest.raises(ValueError, match="q must be"):
        fit_pot(np.arange(100.0), q=1.0)


def _simulated_batches(kind: str, n: int = 8, a: int = 200, c: int = 200, seed: int = 0) -> list[ScoreBatch]:
    g = torch.Generator().manual_seed(seed)
    beta_dist = torch.distributions.Beta(torch.tensor(4.0), torch.tensor(2.0))
    torch.manual_seed(seed)
    out = []
    for _ in range(n):
        s = (beta_dist.sample((a, c)) * 1.98 - 0.99).double()
        logits = s / 0.1 if kind == "softmax" else -3.0 * torch.log1p(-s)  # P(j) ∝ (1 − s_j)^(−β), β = 3
        winner = torch.multinomial(logits.softmax(1), 1, generator=g).squeeze(1)
        out.append(ScoreBatch(s, winner))
    return out


def test_link_selection_on_softmax_winners() -> None:
    fit = select_link(_simulated_batches("softmax"))
    assert fit.b_ci[0] <= 0 <= fit.b_ci[1] and abs(fit.b) < 0.1  # (a, b) = (10, 0)
    assert fit.a == pytest.approx(10.0, rel=0.1)
    assert abs(fit.heldout_gain) < 0.01
    assert fit.softmax_tau == pytest.approx(0.1, rel=0.1)


def test_link_selection_on_weibull_winners() -> None:
    fit = select_link(_simulated_batches("weibull"))
    assert fit.a_ci[0] <= 0 <= fit.a_ci[1]  # (a, b) = (0, 3)
    assert fit.b == pytest.approx(3.0, rel=0.1)
    assert fit.heldout_gain > 0.1
    with pytest.raises(ValueError, match="at least 2 batches"):
        select_link(_simulated_batches("weibull", n=1))


def test_alignment_and_uniformity_closed_forms() -> None:
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert alignment(x, x) == pytest.approx(0.0)
    assert alignment(x, -x) == pytest.approx(4.0)  # ‖u − (−u)‖² = 4 on the unit sphere
    # Two orthogonal unit vectors: one pair at squared distance 2 -> log exp(−2·2) = −4.
    assert uniformity(x) == pytest.approx(-4.0)
    with pytest.raises(ValueError, match="at least 2"):
        uniformity(x[:1])


@pytest.mark.slow
def test_command_on_tiny_text_model(
    tiny_bert_weights_dir: Path, shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, caplog
) -> None:
    from simcse_weince.cli.diagnose import run

    out = tmp_path / "diag"
    senteval = str(shared_data / "senteval" / "downstream")
    report = run(
        argv(
            model=tiny_bert_weights_dir, pooler="avg", out=out, batch_size=64, num_batches=4, bootstrap=20,
            data_dir=senteval,
        )
    )  # fmt: skip
    saved = json.loads((out / "report.json").read_text())
    assert saved["kind"] == "text" and saved["batches"] == 4 and saved["negative_scores"] == 4 * 64 * 63
    assert {"xi", "sigma", "xi_ci", "endpoint"} <= set(saved["pot"])
    assert len(saved["threshold_stability"]) == 5
    assert {"a", "a_ci", "b", "b_ci", "heldout_gain", "heldout_gain_ci"} <= set(saved["link"])
    assert not {"lam", "beta", "tau"} & set(saved["link"])  # no unidentified parameter is reported
    assert 0 <= saved["anchor_statistics_first_batch"]["lam"]["mean"] <= 1
    assert saved["geometry"]["alignment_pairs"] > 100 and saved["geometry"]["uniformity"] < 0
    for name in ("tail_gpd.png", "threshold_stability.png", "lambda_hist.png", "link_loglik.png"):
        assert (out / name).stat().st_size > 5000, name
    assert report["pot"]["xi"] == saved["pot"]["xi"]
    # no run_config.yaml beside the tiny model: said in the report, the log and the printed summary
    assert saved["weince_loss_settings_from"] == "defaults"
    assert any(r.levelname == "WARNING" and "no run_config.yaml" in r.getMessage() for r in caplog.records)
    assert "  warning: no run_config.yaml beside the model" in capsys.readouterr().out


@pytest.mark.slow
def test_command_with_stsb_pair_positives(tiny_bert_weights_dir: Path, shared_data: Path, tmp_path: Path) -> None:
    from simcse_weince.cli.diagnose import run

    senteval = str(shared_data / "senteval" / "downstream")
    report = run(
        argv(
            model=tiny_bert_weights_dir, pooler="avg", out=tmp_path / "d", batch_size=64, num_batches=3,
            bootstrap=10, q=0.98, text_positives="stsb", data_dir=senteval,
        )
    )  # fmt: skip
    assert report["positives"] == "stsb" and report["batches"] == 3
    assert report["positive_rank"]["top1"] < 0.99  # a random encoder does not rank paraphrases first
    assert report["link"]["identifiable"] is True


def _summary_of(settings_from: str) -> str:
    from simcse_weince.cli.diagnose import summary_text

    report = {
        "model": "m", "kind": "text", "batches": 2, "batch_size": 4, "negative_scores": 24,
        "pot": {"q": 0.99, "xi": -0.3, "xi_ci": [-0.4, -0.2], "sigma": 0.05, "endpoint": 0.9},
        "link": {"a": 9.0, "a_ci": [8.0, 10.0], "b": 0.1, "b_ci": [-0.1, 0.3], "level": 0.95, "heldout_gain": 0.0,
                 "heldout_gain_ci": [-0.01, 0.01], "identifiable": True},
        "lambda_all_batches": {"mean": 0.2, "frac_gt_half": 0.1},
        "positive_rank": {"top1": 0.5}, "geometry": {"alignment": 0.5, "uniformity": -2.0},
        "plots": {"tail": "out/tail_gpd.png"}, "seconds": 1.0, "weince_loss_settings_from": settings_from,
    }  # fmt: skip
    return summary_text(report)


def test_summary_says_when_the_weince_settings_are_the_defaults() -> None:
    lines = _summary_of("defaults").splitlines()
    warnings = [line for line in lines if "warning:" in line]
    assert len(warnings) == 1 and "no run_config.yaml beside the model" in warnings[0]
    assert "default loss settings;" in warnings[0]
    flagged = _summary_of("defaults + flags ['beta_mode']")
    assert "default loss settings and the flags ['beta_mode'];" in flagged
    saved = _summary_of("runs/x/run_config.yaml").splitlines()
    assert "  WEINCE settings: runs/x/run_config.yaml" in saved and not any("warning" in line for line in saved)
