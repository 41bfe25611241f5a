"""Gathering across processes: 2 real CPU (gloo) processes must reproduce the global-batch loss,
gradients and statistics of one process, in the SimCSE, NT-Xent and supervised (hard negatives) layouts, for
InfoNCE, WEINCE and the field's losses (the sigmoid loss's t and b included), also with the extra top-M terms
(the global batch's M hardest negatives, its global tail fit and the running β_t)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from simcse_weince.losses import InfoNCELoss, TopMConfig, WeinceLoss, WithTopMTerms, make_loss, with_terms
from simcse_weince.losses.distributed import all_gather_with_grad
from simcse_weince.losses.duplicates import ABSENT_KEY, supervised_duplicate_mask
from tests.helpers import free_port

WORLD = 2
B = 40  # global batch


def _global_batch(layout: str, k: int) -> dict[str, torch.Tensor]:
    """Anchors, positives, k hard-negative columns (k, B, D), a random (A, C) negative mask, and sentence
    keys per column (2 + k, B) drawn from few values so that duplicates occur within and across columns."""
    g = torch.Generator().manual_seed(11)
    a = torch.randn(B, 8, generator=g)
    p = a + 0.6 * torch.randn(B, 8, generator=g)
    n = a[None] + 0.9 * torch.randn(k, B, 8, generator=g)
    rows, cols = (2 * B, 2 * B) if layout == "ntxent" else (B, (1 + k) * B)
    mask = torch.rand(rows, cols, generator=g) < 0.1
    keys = torch.randint(0, 30, (2 + k, B), generator=g)
    absent = torch.rand(k, B, generator=g) < 0.3  # pairs among the triplets: rows without that hard negative
    keys[2:][absent] = ABSENT_KEY
    return {"a": a, "p": p, "n": n, "mask": mask, "keys": keys, "absent": absent}


# Both terms; a global tail of max(16, int(0.05·K_tot)) points (312 of the NT-Xent batch's 80·78 negatives, 124
# of the supervised one's 40·62), fewer than each process holds: the tail is pooled from both. r2_min 0: β_t moves.
TERMS = TopMConfig(
    topm_softmax_weight=0.5,
    topm_softmax_m=7,
    topm_weibit_weight=0.5,
    topm_weibit_m=5,
    topm_min_tail_points=16,
    topm_r2_min=0.0,
)


# The field's losses, each with its own knob away from the value that makes it InfoNCE.
FIELD = {
    "hardness_infonce": dict(hardness_mode="all_negatives", hardness_strength=5.0),
    "hcl": dict(hcl_beta=1.0, hcl_tau_plus=0.1),
    "dcl": dict(dcl_sigma=0.5),  # DCLW: its weights are a softmax over the global batch's positives
    "focal_infonce": dict(focal_margin=0.3),
    "sigmoid": dict(sigmoid_bias=-2.0),  # t and b: parameters, their gradients averaged over the processes
}


def _make(name: str, layout: str, k: int, gather: bool):
    w = 1.0 if k else 0.0  # a weight on the own hard negatives: their global columns must be found
    base, _, extra = name.partition("+")  # "infonce+topm": with the extra terms
    terms = TERMS if extra == "topm" else None
    common = dict(layout=layout, gather_across_devices=gather, hard_negative_weight=w)
    if base == "weince":
        return with_terms(WeinceLoss(0.1, beta_mode="ols", min_tail_points=10, **common), terms)
    return make_loss(base, temperature=0.1, topm=terms, **FIELD.get(base, {}), **common)


def _rows(layout: str, rank: int) -> torch.Tensor:
    """The global anchor rows held by ``rank``."""
    bl = B // WORLD
    rows = torch.arange(rank * bl, (rank + 1) * bl)
    return torch.cat([rows, rows + B]) if layout == "ntxent" else rows


CASES = [(name, layout, k) for layout, k in (("simcse", 0), ("ntxent", 0), ("simcse", 1), ("simcse", 2))
         for name in ("infonce", "weince", *FIELD)] + [
    (f"{name}+topm", layout, k) for layout, k in (("ntxent", 0), ("simcse", 1)) for name in ("infonce", "weince")
]  # fmt: skip


def _worker(rank: int, port: int, out_dir: str) -> None:
    """Every case in one process group (one spawn for all: a spawn costs both processes their imports)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        for name, layout, k in CASES:
            torch.save(_local_case(rank, name, layout, k), Path(out_dir) / f"{name}-{layout}-{k}-rank{rank}.pt")
        torch.save(_ungathered_terms(rank), Path(out_dir) / f"ungathered-rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _local_case(rank: int, name: str, layout: str, k: int) -> dict[str, torch.Tensor]:
    batch = _global_batch(layout, k)
    local = _rows("simcse", rank)
    a_loc = batch["a"][local].clone().requires_grad_(True)
    p_loc = batch["p"][local].clone().requires_grad_(True)
    n_loc = batch["n"][:, local].clone().requires_grad_(True)
    loss_fn = _make(name, layout, k, gather=True)
    negatives = list(n_loc.unbind(0)) if k else None
    absent = batch["absent"][:, local] if k else None
    loss = loss_fn(
        a_loc, p_loc, negative_mask=batch["mask"][_rows(layout, rank)], negatives=negatives, absent_negatives=absent
    )
    loss.backward()
    result = {"loss": loss.detach(), "grad_a": a_loc.grad, "grad_p": p_loc.grad, "grad_n": n_loc.grad}
    result["grad_params"] = [p.grad.clone() for p in loss_fn.parameters()]
    if name.startswith("weince"):
        result["lam"] = loss_fn.last_statistics.lam
        result["rho0"] = loss_fn.last_statistics.rho0
    if isinstance(loss_fn, WithTopMTerms):
        result["beta_t"] = loss_fn.topm.beta_t.clone()  # the running value after the step
        result["beta_hat"] = loss_fn.topm.last_fit.beta_hat
    if layout == "simcse":
        keys = batch["keys"][:, local]
        result["duplicates"] = supervised_duplicate_mask(keys[0], keys[1], keys[2:], gather_across_devices=True)
    return result


def _ungathered_terms(rank: int) -> dict[str, torch.Tensor]:
    """InfoNCE + terms without gathered candidates: each process scores its own rows; β_t is still one value."""
    batch = _global_batch("ntxent", 0)
    local = _rows("simcse", rank)
    loss_fn = WithTopMTerms(InfoNCELoss(0.1, layout="ntxent", gather_across_devices=False), TERMS)
    loss_fn(batch["a"][local].clone().requires_grad_(True), batch["p"][local].clone().requires_grad_(True))
    return {"beta_t": loss_fn.topm.beta_t.clone(), "beta_hat": loss_fn.topm.last_fit.beta_hat}


@pytest.fixture(scope="module")
def two_process_results():
    """Each case's per-rank results from one run of 2 gloo processes."""
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(free_port(), tmp), nprocs=WORLD, join=True)
        yield {
            case: [torch.load(Path(tmp) / f"{'-'.join(map(str, case))}-rank{r}.pt") for r in range(WORLD)]
            for case in CASES
        } | {"ungathered": [torch.load(Path(tmp) / f"ungathered-rank{r}.pt") for r in range(WORLD)]}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("name", "layout", "k"), CASES)
def test_two_processes_equal_one_process_global_batch(name: str, layout: str, k: int, two_process_results) -> None:
    parts = two_process_results[name, layout, k]
    batch = _global_batch(layout, k)
    a, p, n = (batch[x].clone().requires_grad_(True) for x in ("a", "p", "n"))
    ref_fn = _make(name, layout, k, gather=False)
    ref = ref_fn(
        a, p, negative_mask=batch["mask"], negatives=list(n.unbind(0)) if k else None,
        absent_negatives=batch["absent"] if k else None,
    )  # fmt: skip
    ref.backward()

    # DDP averages over processes: global loss = mean of local losses; global grad = local grad / WORLD.
    torch.testing.assert_close(sum(r["loss"] for r in parts) / WORLD, ref.detach(), rtol=1e-6, atol=1e-6)
    grad_a = torch.cat([r["grad_a"] for r in parts]) / WORLD
    grad_p = torch.cat([r["grad_p"] for r in parts]) / WORLD
    torch.testing.assert_close(grad_a, a.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(grad_p, p.grad, rtol=1e-5, atol=1e-7)
    if k:
        grad_n = torch.cat([r["grad_n"] for r in parts], dim=1) / WORLD
        torch.testing.assert_close(grad_n, n.grad, rtol=1e-5, atol=1e-7)
        assert float(n.grad.abs().sum()) > 0 and batch["absent"].any()
        assert float(n.grad[batch["absent"]].abs().sum()) == 0  # an absent negative is no one's candidate
    params = list(ref_fn.parameters())
    assert len(params) == (2 if name == "sigmoid" else 0)
    for i, param in enumerate(params):  # the loss's own parameters: DDP averages their gradients too
        torch.testing.assert_close(sum(r["grad_params"][i] for r in parts) / WORLD, param.grad, rtol=1e-5, atol=1e-7)
        assert float(param.grad.abs()) > 0
    if name.startswith("weince"):
        lam = ref_fn.last_statistics.lam
        for r, part in enumerate(parts):
            torch.testing.assert_close(part["lam"], lam[_rows(layout, r)], rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(part["rho0"], ref_fn.last_statistics.rho0)
        assert 0.05 < float(lam.mean()) < 0.95  # informative statistics: the comparison can fail
    if isinstance(ref_fn, WithTopMTerms):
        assert float(ref_fn.topm.beta_t) != TERMS.topm_beta_init  # the fit moved it: the comparison can fail
        for part in parts:
            torch.testing.assert_close(part["beta_hat"], ref_fn.topm.last_fit.beta_hat, rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(part["beta_t"], ref_fn.topm.beta_t, rtol=1e-6, atol=1e-7)
    if layout == "simcse":
        keys = batch["keys"]
        whole = supervised_duplicate_mask(keys[0], keys[1], keys[2:])
        assert whole.any()
        torch.testing.assert_close(torch.cat([r["duplicates"] for r in parts]), whole)


def test_gather_is_identity_without_process_group() -> None:
    x = torch.randn(3, 2, requires_grad=True)
    assert all_gather_with_grad(x) is x


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_without_gathering_the_running_beta_pools_the_tails_of_every_process(two_process_results) -> None:
    """β_t is one value for all processes even when each scores only its own rows: the fit is that of the pooled
    negatives of both processes' local batches (so any process's checkpoint resumes every process exactly)."""
    from simcse_weince.losses.layout import score_matrix
    from simcse_weince.losses.topm import global_tail_fit

    batch = _global_batch("ntxent", 0)
    stats, count = [], 0
    for r in range(WORLD):
        local = _rows("simcse", r)
        lay = score_matrix(batch["a"][local], batch["p"][local], "ntxent")
        stat = lay.scores.masked_fill(lay.self_mask | lay.positive_mask, float("-inf"))
        stats.append(stat)
        count += stat.shape[0] * lay.num_negatives
    fit = global_tail_fit(torch.cat(stats), count, TERMS)
    expected = 0.9 * TERMS.topm_beta_init + 0.1 * float(fit.beta_hat.clamp(TERMS.topm_beta_min, TERMS.topm_beta_max))
    for part in two_process_results["ungathered"]:
        torch.testing.assert_close(part["beta_hat"], fit.beta_hat, rtol=1e-6, atol=1e-7)
        assert float(part["beta_t"]) == pytest.approx(expected, rel=1e-9)
    own = [global_tail_fit(s, s.shape[0] * (s.shape[1] - 2), TERMS).beta_hat for s in stats]
    assert float(own[0]) != float(own[1])  # each process alone would have fitted another β̂
