r"""Likelihood-based link selection (``docs/algorithm.md`` §4), fitted and reported in its identified parametrisation.

The family is the WEINCE paper's (Erol et al., "When Softmax Fails at the Top: Extreme-Value Corrections for
InfoNCE", ICML 2026, arXiv 2606.00262; ``docs/algorithm.md``, References).

For anchor i with candidate scores ``s_ij`` and observed winner (its positive) ``w_i``, the nested family of the
paper is

.. math::
    P(j) = \operatorname{softmax}_j\bigl((1-\lambda)\,s_{ij}/\tau + \lambda\,(-\beta \log(1-s_{ij}))\bigr)
         = \operatorname{softmax}_j\bigl(a\,s_{ij} + b\,u_{ij}\bigr),
    \qquad u_{ij} = -\log(1 - \min(s_{ij}, 1-\epsilon)),\quad a = \frac{1-\lambda}{\tau},\quad b = \lambda\beta .

**Identifiability.** The probabilities depend on (λ, β, τ) only through (a, b): for any λ' ∈ (0, 1) the point
τ' = (1 − λ')/a, β' = b/λ' gives exactly the same likelihood (``coefficients`` maps one to the other). λ, β and
τ are therefore not identified one by one — a three-parameter fit returns whatever λ its starting point implies.
(a, b) are identified as soon as the two features (s, u) of the candidates are not collinear within anchors, so
this module estimates and reports (a, b):

* ``a`` is the softmax slope (an inverse temperature) the link keeps, in nats per unit of score;
* ``b`` is the weight of the endpoint term, in nats per unit of −log(1 − s): ``b = 0`` is the softmax link,
  ``a = 0`` the pure Weibit link ``P(j) ∝ (1 − s_j)^(−b)``.

Reading λ needs one parameter fixed from outside the data: with τ at a run's temperature τ_0, λ = 1 − a·τ_0 and
β = b/λ (:meth:`LinkFit.lam_at`).

**Fit.** With θ = (a, b) and x_ij = (s_ij, u_ij), the negative log-likelihood

.. math::
    \mathrm{NLL}(\theta) = \sum_i \Bigl[\log \sum_j e^{\theta\cdot x_{ij}} - \theta\cdot x_{i w_i}\Bigr]

is convex (a log-sum-exp of linear functions), with gradient Σ_i (E_p[x_i] − x_{i w_i}) and Hessian
Σ_i Cov_p[x_i]; damped Newton from θ = 0 reaches its unique minimum whatever the start. The softmax link alone is
the same fit with b ≡ 0. **Intervals** are Wald intervals from the sandwich covariance H⁻¹(Σ_i g_i g_iᵀ)H⁻¹ (g_i
the per-anchor gradient): valid when the family is misspecified, as it is on real encoders, and asymptotically
H⁻¹ when it is not. Their coverage on winners of a known law is measured by ``simcse-simulate e2``.

**Held-out gain.** Both links are fitted on the even batches; on the odd ones we report the mean per-anchor
difference of log-likelihoods (nats / anchor), with its standard error over anchors. (a, b) and their
intervals are estimated on all batches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from scipy.stats import norm

from simcse_weince.losses.logits import weince_logits

EPS = 1e-6
MAX_NEWTON_STEPS = 100
# Newton stops when half the Newton decrement, g·H⁻¹g / 2, falls below this (nats over all anchors; a failed
# line search is accepted as convergence below this times the number of anchors, round-off of the summed NLL).
NEWTON_TOL = 1e-10
# Mean NLL per anchor below which the winners are taken as separated by their scores (no finite maximum).
SEPARABLE_NLL = 1e-6


@dataclass
class ScoreBatch:
    """Scores (A, C) of anchors against candidates, the winner column per anchor, and excluded entries."""

    scores: torch.Tensor
    winner: torch.Tensor
    excluded: torch.Tensor | None = None


@dataclass
class CoefficientFit:
    """Maximum-likelihood (a, b) (or a alone) on a set of batches, with sandwich standard errors."""

    theta: tuple[float, ...]
    se: tuple[float, ...]
    mean_loglik: float
    n_anchors: int
    converged: bool


@dataclass
class LinkFit:
    a: float  # softmax slope (1 − λ)/τ
    b: float  # endpoint weight λβ
    a_ci: tuple[float, float]
    b_ci: tuple[float, float]
    a_se: float
    b_se: float
    level: float
    softmax_a: float  # the softmax link's slope 1/τ, fitted alone
    train_gain: float  # nats / anchor on the fitting half
    heldout_gain: float  # nats / anchor on the other half
    heldout_gain_se: float
    heldout_gain_ci: tuple[float, float]
    heldout_ll_family: float
    heldout_ll_softmax: float
    n_anchors: int
    n_train_anchors: int
    n_heldout_anchors: int
    converged: bool  # every Newton fit met its tolerance at a finite optimum (False: e.g. winners always on top)

    @property
    def softmax_tau(self) -> float:
        """The softmax link's temperature 1/a."""
        return 1.0 / self.softmax_a if self.softmax_a != 0 else math.inf

    def lam_at(self, tau: float) -> float:
        """λ = 1 − a·τ: the family's λ once τ is fixed from outside the data (e.g. the run's temperature)."""
        return 1.0 - self.a * tau

    def to_dict(self) -> dict:
        return asdict(self) | {"softmax_tau": self.softmax_tau}


def coefficients(lam: float, beta: float, tau: float) -> tuple[float, float]:
    """The identified coefficients (a, b) = ((1 − λ)/τ, λβ) of the blended link."""
    return (1.0 - lam) / tau, lam * beta


def _features(batch: ScoreBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(A, C, 2) float64 features (s, −log(1 − s)), (A, C) validity and (A,) winners of one batch."""
    s = batch.scores.detach().double()
    valid = torch.ones_like(s, dtype=torch.bool) if batch.excluded is None else ~batch.excluded
    winner = batch.winner.long()
    if winner.shape != (s.shape[0],) or bool(((winner < 0) | (winner >= s.shape[1])).any()):
        raise ValueError(f"winners must be one column index in [0, {s.shape[1]}) per anchor")
    if not bool(valid.gather(1, winner[:, None]).all()):
        raise ValueError("a winner is an excluded entry: it is no candidate of its anchor")
    s = torch.where(valid, s, torch.zeros_like(s))
    u = -torch.log1p(-s.clamp(max=1.0 - EPS))
    return torch.stack([s, u], dim=-1), valid, winner


Features = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def _log_probs(x: torch.Tensor, valid: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """(A, C) log-probabilities of the link softmax(θ·x) (θ of length p uses the first p features)."""
    return (x[..., : theta.numel()] @ theta).masked_fill(~valid, float("-inf")).log_softmax(dim=1)


def _anchor_logliks(feats: Features, theta: torch.Tensor) -> torch.Tensor:
    """(N,) log-likelihood of each anchor's winner at θ."""
    return torch.cat([_log_probs(x, valid, theta).gather(1, w[:, None])[:, 0] for x, valid, w in feats])


def _derivatives(feats: Features, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """NLL (summed over anchors), its gradient, its Hessian and the per-anchor gradients at θ."""
    p_dim = theta.numel()
    nll = torch.zeros((), dtype=torch.float64)
    grad = torch.zeros(p_dim, dtype=torch.float64)
    hess = torch.zeros(p_dim, p_dim, dtype=torch.float64)
    per_anchor = []
    for x, valid, winner in feats:
        x = x[..., :p_dim]  # (A, C, p)
        logp = _log_probs(x, valid, theta)  # (A, C)
        nll = nll - logp.gather(1, winner[:, None]).sum()
        prob = logp.exp()
        weighted = prob[..., None] * x  # (A, C, p)
        mean = weighted.sum(dim=1)  # (A, p) E_p[x]
        g = mean - x[torch.arange(x.shape[0]), winner]  # (A, p)
        grad += g.sum(dim=0)
        per_anchor.append(g)
        hess += weighted.reshape(-1, p_dim).T @ x.reshape(-1, p_dim) - mean.T @ mean
    return nll, grad, hess, torch.cat(per_anchor)


def fit_coefficients(batches: Sequence[ScoreBatch], endpoint_term: bool = True) -> CoefficientFit:
    """Maximum likelihood of θ = (a, b) (``endpoint_term=False``: a alone, the softmax link) by damped Newton.

    The NLL is convex, so the result does not depend on the start (θ = 0, uniform winners). Standard errors are
    the square roots of the sandwich covariance's diagonal.
    """
    return _fit([_features(b) for b in batches], endpoint_term)


def _fit(feats: Features, endpoint_term: bool) -> CoefficientFit:
    n = sum(f[2].numel() for f in feats)
    theta = torch.zeros(2 if endpoint_term else 1, dtype=torch.float64)
    converged = False
    nll, grad, hess, per_anchor = _derivatives(feats, theta)
    for _ in range(MAX_NEWTON_STEPS):
        step = torch.linalg.lstsq(hess, grad[:, None]).solution[:, 0]
        decrement = float(grad @ step)
        if decrement / 2 < NEWTON_TOL:
            converged = True
            break
        t, accepted = 1.0, None
        while t > 1e-10:  # backtracking (Armijo) line search
            trial = theta - t * step
            if -_anchor_logliks(feats, trial).sum() <= nll - 1e-4 * t * decrement:
                accepted = trial
                break
            t /= 2
        if accepted is None:  # no descent along the Newton direction: at the optimum to round-off, or stuck
            converged = decrement / 2 < NEWTON_TOL * max(1.0, n)
            break
        theta = accepted
        nll, grad, hess, per_anchor = _derivatives(feats, theta)
    # Winners that the scores separate perfectly have no finite maximum: the NLL only approaches 0 as |θ| grows,
    # and Newton "converges" on a vanishing gradient far out. Such a fit is not a reading of anything.
    converged = converged and math.isfinite(float(nll)) and float(nll) / n > SEPARABLE_NLL
    bread = torch.linalg.pinv(hess)
    cov = bread @ (per_anchor.T @ per_anchor) @ bread
    se = cov.diagonal().clamp_min(0).sqrt()
    return CoefficientFit(tuple(float(v) for v in theta), tuple(float(v) for v in se), -float(nll) / n, n, converged)


def mean_loglik(batches: Sequence[ScoreBatch], lam: float, beta: float, tau: float) -> float:
    """Mean log-likelihood per anchor of the winners under the blended link with parameters (λ, β, τ)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for b in batches:
            logits = weince_logits(b.scores.double(), lam, beta, tau, EPS)
            if b.excluded is not None:
                logits = logits.masked_fill(b.excluded, float("-inf"))
            total += float(logits.log_softmax(dim=1).gather(1, b.winner[:, None].long()).sum())
            count += b.scores.shape[0]
    return total / count


def anchor_logliks(batches: Sequence[ScoreBatch], a: float, b: float) -> torch.Tensor:
    """(N,) per-anchor log-likelihoods of the winners under the link softmax(a·s + b·u)."""
    return _anchor_logliks([_features(bt) for bt in batches], torch.tensor([a, b], dtype=torch.float64))


def select_link(batches: Sequence[ScoreBatch], level: float = 0.95) -> LinkFit:
    """(a, b) with Wald intervals on all batches; the held-out gain fitted on the even batches, scored on the
    odd ones (needs ≥ 2 batches)."""
    if len(batches) < 2:
        raise ValueError(
            f"link selection needs at least 2 batches (fit on one half, score on the other), got {len(batches)}"
        )
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    z = float(norm.ppf(0.5 + level / 2))
    feats = [_features(b) for b in batches]  # once per batch, shared by the four fits and the held-out scores
    fit_half, test_half = feats[0::2], feats[1::2]
    full = _fit(feats, endpoint_term=True)
    fam = _fit(fit_half, endpoint_term=True)
    soft = _fit(fit_half, endpoint_term=False)
    soft_all = _fit(feats, endpoint_term=False)
    train_gain = fam.mean_loglik - soft.mean_loglik
    ll_family = _anchor_logliks(test_half, torch.tensor(fam.theta, dtype=torch.float64))
    ll_softmax = _anchor_logliks(test_half, torch.tensor(soft.theta, dtype=torch.float64))
    diff = ll_family - ll_softmax
    gain, gain_se = float(diff.mean()), float(diff.std() / math.sqrt(diff.numel())) if diff.numel() > 1 else 0.0
    (a, b), (a_se, b_se) = full.theta, full.se
    return LinkFit(
        a=a,
        b=b,
        a_ci=(a - z * a_se, a + z * a_se),
        b_ci=(b - z * b_se, b + z * b_se),
        a_se=a_se,
        b_se=b_se,
        level=level,
        softmax_a=soft_all.theta[0],
        train_gain=train_gain,
        heldout_gain=gain,
        heldout_gain_se=gain_se,
        heldout_gain_ci=(gain - z * gain_se, gain + z * gain_se),
        heldout_ll_family=float(ll_family.mean()),
        heldout_ll_softmax=float(ll_softmax.mean()),
        n_anchors=full.n_anchors,
        n_train_anchors=fam.n_anchors,
        n_heldout_anchors=int(diff.numel()),
        converged=full.converged and fam.converged and soft.converged and soft_all.converged,
    )
