"""Gathering across processes: 2 real CPU (gloo) processes must reproduce the global-batch loss,
gradients and statistics of one process."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.losses.distributed import all_gather_with_grad
from tests.helpers import free_port

WORLD = 2


def _global_batch(layout: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    b = 40
    a = torch.randn(b, 8, generator=g)
    p = a + 0.6 * torch.randn(b, 8, generator=g)
    c = b if layout == "simcse" else 2 * b
    mask = torch.rand(c, c, generator=g) < 0.1
    return a, p, mask


def _make(name: str, layout: str, gather: bool):
    if name == "infonce":
        return InfoNCELoss(0.1, layout=layout, gather_across_devices=gather)
    return WeinceLoss(0.1, layout=layout, beta_mode="ols", min_tail_points=10, gather_across_devices=gather)


def _local_rows(mask: torch.Tensor, layout: str, rank: int, b_local: int, b: int) -> torch.Tensor:
    rows = torch.arange(rank * b_local, (rank + 1) * b_local)
    if layout == "ntxent":
        rows = torch.cat([rows, rows + b])
    return mask[rows]


def _worker(rank: int, port: int, out_dir: str, name: str, layout: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        a, p, mask = _global_batch(layout)
        b = a.shape[0]
        bl = b // WORLD
        a_loc = a[rank * bl : (rank + 1) * bl].clone().requires_grad_(True)
        p_loc = p[rank * bl : (rank + 1) * bl].clone().requires_grad_(True)
        loss_fn = _make(name, layout, gather=True)
        loss = loss_fn(a_loc, p_loc, negative_mask=_local_rows(mask, layout, rank, bl, b))
        loss.backward()
        result = {"loss": loss.detach(), "grad_a": a_loc.grad, "grad_p": p_loc.grad}
        if name == "weince":
            result["lam"] = loss_fn.last_statistics.lam
            result["rho0"] = loss_fn.last_statistics.rho0
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", ["infonce", "weince"])
@pytest.mark.parametrize("layout", ["simcse", "ntxent"])
def test_two_processes_equal_one_process_global_batch(name: str, layout: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(free_port(), tmp, name, layout), nprocs=WORLD, join=True)
        parts = [torch.load(Path(tmp) / f"rank{r}.pt") for r in range(WORLD)]

    a, p, mask = _global_batch(layout)
    a.requires_grad_(True)
    p.requires_grad_(True)
    ref_fn = _make(name, layout, gather=False)
    ref = ref_fn(a, p, negative_mask=mask)
    ref.backward()

    # DDP averages over processes: global loss = mean of local losses; global grad = local grad / WORLD.
    torch.testing.assert_close(sum(r["loss"] for r in parts) / WORLD, ref.detach(), rtol=1e-6, atol=1e-6)
    grad_a = torch.cat([r["grad_a"] for r in parts]) / WORLD
    grad_p = torch.cat([r["grad_p"] for r in parts]) / WORLD
    torch.testing.assert_close(grad_a, a.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(grad_p, p.grad, rtol=1e-5, atol=1e-7)
    if name == "weince":
        lam = ref_fn.last_statistics.lam
        b = a.shape[0]
        bl = b // WORLD
        for r, part in enumerate(parts):
            rows = torch.arange(r * bl, (r + 1) * bl)
            if layout == "ntxent":
                rows = torch.cat([rows, rows + b])
            torch.testing.assert_close(part["lam"], lam[rows], rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(part["rho0"], ref_fn.last_statistics.rho0)


def test_gather_is_identity_without_process_group() -> None:
    x = torch.randn(3, 2, requires_grad=True)
    assert all_gather_with_grad(x) is x
