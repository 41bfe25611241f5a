"""The WEINCE authors' two extra top-M terms (:mod:`simcse_weince.losses.topm`) against plain references.

The references are written from the module docstring, independently of the vectorised code: float64 NumPy,
Python loops over anchors and candidates, ``sorted`` for the M hardest negatives and the tail, ``np.polyfit``
for the tail line. They cover the NT-Xent, SimCSE and supervised (hard negatives, ``negative_mask``, absent
negatives) layouts; the running β_t (gate, clamp, momentum, no movement outside training); zero weights; and the
range checks of :class:`TopMConfig`.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import torch

from simcse_weince.losses import InfoNCELoss, TopMConfig, WeinceLoss, WithTopMTerms, make_loss, score_matrix, with_terms
from simcse_weince.losses.topm import EPS, global_tail_fit, global_tail_size, top_m_cross_entropy, top_m_hardest, weibit

TAU = 0.1


# ---- references ---------------------------------------------------------------------------------------------
def _cos(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def reference_rows(a, p, layout, negatives=None, mask=None, absent=None):
    """Per anchor, by loops: ``(positive score, [(score, masked) for every negative that exists])``.

    NT-Xent: views ``[a; p]``, the positive of view i is i ± N, the view itself is no candidate. SimCSE and its
    supervised form: candidates ``[p_1..p_B | n_{1,1}..n_{B,1} | ...]``, the positive of anchor i is column i,
    an absent hard negative is no candidate of anyone; ``mask[i][col]`` marks a masked (known false) negative.
    """
    a, p = np.asarray(a, np.float64), np.asarray(p, np.float64)
    rows = []
    if layout == "ntxent":
        views, n = np.concatenate([a, p]), len(a)
        for i in range(2 * n):
            pos = (i + n) % (2 * n)
            negs = [
                (_cos(views[i], views[j]), mask is not None and bool(mask[i][j]))
                for j in range(2 * n)
                if j not in (i, pos)
            ]
            rows.append((_cos(views[i], views[pos]), negs))
        return rows
    b = len(a)
    cands, present = list(p), [True] * b
    for c, column in enumerate(np.asarray(negatives, np.float64) if negatives is not None else []):
        cands += list(column)
        present += [absent is None or not bool(absent[c][j]) for j in range(b)]
    for i in range(b):
        negs = [
            (_cos(a[i], cands[col]), mask is not None and bool(mask[i][col]))
            for col in range(len(cands))
            if col != i and present[col]
        ]
        rows.append((_cos(a[i], p[i]), negs))
    return rows


def reference_hardest(rows, m: int) -> list[list[float]]:
    """The min(m, K) largest unmasked negative scores of each anchor, descending."""
    return [sorted((s for s, masked in negs if not masked), reverse=True)[:m] for _, negs in rows]


def _weibit_logit(s: float, beta: float) -> float:
    return -beta * math.log(1.0 - min(s, 1.0 - EPS))


def reference_term(rows, m: int, logit) -> float:
    """Mean over anchors of −log softmax of the positive among [positive | its M hardest negatives]."""
    losses = []
    for (pos, _), hardest in zip(rows, reference_hardest(rows, m), strict=True):
        logits = [logit(pos)] + [logit(s) for s in hardest]
        top = max(logits)
        losses.append(top + math.log(sum(math.exp(v - top) for v in logits)) - logits[0])
    return float(np.mean(losses))


def reference_softmax_term(rows, m: int, tau: float = TAU) -> float:
    return reference_term(rows, m, lambda s: s / tau)


def reference_weibit_term(rows, m: int, beta: float) -> float:
    return reference_term(rows, m, lambda s: _weibit_logit(s, beta))


def reference_infonce(rows, tau: float = TAU) -> float:
    losses = []
    for pos, negs in rows:
        logits = [pos / tau] + [s / tau for s, masked in negs if not masked]
        top = max(logits)
        losses.append(top + math.log(sum(math.exp(v - top) for v in logits)) - logits[0])
    return float(np.mean(losses))


def reference_pooled(rows) -> list[float]:
    """Every negative of every anchor, a masked one as s = −1 (the tail's convention)."""
    return [-1.0 if masked else s for _, negs in rows for s, masked in negs]


def reference_fit(pooled, min_tail_points: int, tail_frac: float, k_tail: int | None = None, burn: int | None = None):
    """(β̂, R², ρ) of the global tail, or None; ``k_tail`` / ``burn`` override the rule (to show that it matters)."""
    total = len(pooled)
    if k_tail is None:
        k_tail = min(total, int(max(min_tail_points, tail_frac * total)))
    if k_tail < 10:
        return None
    delta = sorted(max(1.0 - s, EPS) for s in pooled)[:k_tail]
    if burn is None:
        burn = max(1, k_tail // 20)
    x = np.log(np.array(delta[burn:]))
    y = np.log(np.arange(burn + 1, k_tail + 1) / (k_tail + 1.0))
    slope, intercept = np.polyfit(x, y, 1)
    sse = float(np.sum((y - intercept - slope * x) ** 2))
    sst = float(np.sum((y - y.mean()) ** 2))
    return max(float(slope), 0.0), min(max(1.0 - sse / sst, 0.0), 1.0), delta[0]


# ---- batches ------------------------------------------------------------------------------------------------
def _views(n: int = 8, d: int = 6, seed: int = 0, noise: float = 0.6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, d, generator=g)
    return a, a + noise * torch.randn(n, d, generator=g)


def _supervised(b: int = 6, d: int = 6, k: int = 2, seed: int = 0, near: bool = True):
    """Triplets whose absent hard negatives are the hardest candidates of their row (nearly the anchor, with
    ``near``): were they counted, they would be among the M hardest."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, d, generator=g)
    p = a + 0.8 * torch.randn(b, d, generator=g)
    n = a[None] + 0.9 * torch.randn(k, b, d, generator=g)
    absent = torch.zeros(k, b, dtype=torch.bool)
    absent[0, 1] = absent[1, 4] = absent[1, 0] = True
    if near:
        n[absent] = a[torch.nonzero(absent)[:, 1]] + 0.01 * torch.randn(int(absent.sum()), d, generator=g)
    return a, p, n, absent


def _mask_the_hardest(rows, columns: list[list[int]], width: int, per_row: int = 2) -> torch.Tensor:
    """(A, C) mask of the ``per_row`` hardest negatives of each anchor: ignored masks would show in the top-M."""
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, ((_, negs), cols) in enumerate(zip(rows, columns, strict=True)):
        order = sorted(range(len(negs)), key=lambda j: -negs[j][0])
        for j in order[:per_row]:
            mask[i, cols[j]] = True
    return mask


def _ntxent_columns(n: int) -> list[list[int]]:
    return [[j for j in range(2 * n) if j not in (i, (i + n) % (2 * n))] for i in range(2 * n)]


def _supervised_columns(b: int, k: int, absent: torch.Tensor) -> list[list[int]]:
    present = [True] * b + [not bool(absent[c, j]) for c in range(k) for j in range(b)]
    return [[col for col in range(len(present)) if col != i and present[col]] for i in range(b)]


def _case(layout: str):
    """(loss inputs, reference rows) of one layout; masked ones hold each row's 2 hardest negatives."""
    if layout == "ntxent":
        a, p = _views()
        rows = reference_rows(a, p, "ntxent")
        mask = _mask_the_hardest(rows, _ntxent_columns(len(a)), 2 * len(a))
        return dict(anchors=a, positives=p, negative_mask=mask), reference_rows(a, p, "ntxent", mask=mask)
    if layout == "simcse":
        a, p = _views(seed=1)
        return dict(anchors=a, positives=p), reference_rows(a, p, "simcse")
    a, p, n, absent = _supervised()
    rows = reference_rows(a, p, "simcse", negatives=n, absent=absent)
    mask = _mask_the_hardest(rows, _supervised_columns(len(a), len(n), absent), (1 + len(n)) * len(a))
    inputs = dict(anchors=a, positives=p, negative_mask=mask, negatives=n, absent_negatives=absent)
    return inputs, reference_rows(a, p, "simcse", negatives=n, mask=mask, absent=absent)


LAYOUTS = ["ntxent", "simcse", "supervised"]


def _layout(layout: str) -> str:
    return "ntxent" if layout == "ntxent" else "simcse"


def _lay(inputs: dict, layout: str):
    return score_matrix(
        inputs["anchors"], inputs["positives"], _layout(layout), inputs.get("negative_mask"),
        negatives=inputs.get("negatives"), absent_negatives=inputs.get("absent_negatives"),
    )  # fmt: skip


def _padded(values: list[list[float]], width: int) -> torch.Tensor:
    return torch.tensor([v + [-math.inf] * (width - len(v)) for v in values], dtype=torch.float64)


# ---- the M hardest negatives and both terms -----------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m", [1, 3, 7])
def test_m_hardest_and_both_terms_match_the_loops(layout: str, m: int) -> None:
    inputs, rows = _case(layout)
    lay = _lay(inputs, layout)
    positive, hardest = top_m_hardest(lay, m)
    assert hardest.shape == (len(rows), min(m, lay.num_negatives))
    torch.testing.assert_close(positive[:, 0].double(), torch.tensor([r[0] for r in rows], dtype=torch.float64))
    torch.testing.assert_close(hardest.double(), _padded(reference_hardest(rows, m), hardest.shape[1]), atol=1e-6,
                               rtol=0)  # fmt: skip
    sm = top_m_cross_entropy(positive / TAU, hardest / TAU)
    assert float(sm) == pytest.approx(reference_softmax_term(rows, m), rel=1e-5)
    wb = top_m_cross_entropy(weibit(positive, 2.5), weibit(hardest, 2.5))
    assert float(wb) == pytest.approx(reference_weibit_term(rows, m, 2.5), rel=1e-5)
    if layout != "simcse":  # the masked negatives are the hardest of their rows: taken, they would change the term
        unmasked = reference_rows(inputs["anchors"], inputs["positives"], _layout(layout), inputs.get("negatives"),
                                  absent=inputs.get("absent_negatives"))  # fmt: skip
        assert reference_softmax_term(unmasked, m) != pytest.approx(reference_softmax_term(rows, m), rel=1e-3)


def test_absent_negatives_are_no_candidates() -> None:
    """The absent hard negatives are nearly their anchor: were they candidates, each would be its anchor's
    hardest negative, above every real one."""
    a, p, n, absent = _supervised()
    lay = score_matrix(a, p, negatives=n, absent_negatives=absent)
    _, hardest = top_m_hardest(lay, 1)
    for c, j in torch.nonzero(absent).tolist():
        absent_score = _cos(a[j].numpy(), n[c, j].numpy())
        assert absent_score > 0.99 and float(hardest[j, 0]) < absent_score - 0.1
    rows = reference_rows(a, p, "simcse", negatives=n, absent=absent)
    torch.testing.assert_close(hardest[:, 0].double(), torch.tensor([h[0] for h in reference_hardest(rows, 1)],
                               dtype=torch.float64), atol=1e-6, rtol=0)  # fmt: skip


def test_fewer_valid_negatives_than_m_use_those_that_exist() -> None:
    """Rows with 0, 2 and 1 unmasked negatives (K = 3·5 − 1 − 1 absent = 13 in this batch), M = 5 and M = 100 > K."""
    a, p, n, absent = _supervised(b=5, k=2, near=False)
    absent[:] = False
    absent[1, 3] = True
    mask = torch.zeros(5, 15, dtype=torch.bool)
    mask[0] = True  # every negative of anchor 0 masked (its positive, column 0, is never masked)
    mask[1, 3:] = True  # anchor 1 keeps columns 0 and 2 (1 is its positive)
    mask[2, 1:] = True  # anchor 2 keeps column 0
    inputs = dict(anchors=a, positives=p, negative_mask=mask, negatives=n, absent_negatives=absent)
    rows = reference_rows(a, p, "simcse", negatives=n, mask=mask, absent=absent)
    assert [sum(not masked for _, masked in negs) for _, negs in rows][:3] == [0, 2, 1]
    lay = _lay(inputs, "supervised")
    assert lay.num_negatives == 13
    for m in (5, 100):
        positive, hardest = top_m_hardest(lay, m)
        assert hardest.shape[1] == min(m, 13)
        assert (
            torch.isinf(hardest[0]).all() and torch.isfinite(hardest[1, :2]).all() and torch.isinf(hardest[1, 2:]).all()
        )
        torch.testing.assert_close(hardest.double(), _padded(reference_hardest(rows, m), hardest.shape[1]),
                                   atol=1e-6, rtol=0)  # fmt: skip
        sm = top_m_cross_entropy(positive / TAU, hardest / TAU)
        assert float(sm) == pytest.approx(reference_softmax_term(rows, m), rel=1e-5)
        wb = top_m_cross_entropy(weibit(positive, 3.0), weibit(hardest, 3.0))
        assert float(wb) == pytest.approx(reference_weibit_term(rows, m, 3.0), rel=1e-5)


# ---- the global tail fit ------------------------------------------------------------------------------------
def _stat(lay) -> torch.Tensor:
    """The scores as the terms hand them to the fit: masked negatives −1, non-negatives −inf."""
    stat = lay.scores.detach().masked_fill(lay.user_mask, -1.0)
    return stat.masked_fill(lay.self_mask | lay.positive_mask, float("-inf"))


def _assert_fit(fit, ref) -> None:
    assert fit is not None and ref is not None
    assert fit.beta_hat.dtype == torch.float64
    assert float(fit.beta_hat) == pytest.approx(ref[0], rel=1e-5)
    assert float(fit.r2) == pytest.approx(ref[1], rel=1e-5, abs=1e-7)
    assert float(fit.rho) == pytest.approx(ref[2], rel=1e-5)


def test_global_tail_size_truncates() -> None:
    assert global_tail_size(224, 10, 0.2665) == 59  # 59.696 truncated (round() would give 60)
    assert global_tail_size(224, 100, 0.05) == 100  # min_tail_points dominates 11.2
    assert global_tail_size(224, 1024, 0.05) == 224  # at most every negative
    assert global_tail_size(224, 10, 1.0) == 224


@pytest.mark.parametrize(
    ("min_tail_points", "tail_frac", "k_tail"), [(10, 0.2665, 59), (100, 0.05, 100), (1024, 0.05, 224)]
)
def test_global_tail_fit_is_the_least_squares_line(min_tail_points: int, tail_frac: float, k_tail: int) -> None:
    """NT-Xent, N = 8: K_tot = 16·14 = 224 negatives. The tail size truncates (59.696 → 59, burn 2) and the
    first max(1, k_tail // 20) points are dropped: the neighbouring choices give other fits."""
    a, p = _views(d=16)
    lay = score_matrix(a, p, "ntxent")
    cfg = TopMConfig(topm_min_tail_points=min_tail_points, topm_tail_frac=tail_frac)
    pooled = reference_pooled(reference_rows(a, p, "ntxent"))
    assert len(pooled) == 224
    fit = global_tail_fit(_stat(lay), 224, cfg)
    ref = reference_fit(pooled, min_tail_points, tail_frac)
    _assert_fit(fit, ref)
    burn = max(1, k_tail // 20)
    others = [dict(k_tail=k_tail - 1), dict(k_tail=k_tail, burn=burn - 1), dict(k_tail=k_tail, burn=burn + 1)]
    if k_tail == 59:
        others.append(dict(k_tail=60))  # round() instead of int()
    for other in others:
        wrong = reference_fit(pooled, min_tail_points, tail_frac, **other)
        assert float(fit.beta_hat) != pytest.approx(wrong[0], rel=1e-4), other


def test_global_tail_fit_counts_masked_negatives_as_minus_one_and_skips_absent_ones() -> None:
    """The supervised batch with a mask, the whole tail (tail_frac 1): the masked negatives enter at δ = 2, the
    absent ones not at all (K = 3·6 − 1 − 3 = 14 per anchor, K_tot = 84)."""
    inputs, rows = _case("supervised")
    terms = TopMConfig(topm_weibit_weight=1.0, topm_min_tail_points=10, topm_tail_frac=1.0)
    loss = WithTopMTerms(InfoNCELoss(TAU), terms)
    loss(**inputs)
    pooled = reference_pooled(rows)
    assert len(pooled) == 84 and pooled.count(-1.0) == 12
    _assert_fit(loss.topm.last_fit, reference_fit(pooled, 10, 1.0))
    as_is = [s for _, negs in rows for s, _ in negs]  # the masked ones at their own scores: another fit
    assert float(loss.topm.last_fit.beta_hat) != pytest.approx(reference_fit(as_is, 10, 1.0)[0], rel=1e-4)


def test_fewer_than_ten_tail_points_is_no_fit() -> None:
    a, p = _views(n=3)
    lay = score_matrix(a, p)  # K_tot = 3·2 = 6
    assert global_tail_fit(_stat(lay), 6, TopMConfig(topm_min_tail_points=1024)) is None
    assert reference_fit(reference_pooled(reference_rows(a, p, "simcse")), 1024, 0.05) is None


# ---- the running β_t ----------------------------------------------------------------------------------------
BETA_MAX = 6.0  # inside the β̂ of some of the batches below, under others


def _ema_loss(**knobs) -> InfoNCELoss:
    cfg = dict(topm_weibit_weight=0.5, topm_weibit_m=5, topm_min_tail_points=10, topm_tail_frac=0.3,
               topm_r2_min=0.0, topm_beta_momentum=0.7, topm_beta_min=0.5, topm_beta_max=BETA_MAX)  # fmt: skip
    return WithTopMTerms(InfoNCELoss(TAU, layout="ntxent"), TopMConfig(**(cfg | knobs)))


def _step(loss, seed: int, noise: float):
    a, p = _views(d=16, seed=seed, noise=noise)
    a.requires_grad_(True)
    return loss(a, p).detach(), reference_rows(a.detach(), p, "ntxent")


def test_running_beta_follows_the_clamped_ema() -> None:
    """β_t = m·β_{t−1} + (1 − m)·clip(β̂, 0.5, 6): exactly from the batch's fit, and the fit is the reference's;
    the step's Weibit term uses the new β_t. Some batches' β̂ are above the clamp, some inside."""
    loss = _ema_loss()
    beta = 4.0
    assert float(loss.topm.beta_t) == beta
    hats = []
    for seed, noise in enumerate((0.3, 1.0, 0.5, 2.0, 0.2)):
        value, rows = _step(loss, seed, noise)
        fit = loss.topm.last_fit
        ref = reference_fit(reference_pooled(rows), 10, 0.3)
        _assert_fit(fit, ref)
        hats.append(ref[0])
        beta = 0.7 * beta + (1 - 0.7) * min(max(float(fit.beta_hat), 0.5), BETA_MAX)
        assert float(loss.topm.beta_t) == pytest.approx(beta, rel=1e-15, abs=0)
        assert float(loss.last_diagnostics["topm_beta"]) == pytest.approx(beta, rel=1e-6)
        main = reference_infonce(rows)
        assert float(value) == pytest.approx(main + 0.5 * reference_weibit_term(rows, 5, beta), rel=1e-5)
    assert max(hats) > BETA_MAX > min(hats)  # the clamp acted on some batches and not on others


def test_a_rejected_or_missing_fit_keeps_beta() -> None:
    loss = _ema_loss(topm_r2_min=1.0)  # no noisy tail is a perfect line
    for seed in range(3):
        value, rows = _step(loss, seed, 0.5)
        assert 0.5 < float(loss.topm.last_fit.r2) < 1.0 and float(loss.topm.last_fit.beta_hat) > 0
        assert float(loss.topm.beta_t) == 4.0
        assert float(value) == pytest.approx(reference_infonce(rows) + 0.5 * reference_weibit_term(rows, 5, 4.0),
                                             rel=1e-5)  # fmt: skip
    # a batch too small for a tail (K_tot = 3·2 = 6 < 10 points) keeps it too
    loss = WithTopMTerms(InfoNCELoss(TAU), TopMConfig(topm_weibit_weight=0.5, topm_min_tail_points=10, topm_r2_min=0.0))
    loss(*_views(n=3))
    assert loss.topm.last_fit is None and float(loss.topm.beta_t) == 4.0


def test_beta_moves_only_in_a_forward_with_gradient() -> None:
    loss = _ema_loss()
    _step(loss, 0, 0.5)
    moved = float(loss.topm.beta_t)
    assert moved != 4.0
    with torch.no_grad():  # an evaluation: no fit, the current β_t in the loss, and kept as it was
        value, rows = _step(loss, 1, 0.5)
        assert loss.topm.last_fit is None and float(loss.last_diagnostics["topm_beta"]) == pytest.approx(moved)
    assert float(loss.topm.beta_t) == moved
    expected = reference_infonce(rows) + 0.5 * reference_weibit_term(rows, 5, moved)
    assert float(value) == pytest.approx(expected, rel=1e-5)
    _step(loss, 2, 0.5)
    expected = 0.7 * moved + (1 - 0.7) * min(max(float(loss.topm.last_fit.beta_hat), 0.5), BETA_MAX)
    assert float(loss.topm.beta_t) == pytest.approx(expected, rel=1e-15)


def test_without_auto_beta_is_beta_init_throughout() -> None:
    loss = _ema_loss(topm_beta_auto=False, topm_beta_init=2.5)
    for seed in range(3):
        value, rows = _step(loss, seed, 0.5)
        assert float(loss.topm.beta_t) == 2.5 and float(loss.last_diagnostics["topm_beta"]) == 2.5
        assert "topm_beta_hat" not in loss.last_diagnostics
        assert float(value) == pytest.approx(reference_infonce(rows) + 0.5 * reference_weibit_term(rows, 5, 2.5),
                                             rel=1e-5)  # fmt: skip


# ---- the terms inside the losses ----------------------------------------------------------------------------
def _grads(loss_fn, inputs: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = {
        k: v.clone().requires_grad_(True) for k, v in inputs.items() if k in ("anchors", "positives", "negatives")
    }
    value = loss_fn(**(inputs | leaves))
    value.backward()
    return value.detach(), [leaf.grad for leaf in leaves.values()]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", ["infonce", "weince"])
def test_zero_weights_are_bit_identical_to_no_terms(layout: str, name: str) -> None:
    inputs, _ = _case(layout)
    off = TopMConfig(topm_softmax_m=2, topm_weibit_m=3, topm_beta_init=2.0, topm_min_tail_points=10)
    make = {
        "infonce": lambda terms: with_terms(InfoNCELoss(TAU, layout=_layout(layout)), terms),
        "weince": lambda terms: with_terms(WeinceLoss(TAU, layout=_layout(layout), min_tail_points=10), terms),
    }[name]
    with_zero, without = make(off), make(None)
    assert not isinstance(with_zero, WithTopMTerms) and not with_zero.state_dict() and not off.active
    assert with_zero.get_config_dict() == without.get_config_dict()
    value, grads = _grads(with_zero, inputs)
    ref_value, ref_grads = _grads(without, inputs)
    assert torch.equal(value, ref_value)
    for g, r in zip(grads, ref_grads, strict=True):
        assert torch.equal(g, r)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_infonce_plus_terms_is_infonce_plus_the_weighted_references(layout: str) -> None:
    inputs, rows = _case(layout)
    cfg = TopMConfig(topm_softmax_weight=0.3, topm_softmax_m=4, topm_weibit_weight=0.7, topm_weibit_m=2,
                     topm_beta_auto=False, topm_beta_init=2.5)  # fmt: skip
    loss = WithTopMTerms(InfoNCELoss(TAU, layout=_layout(layout)), cfg)
    value = loss(**inputs)
    sm, wb = reference_softmax_term(rows, 4), reference_weibit_term(rows, 2, 2.5)
    assert float(value) == pytest.approx(reference_infonce(rows) + 0.3 * sm + 0.7 * wb, rel=1e-5)
    assert float(loss.last_diagnostics["topm_softmax_loss"]) == pytest.approx(sm, rel=1e-5)
    assert float(loss.last_diagnostics["topm_weibit_loss"]) == pytest.approx(wb, rel=1e-5)
    # the same terms on WEINCE: added to its own loss, which they leave unchanged
    weince = WithTopMTerms(WeinceLoss(TAU, layout=_layout(layout), min_tail_points=10), cfg)
    alone = WeinceLoss(TAU, layout=_layout(layout), min_tail_points=10)(**inputs)
    assert float(weince(**inputs)) == pytest.approx(float(alone) + 0.3 * sm + 0.7 * wb, rel=1e-5)
    assert "lambda_mean" in weince.last_diagnostics and "topm_weibit_loss" in weince.last_diagnostics


@pytest.mark.parametrize("layout", ["ntxent", "supervised"])
def test_gradients_are_finite_and_flow_with_masked_entries(layout: str) -> None:
    """Masked, absent and padded (−inf) candidates, a row with no negative left, auto β: finite, nonzero
    gradients, and none into an absent negative."""
    inputs, _ = _case(layout)
    mask = inputs["negative_mask"].clone()
    mask[0] = True  # anchor 0 keeps no negative
    inputs["negative_mask"] = mask
    cfg = TopMConfig(topm_softmax_weight=1.0, topm_softmax_m=50, topm_weibit_weight=1.0, topm_weibit_m=50,
                     topm_min_tail_points=10, topm_r2_min=0.0)  # fmt: skip
    loss_fn = WithTopMTerms(InfoNCELoss(TAU, layout=_layout(layout)), cfg)
    value, grads = _grads(loss_fn, inputs)
    assert math.isfinite(float(value)) and float(loss_fn.topm.beta_t) != 4.0
    for g in grads:
        assert torch.isfinite(g).all() and float(g.abs().sum()) > 0
    # the terms alone (the loss minus InfoNCE) also have a finite, nonzero gradient
    leaves = {k: inputs[k].clone().requires_grad_(True) for k in ("anchors", "positives")}
    lay = score_matrix(leaves["anchors"], leaves["positives"], _layout(layout), mask, negatives=inputs.get("negatives"),
                       absent_negatives=inputs.get("absent_negatives"))  # fmt: skip
    extra, _ = WithTopMTerms(InfoNCELoss(TAU, layout=_layout(layout)), cfg).topm(lay, TAU)
    extra.backward()
    for leaf in leaves.values():
        assert torch.isfinite(leaf.grad).all() and float(leaf.grad.abs().sum()) > 0
    if layout == "supervised":
        assert float(grads[2][inputs["absent_negatives"]].abs().sum()) == 0


# ---- TopMConfig ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("knobs", "name"),
    [
        (dict(topm_softmax_weight=-0.1), "topm_softmax_weight"),
        (dict(topm_weibit_weight=-1.0), "topm_weibit_weight"),
        (dict(topm_weibit_weight=math.nan), "topm_weibit_weight"),
        (dict(topm_softmax_weight=math.inf), "topm_softmax_weight"),
        (dict(topm_softmax_m=0), "topm_softmax_m"),
        (dict(topm_weibit_m=0), "topm_weibit_m"),
        (dict(topm_weibit_m=2.5), "topm_weibit_m"),
        (dict(topm_beta_min=5.0, topm_beta_max=2.0), "topm_beta_min and topm_beta_max"),
        (dict(topm_beta_min=0.0), "topm_beta_min and topm_beta_max"),
        (dict(topm_beta_momentum=1.0), "topm_beta_momentum"),
        (dict(topm_beta_momentum=math.nan), "topm_beta_momentum"),
        (dict(topm_beta_init=0.0), "topm_beta_init"),
        (dict(topm_tail_frac=0.0), "topm_tail_frac"),
        (dict(topm_min_tail_points=0), "topm_min_tail_points"),
        (dict(topm_r2_min=1.5), "topm_r2_min"),
        (dict(topm_beta_auto="yes"), "topm_beta_auto"),
    ],
)
def test_config_errors_name_the_field(knobs: dict, name: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(name) + " must"):
        TopMConfig(**knobs)


def test_config_defaults_are_off_and_numbers_are_normalised() -> None:
    cfg = TopMConfig(topm_softmax_m=5.0, topm_weibit_weight=1)
    assert type(cfg.topm_softmax_m) is int and type(cfg.topm_weibit_weight) is float and cfg.active
    assert not TopMConfig().active and not isinstance(with_terms(InfoNCELoss(), TopMConfig()), WithTopMTerms)


@pytest.mark.parametrize("cls", [InfoNCELoss, WeinceLoss])
def test_the_config_dict_builds_the_same_loss_again(cls) -> None:
    """``make_loss(name, **loss.get_config_dict())`` is the same loss, terms included (they sit under one key,
    ``topm``)."""
    terms = TopMConfig(topm_softmax_weight=0.25, topm_weibit_weight=0.5, topm_weibit_m=9, topm_beta_auto=False)
    loss = WithTopMTerms(cls(0.2, layout="ntxent"), terms)
    cfg = loss.get_config_dict()
    assert cfg["topm"] == dataclasses.asdict(terms)
    again = make_loss(cls.name, **cfg)
    assert isinstance(again, WithTopMTerms) and type(again.loss) is cls
    assert again.get_config_dict() == cfg and again.topm.config == terms
    a, p = _views(d=16, seed=3, noise=0.5)
    assert torch.equal(loss(a, p), again(a, p))


def test_diagnostics_are_the_last_batchs_only() -> None:
    """A training step reports the fit (β̂, R²); an evaluation after it reports none of the step's keys."""
    loss = _ema_loss()
    _step(loss, 0, 0.5)
    assert {"topm_beta_hat", "topm_r2", "topm_beta", "topm_weibit_loss"} <= set(loss.last_diagnostics)
    with torch.no_grad():
        _step(loss, 1, 0.5)
    assert "topm_beta_hat" not in loss.last_diagnostics and "topm_beta" in loss.last_diagnostics


def test_a_loss_state_saved_before_the_wrapper_loads() -> None:
    """Checkpoints written when the terms were a field of the loss hold ``terms.beta_t``; the wrapper's buffer is
    ``topm.beta_t`` and takes that value (strict: no key left over or missing)."""
    loss = WithTopMTerms(WeinceLoss(TAU, layout="ntxent"), TopMConfig(topm_weibit_weight=0.5))
    assert isinstance(loss, WithTopMTerms) and set(loss.state_dict()) == {"topm.beta_t"}
    loss.load_state_dict({"terms.beta_t": torch.tensor(2.75, dtype=torch.float64)})
    assert float(loss.topm.beta_t) == 2.75
    loss.load_state_dict({"topm.beta_t": torch.tensor(3.5, dtype=torch.float64)})
    assert float(loss.topm.beta_t) == 3.5
