"""Likelihood-based link selection (spec §4): does a Weibull (endpoint) link explain which candidate wins?

For anchor i with candidate scores ``s_ij`` and observed winner (its positive) ``w_i``, the nested family

    P(j) = softmax_j( (1 − λ)·s_ij/τ + λ·(−β·log(1 − s_ij)) )

with one global (λ, β, τ) contains the pure softmax link (λ = 0). Both are fitted by maximum likelihood of
the winners on half of the batches; on the other half we report the mean held-out log-likelihood per anchor
of the family minus that of the softmax link (nats / anchor), and λ̂.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from simcse_weince.losses.logits import weince_logits

EPS = 1e-6


@dataclass
class LinkFit:
    lam: float
    beta: float
    tau: float
    softmax_tau: float
    train_gain: float  # nats / anchor on the fitting half
    heldout_gain: float  # nats / anchor on the other half
    heldout_ll_family: float
    heldout_ll_softmax: float
    n_train_anchors: int
    n_heldout_anchors: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ScoreBatch:
    """Scores (A, C) of anchors against candidates, the winner column per anchor, and excluded entries."""

    scores: torch.Tensor
    winner: torch.Tensor
    excluded: torch.Tensor | None = None


def _loglik(batches: Sequence[ScoreBatch], lam, beta, tau) -> tuple[torch.Tensor, int]:
    total, count = 0.0, 0
    for b in batches:
        s = b.scores.double()
        logits = weince_logits(s, lam, beta, tau, EPS)
        if b.excluded is not None:
            logits = logits.masked_fill(b.excluded, float("-inf"))
        logp = logits.log_softmax(dim=1)
        total = total + logp.gather(1, b.winner[:, None]).sum()
        count += s.shape[0]
    return total, count


def _fit(batches: Sequence[ScoreBatch], family: bool, steps: int = 200) -> dict[str, float]:
    # Unconstrained parameters: λ = σ(a), β = exp(b), τ = exp(c).
    a = torch.tensor(0.0 if family else -30.0, dtype=torch.float64, requires_grad=family)
    b = torch.tensor(0.0, dtype=torch.float64, requires_grad=family)
    c = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    params = [p for p in (a, b, c) if p.requires_grad]
    opt = torch.optim.LBFGS(params, lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")
    lam_fn = (lambda: torch.sigmoid(a)) if family else (lambda: torch.zeros((), dtype=torch.float64))

    def closure():
        opt.zero_grad()
        ll, n = _loglik(batches, lam_fn(), b.exp(), c.exp())
        loss = -ll / n
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return {"lam": float(lam_fn()), "beta": float(b.exp()), "tau": float(c.exp())}


def mean_loglik(batches: Sequence[ScoreBatch], lam: float, beta: float, tau: float) -> float:
    with torch.no_grad():
        ll, n = _loglik(batches, torch.tensor(lam), torch.tensor(beta), torch.tensor(tau))
    return float(ll) / n


def select_link(batches: Sequence[ScoreBatch]) -> LinkFit:
    """Fit on the even batches, score on the odd ones (needs ≥ 2 batches)."""
    if len(batches) < 2:
        raise ValueError(
            f"link selection needs at least 2 batches (fit on one half, score on the other), got {len(batches)}"
        )
    fit_half, test_half = list(batches[0::2]), list(batches[1::2])
    fam = _fit(fit_half, family=True)
    soft = _fit(fit_half, family=False)
    tr_f = mean_loglik(fit_half, fam["lam"], fam["beta"], fam["tau"])
    tr_s = mean_loglik(fit_half, 0.0, 1.0, soft["tau"])
    te_f = mean_loglik(test_half, fam["lam"], fam["beta"], fam["tau"])
    te_s = mean_loglik(test_half, 0.0, 1.0, soft["tau"])
    return LinkFit(
        fam["lam"],
        fam["beta"],
        fam["tau"],
        soft["tau"],
        tr_f - tr_s,
        te_f - te_s,
        te_f,
        te_s,
        sum(x.scores.shape[0] for x in fit_half),
        sum(x.scores.shape[0] for x in test_half),
    )
