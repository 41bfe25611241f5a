r"""How far a learned similarity search is from the ideal one, each metric against the universe's truth.

A learned model is an embedding table Ê (N × d′) of unit rows with cosines ŝ_xy and the loss it was trained with.
Its **search posterior** over a candidate set is the loss's own law of the positive: softmax(ŝ/τ) for InfoNCE and
softmax of the blended logit (1 − λ_i) ŝ/τ + λ_i(−β_i log(1 − ŝ)) for WEINCE, with λ_i and β_i the loss's own
stop-gradient statistics computed from the set's candidates (all of them: the search does not know the positive).

* :func:`search_gap` — the gap to the ideal search: the mean KL(P_Bayes ‖ P_model) over fresh candidate sets of a
  given size, with its standard error; 0 exactly when the two posteriors agree on every set.
* :func:`universe_gap` — the same over the whole universe, exactly: (1/N) Σ_x KL(M(x, ·) ‖ Q̂(x, ·)).
* :func:`top1_agreement` — how often the learned nearest neighbour is the Bayes top-1 (the latent nearest
  neighbour), over the whole universe; :func:`recall_at` — how often the Bayes top-1 is among the learned k nearest.
* :func:`link_universe_gap` — the universe KL of a table under a given link (a, b), the **best-link KL** when (a, b)
  is the link :func:`learned_link` refits on the table: it separates the geometry a loss learned from the link it
  evaluates with.
* :func:`learned_link` — Ground truth I's identified link coefficients (a, b) read off the learned cosines with
  the true positives as winners, as ``simcse-diagnose`` reads a real encoder.
* :func:`geometry` — the Pearson correlation of learned with latent cosines over all pairs, and the orthogonal
  Procrustes error min_R ‖Ê R − X‖²_F / N (0 for a rotation of the truth, at most 2 for unit rows).

**Whiteley's Proposition 1** (:func:`proposition_one`; N. Whiteley, "Similarity search generalisation in contrastive
learning with InfoNCE loss", arXiv 2607.09405). For a fixed embedding and temperature, the k-negative risk with the
positive in the denominator, normalised by k, and the whole-universe cross-entropy,

.. math::
    R_k = \mathbb{E}\Bigl[-\log \frac{e^{\hat s^+/\tau}}{\frac1k\bigl(e^{\hat s^+/\tau} + \sum_{m=1}^k
          e^{\hat s_m/\tau}\bigr)}\Bigr], \qquad
    \mathrm{CE} = \mathbb{E}_x \mathbb{E}_{y \sim M(x,\cdot)}\Bigl[-\log \frac{e^{\hat s_{xy}/\tau}}{\bar Z_x}\Bigr],
    \quad \bar Z_x = \mathbb{E}_{y' \sim q_x} e^{\hat s_{xy'}/\tau},

x uniform over the N items, its positive y⁺ ~ M(x, ·) and k negatives y_m drawn i.i.d. from q_x, in two variants
(``include_anchor``):

* **anchor excluded** (``include_anchor=False``, the sweeps' original variant): q_x uniform over the N − 1 items
  other than x, the law of the negatives of the universe's Bayes search;
* **literal** (``include_anchor=True``, Whiteley's): q_x = π, uniform over all N items, the anchor itself included —
  a negative may be x itself, whose weight e^{ŝ_xx/τ} = e^{1/τ} (unit rows) is the largest there is — and Z̄_x the
  mean over all N items. CE then rises by E_x log(Z̄^π_x / Z̄_x) = E_x log((N − 1)/N + e^{ŝ_xx/τ}/(N Z̄_x)).

The gap CE − R_k = E[log Z̄_x − log((e^{ŝ⁺/τ} + Σ_m e^{ŝ_m/τ})/k)] has two parts: Jensen's (log of a mean of k
draws, ≥ 0) and the positive's (≤ 0). Every weight lies in [e^{−1/τ}, e^{1/τ}], so in both variants

.. math::
    -\log(1 + e^{2/\tau}/k) \;\le\; \mathrm{CE} - R_k \;\le\; (e^{2/\tau} - 1)^2 / (8k)

(:func:`proposition_bounds`). Neither bound is e^{2/τ}/k at the k one can run: the lower one is ≈ −e^{2/τ}/k only
for k ≫ e^{2/τ}, else ≈ −(2/τ − log k); the upper one's constant is (e^{2/τ} − 1)²/8 ≈ e^{4/τ}/8, and it is
vacuous (above the trivial 2/τ, :func:`trivial_bounds`) for k < τ(e^{2/τ} − 1)²/16.

It is estimated by Monte Carlo on the per-sample difference, whose ŝ⁺/τ terms cancel, so its noise shrinks with k;
its exact first-order constant C = lim k·(CE − R_k) is :func:`first_order_constant` (its two parts
:func:`first_order_parts`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy.linalg import orthogonal_procrustes
from scipy.stats import t as student_t

from simcse_weince.diagnostics.link import EPS as LINK_EPS
from simcse_weince.diagnostics.link import LinkFit, ScoreBatch, select_link
from simcse_weince.losses import loss_class
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import ScoreMatrix
from weince_lab.simulation.universe import Universe, cosine_scores


def model_log_posterior(
    loss: ContrastiveLoss, scores: torch.Tensor, excluded: torch.Tensor | None = None
) -> torch.Tensor:
    """(A, m) log of the loss's own law of the positive over candidates with cosines ``scores`` (A, m).

    ``excluded`` (A, m) marks entries that are no candidate (the anchor itself in a whole-universe search). WEINCE's
    λ_i, β_i come from :meth:`WeinceLoss.statistics` over all candidates: a first column marked as the (excluded)
    positive keeps every real candidate in the tail.
    """
    scores = scores.float()
    excluded = torch.zeros_like(scores, dtype=torch.bool) if excluded is None else excluded
    if isinstance(loss, loss_class("weince")):
        logits = loss.logits(scores, loss.statistics(_search_layout(scores, excluded)))
    else:  # InfoNCE's s/τ, the link losses' current link
        logits = loss.search_logits(scores)
    return logits.double().masked_fill(excluded, float("-inf")).log_softmax(dim=1)


def _search_layout(scores: torch.Tensor, excluded: torch.Tensor) -> ScoreMatrix:
    """The (A, 1 + m) layout whose statistics are those of a search over ``scores`` (A, m): a first column marked
    as the (excluded) positive keeps every real candidate in the tail."""
    a, m = scores.shape
    padded = torch.cat([torch.zeros(a, 1), scores.float()], dim=1)
    mask = torch.cat([torch.ones(a, 1, dtype=torch.bool), excluded], dim=1)
    return ScoreMatrix(
        scores=padded,
        positive_index=torch.zeros(a, dtype=torch.long),
        self_mask=mask,
        user_mask=torch.zeros_like(mask),
        num_negatives=m - int(excluded[0].sum()),
    )


def shortfall_statistics(
    universe: Universe, table: torch.Tensor, loss: ContrastiveLoss, k: int, batch: int, batches: int,
    generator: torch.Generator,
) -> dict[str, float]:  # fmt: skip
    """WEINCE's statistics on a table's cosines, where the sweeps read them: over the N − 1 other items of each
    anchor, as :func:`universe_gap` scores (``universe_beta``, ``universe_rho0``, ``universe_lambda``: means over
    the anchors), and over ``batches`` training batches of ``batch`` anchors with a positive and ``k`` uniform
    negatives each, as training reads them (``batch_beta``, ``batch_rho0``, ``batch_lambda``: means over batches
    of the batch means). β is the loss's own (its β mode, clamped)."""
    table = table.double()
    eye = torch.eye(universe.size, dtype=torch.bool)
    whole = loss.statistics(_search_layout(table @ table.T, eye))
    found: dict[str, list[float]] = {"beta": [], "rho0": [], "lambda": []}
    for _ in range(batches):
        anchors, positives = universe.sample_pairs(batch, generator)
        candidates = torch.cat([positives[:, None], universe.sample_negatives(anchors, k, generator)], dim=1)
        scores = torch.einsum("ad,acd->ac", table[anchors], table[candidates]).float()  # (A, 1 + k), positive first
        none = torch.zeros_like(scores, dtype=torch.bool)
        stats = loss.statistics(ScoreMatrix(scores, torch.zeros(batch, dtype=torch.long), none, none, num_negatives=k))
        found["beta"].append(float(stats.beta.mean()))
        found["rho0"].append(float(stats.rho0))
        found["lambda"].append(float(stats.lam.mean()))
    return {
        "universe_beta": float(whole.beta.mean()),
        "universe_rho0": float(whole.rho0),
        "universe_lambda": float(whole.lam.mean()),
        **{f"batch_{name}": float(np.mean(values)) for name, values in found.items()},
    }


def kl_rows(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """(A,) KL(p_i ‖ q_i) of rows of log-probabilities; entries with p = 0 add nothing."""
    p = log_p.exp()
    terms = torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p))
    return terms.sum(dim=1)


@dataclass(frozen=True)
class Gap:
    """A mean over search problems with its standard error."""

    mean: float
    se: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def search_gap(
    universe: Universe,
    table: torch.Tensor,
    loss: ContrastiveLoss,
    size: int,
    count: int,
    generator: torch.Generator,
    chunk: int = 256,
) -> Gap:
    """Mean KL(P_Bayes ‖ P_model) over ``count`` fresh candidate sets of ``size`` candidates.

    The sets are scored ``chunk`` anchors at a time: WEINCE's ρ_0 is a quantile over a batch, as in training.
    """
    values = []
    for start in range(0, count, chunk):
        n = min(chunk, count - start)
        anchors, candidates, _ = universe.candidate_sets(n, size, generator)
        log_p = universe.bayes_log_posterior(anchors, candidates)
        log_q = model_log_posterior(loss, cosine_scores(table, anchors, candidates))
        values.append(kl_rows(log_p, log_q))
    kl = torch.cat(values)
    return Gap(float(kl.mean()), float(kl.std() / math.sqrt(kl.numel())) if kl.numel() > 1 else 0.0)


def universe_gap(universe: Universe, table: torch.Tensor, loss: ContrastiveLoss) -> float:
    """(1/N) Σ_x KL(M(x, ·) ‖ Q̂(x, ·)) over the whole universe, exactly (the anchor itself excluded)."""
    eye = torch.eye(universe.size, dtype=torch.bool)
    log_q = model_log_posterior(loss, table @ table.T, eye)
    return float(kl_rows(universe.bayes_universe_log_posterior(), log_q).mean())


def top1_agreement(universe: Universe, table: torch.Tensor) -> float:
    """Share of items whose learned nearest neighbour (cosine, itself excluded) is the Bayes top-1."""
    eye = torch.eye(universe.size, dtype=torch.bool)
    truth = universe.cosines().masked_fill(eye, -math.inf).argmax(dim=1)
    learned = (table.double() @ table.double().T).masked_fill(eye, -math.inf).argmax(dim=1)
    return float((truth == learned).double().mean())


def recall_at(universe: Universe, table: torch.Tensor, k: int = 10) -> float:
    """Recall@k of the Bayes top-1: the share of items x whose Bayes top-1 (the item y ≠ x of largest latent cosine)
    is among the ``k`` items y ≠ x of largest learned cosine ê_x·ê_y. It is ≥ :func:`top1_agreement` (k = 1 is that
    share) and 1 when k ≥ N − 1.

    Raises:
        ValueError: ``k`` < 1.
    """
    if k < 1:
        raise ValueError(f"recall@k needs k >= 1, got {k}")
    eye = torch.eye(universe.size, dtype=torch.bool)
    truth = universe.cosines().masked_fill(eye, -math.inf).argmax(dim=1)  # (N,)
    learned = (table.double() @ table.double().T).masked_fill(eye, -math.inf)
    top = learned.topk(min(k, universe.size - 1), dim=1).indices  # (N, k)
    return float((top == truth[:, None]).any(dim=1).double().mean())


def link_log_posterior(scores: torch.Tensor, a: float, b: float, excluded: torch.Tensor | None = None) -> torch.Tensor:
    """(A, m) log softmax_j of the identified link's logit a·ŝ_j + b·(−log(1 − min(ŝ_j, 1 − ε))) (ε the link fit's
    own cap), entries marked ``excluded`` at −inf."""
    s = scores.double()
    logits = a * s - b * torch.log1p(-s.clamp(max=1.0 - LINK_EPS))
    if excluded is not None:
        logits = logits.masked_fill(excluded, float("-inf"))
    return logits.log_softmax(dim=1)


def link_universe_gap(universe: Universe, table: torch.Tensor, a: float, b: float) -> float:
    """(1/N) Σ_x KL(M(x, ·) ‖ Q_ab(x, ·)) over the whole universe, exactly (the anchor itself excluded), with the
    model's search Q_ab(x, y) ∝ exp(a·ŝ_xy + b·(−log(1 − ŝ_xy))): :func:`universe_gap` with the link (a, b) in place
    of the loss's own. With (a, b) refitted on the table (:func:`learned_link`) it is the best-link KL."""
    eye = torch.eye(universe.size, dtype=torch.bool)
    table = table.double()
    log_q = link_log_posterior(table @ table.T, a, b, eye)
    return float(kl_rows(universe.bayes_universe_log_posterior(), log_q).mean())


def geometry(universe: Universe, table: torch.Tensor) -> dict[str, float]:
    """``cosine_corr``: Pearson r of learned and latent cosines over the pairs x < y; ``procrustes``:
    min over orthogonal R of ‖Ê R − X‖²_F / N (tables padded with zero columns to one width)."""
    n = universe.size
    iu = torch.triu_indices(n, n, 1)
    learned = (table.double() @ table.double().T)[iu[0], iu[1]].numpy()
    latent = universe.cosines()[iu[0], iu[1]].numpy()
    corr = float(np.corrcoef(learned, latent)[0, 1])
    width = max(table.shape[1], universe.vectors.shape[1])
    a = np.zeros((n, width))
    b = np.zeros((n, width))
    a[:, : table.shape[1]] = table.double().numpy()
    b[:, : universe.vectors.shape[1]] = universe.vectors.numpy()
    rotation, _ = orthogonal_procrustes(a, b)
    return {"cosine_corr": corr, "procrustes": float(((a @ rotation - b) ** 2).sum() / n)}


def _softmax_search(
    universe: Universe, table: torch.Tensor, tau: float, include_anchor: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, N) logits ŝ/τ of the table over the universe and (N,) log Z̄_x = log E_{y ~ q_x} e^{ŝ_xy/τ}: q_x uniform
    over the items other than x, or over all N items (Whiteley's π, the anchor included) when ``include_anchor``."""
    logits = (table.double() @ table.double().T) / tau
    if include_anchor:
        return logits, torch.logsumexp(logits, dim=1) - math.log(universe.size)
    eye = torch.eye(universe.size, dtype=torch.bool)
    log_zbar = torch.logsumexp(logits.masked_fill(eye, -math.inf), dim=1) - math.log(universe.size - 1)
    return logits, log_zbar


def whole_universe_cross_entropy(
    universe: Universe, table: torch.Tensor, tau: float, include_anchor: bool = False
) -> float:
    """CE(M, Q̂) with Q̂(y | x) = e^{ŝ_xy/τ} / E_{y′ ~ q_x} e^{ŝ_xy′/τ}, exactly (q_x as in :func:`_softmax_search`)."""
    logits, log_zbar = _softmax_search(universe, table, tau, include_anchor)
    return float((universe.transition() * (log_zbar[:, None] - logits)).sum(dim=1).mean())


def first_order_parts(
    universe: Universe, table: torch.Tensor, tau: float, include_anchor: bool = False
) -> tuple[float, float]:
    r"""(Jensen's part J, the positive's part P) of the first-order constant C = J − P of CE − R_k.

    With w = e^{ŝ/τ}, S = (1/k) Σ_m w_m (E S = Z̄_x, Var S = Var_q(w)/k) and the positive's weight w⁺, a second-order
    expansion of log(S + w⁺/k) around log Z̄_x gives E log(S + w⁺/k) = log Z̄_x + E_M w⁺/(k Z̄_x) − Var_q(w)/(2k Z̄_x²)
    + O(1/k²), so CE − R_k = (J − P)/k + O(1/k²) with

    .. math::
        J = \mathbb{E}_x \frac{\operatorname{Var}_{y \sim q_x}(w_{xy})}{2\bar Z_x^2}, \qquad
        P = \mathbb{E}_x \frac{\mathbb{E}_{y \sim M(x,\cdot)}\, w_{xy}}{\bar Z_x}.

    The expansion is the same in both variants; only q_x (and with it Z̄_x) differs. In the literal variant
    (``include_anchor``, q_x uniform over all N items) the anchor's own weight enters the variance: it adds
    ρ_xx²/N to E_q ρ², ρ_xx = e^{ŝ_xx/τ}/Z̄^π_x, which at small τ outweighs the positive's part and turns C positive.

    Computed on the ratios ρ = w/Z̄ = e^{ŝ/τ − log Z̄}, whose q-mean is 1 (Var_q(w)/Z̄² = E_q ρ² − 1), so small τ is
    safe. M is zero on the diagonal, so the positive is never the anchor in either variant.
    """
    logits, log_zbar = _softmax_search(universe, table, tau, include_anchor)
    ratio = (logits - log_zbar[:, None]).exp()  # (N, N) ρ = w / Z̄
    if include_anchor:
        var = (ratio * ratio).mean(dim=1) - 1.0  # q = π: every item, the anchor included
    else:
        ratio = ratio.masked_fill(torch.eye(universe.size, dtype=torch.bool), 0.0)  # at most N − 1
        var = (ratio * ratio).sum(dim=1) / (universe.size - 1) - 1.0
    positive = (universe.transition() * ratio).sum(dim=1)
    return float((var / 2).mean()), float(positive.mean())


def first_order_constant(universe: Universe, table: torch.Tensor, tau: float, include_anchor: bool = False) -> float:
    r"""C with CE − R_k = C/k + O(1/k²), exactly (:func:`first_order_parts`, Jensen's part minus the positive's):

    .. math::
        C = \mathbb{E}_x\Bigl[\frac{\operatorname{Var}_{y \sim q_x}(w_{xy})}{2\bar Z_x^2}
            - \frac{\mathbb{E}_{y \sim M(x,\cdot)}\, w_{xy}}{\bar Z_x}\Bigr],

    q_x uniform over the items other than x, or over all N items when ``include_anchor`` (Whiteley's literal π).
    """
    jensen, positive = first_order_parts(universe, table, tau, include_anchor)
    return jensen - positive


@dataclass(frozen=True)
class PropositionOne:
    """CE − R_k at one k, with Whiteley's bounds."""

    k: int
    gap: float
    se: float
    lower: float
    upper: float

    @property
    def inside(self) -> bool:
        return self.lower <= self.gap <= self.upper

    def to_dict(self) -> dict[str, float | int | bool]:
        return asdict(self) | {"inside": self.inside, "k_times_gap": self.k * self.gap}


def proposition_bounds(k: int, tau: float) -> tuple[float, float]:
    """Whiteley's bounds (−log(1 + e^{2/τ}/k), (e^{2/τ} − 1)²/(8k)) on CE − R_k, computed in logs so that small τ
    stays finite; they hold in both variants (every weight e^{ŝ/τ} lies in [e^{−1/τ}, e^{1/τ}]).

    Their size is not e^{2/τ}/k. The lower bound is ≈ −e^{2/τ}/k only for k ≫ e^{2/τ}; for k ≪ e^{2/τ} it is
    ≈ −(2/τ − log k), a constant that no O(1/k) gap approaches (τ = 0.1, k = 1024: −13.1). The upper bound is
    (e^{2/τ} − 1)²/(8k) ≈ e^{4/τ}/(8k), above the trivial bound 2/τ (:func:`trivial_bounds`) for
    k < τ(e^{2/τ} − 1)²/16 (every k at τ ≤ 0.2).
    """
    log_c = 2.0 / tau
    lower = -(np.logaddexp(0.0, log_c - math.log(k)))
    upper = math.exp(2 * (log_c + math.log1p(-math.exp(-log_c))) - math.log(8 * k)) if log_c < 350 else math.inf
    return float(lower), upper


def trivial_bounds(k: int, tau: float) -> tuple[float, float]:
    """(−2/τ − log(1 + 1/k), 2/τ): the range of CE − R_k from the weights' range alone, every weight in
    [e^{−1/τ}, e^{1/τ}] (log Z̄_x − log S ≤ 2/τ for a mean S of k weights; the positive adds at most log(1 + 1/k) over
    e^{1/τ}). A bound of :func:`proposition_bounds` outside this range says nothing."""
    return -2.0 / tau - math.log1p(1.0 / k), 2.0 / tau


def proposition_one(
    universe: Universe, table: torch.Tensor, tau: float, k: int, samples: int, generator: torch.Generator,
    chunk: int = 4096, include_anchor: bool = False,
) -> PropositionOne:  # fmt: skip
    """Monte Carlo estimate of CE − R_k (``samples`` anchors, each with its positive and k negatives drawn uniformly
    from the items other than the anchor, or from all N items when ``include_anchor``: Whiteley's literal variant).

    One generator seed gives both variants the same anchors and positives (the negatives are one draw of the same
    shape from either law)."""
    logits_all, log_zbar = _softmax_search(universe, table, tau, include_anchor)
    values = []
    for start in range(0, samples, chunk):
        n = min(chunk, samples - start)
        anchors, positives = universe.sample_pairs(n, generator)
        if include_anchor:
            negatives = torch.randint(0, universe.size, (n, k), generator=generator)  # (n, k), may be the anchor
        else:
            negatives = universe.sample_negatives(anchors, k, generator)  # (n, k)
        cand = torch.cat([positives[:, None], negatives], dim=1)
        logits = logits_all[anchors[:, None], cand]  # (n, 1 + k)
        values.append(log_zbar[anchors] - (torch.logsumexp(logits, dim=1) - math.log(k)))
    diff = torch.cat(values)
    lower, upper = proposition_bounds(k, tau)
    return PropositionOne(k, float(diff.mean()), float(diff.std() / math.sqrt(diff.numel())), lower, upper)


def loglog_slope(ks: list[int] | np.ndarray, values: list[float] | np.ndarray) -> float:
    """Least-squares slope of log |value| on log k."""
    x = np.log(np.asarray(ks, dtype=np.float64))
    y = np.log(np.abs(np.asarray(values, dtype=np.float64)))
    return float(np.polyfit(x, y, 1)[0])


def mean_interval(values: list[float] | np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval (mean, low, high) of per-seed values; the interval is (mean, mean) for one."""
    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    if v.size < 2:
        return mean, mean, mean
    half = float(student_t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def learned_link(
    universe: Universe, table: torch.Tensor, size: int, batches: int, anchors: int, generator: torch.Generator
) -> LinkFit:
    """Ground truth I's link selection on a learned table, as ``simcse-diagnose`` reads a real encoder: the learned
    cosines of ``batches`` × ``anchors`` search problems of ``size`` candidates, the true positives as winners."""
    found = []
    for _ in range(batches):
        a, candidates, where = universe.candidate_sets(anchors, size, generator)
        found.append(ScoreBatch(cosine_scores(table.double(), a, candidates), where))
    return select_link(found)
