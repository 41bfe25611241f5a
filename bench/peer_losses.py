"""HCL and Focal-InfoNCE side by side with their authors' own functions, run outside this repository.

The authors' code is not part of this repository: fetch it yourself and point the script at the files, e.g.

    git clone https://github.com/joshr17/HCL /tmp/HCL                      # image/main.py: criterion()
    git clone https://github.com/puerrrr/Focal-InfoNCE /tmp/Focal-InfoNCE  # focalNCE/models.py: sp_logits()
    .venv/bin/python bench/peer_losses.py --hcl /tmp/HCL/image/main.py \\
        --focal /tmp/Focal-InfoNCE/focalNCE/models.py

The named functions are read from those files (their source, as the authors wrote it; their modules import
training code, so the files are not imported) and run in a namespace with torch, numpy and the globals they read
(HCL's ``temperature`` and ``device``). On seeded inputs — SimCLR's 2N views for HCL (its layout), unsupervised
SimCSE's B×B cosines for Focal-InfoNCE (its layout), float64 embeddings — the script prints, per setting, our
loss (``hcl``, ``focal_infonce``) on float64 cosines and theirs, the relative difference of the losses and of
their gradients in the embeddings (agreement: < 1e-6), and the same differences for our public path, which
scores in float32 as in training (float32's rounding, relatively large where a loss is near 0).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from simcse_weince.losses import make_loss, score_matrix

HEAD = "ours | theirs | loss rel. diff | grad rel. diff | float32: loss | float32: grad |"


def authors_functions(path: Path, names: tuple[str, ...], **globals_: Any) -> dict[str, Any]:
    """The top-level functions ``names`` of the file ``path``, executed in a namespace of torch, numpy and
    ``globals_``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    missing = set(names) - {node.name for node in found}
    if missing:
        raise SystemExit(f"error: {path}: no function {', '.join(sorted(missing))} (expected the authors' file)")
    namespace: dict[str, Any] = {"torch": torch, "np": np, "F": F, "nn": torch.nn, **globals_}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)
    return {name: namespace[name] for name in names}


def _views(batch: int, dim: int, seed: int, noise: float) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(batch, dim, generator=g, dtype=torch.float64)
    return a, a + noise * torch.randn(batch, dim, generator=g, dtype=torch.float64)


def in_float64(loss, layout: str):
    """``loss`` on float64 cosines: the public path scores in float32 whatever the input (as in training); the
    formula is compared in float64, where a different formula cannot hide in float32's rounding."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        lay = score_matrix(x.detach(), y.detach(), layout)
        if layout == "ntxent":
            views = F.normalize(torch.cat([x, y]), dim=1)
            scores = views @ views.T
        else:
            scores = F.normalize(x, dim=1) @ F.normalize(y, dim=1).T
        return loss.loss_from_scores(dataclasses.replace(lay, scores=scores))

    return fn


def _compare(ours, theirs, a: torch.Tensor, p: torch.Tensor) -> tuple[float, float, float, float]:
    """(our loss, theirs, relative difference of the losses, of the gradients in ``a`` and ``p``)."""
    results = []
    for fn in (ours, theirs):
        x, y = a.clone().requires_grad_(True), p.clone().requires_grad_(True)
        value = fn(x, y)
        value.backward()
        results.append((float(value.detach()), torch.cat([x.grad, y.grad])))
    (v1, g1), (v2, g2) = results
    return v1, v2, abs(v1 - v2) / abs(v2), float((g1 - g2).norm() / g2.norm())


def hcl_rows(path: Path) -> list[str]:
    rows = []
    for tau, beta, tau_plus, batch, noise in itertools.product((0.5, 0.1), (0.0, 1.0, 2.0), (0.0, 0.1), (16, 64),
                                                               (0.3, 1.0)):  # fmt: skip
        fns = authors_functions(path, ("get_negative_mask", "criterion"), temperature=tau, device="cpu")
        a, p = _views(batch, 32, seed=batch + int(10 * noise), noise=noise)

        def theirs(x, y, beta=beta, tau_plus=tau_plus, batch=batch, fns=fns):
            return fns["criterion"](F.normalize(x, dim=1), F.normalize(y, dim=1), tau_plus, batch, beta, "hard")

        loss = make_loss("hcl", temperature=tau, hcl_beta=beta, hcl_tau_plus=tau_plus, layout="ntxent")
        v1, v2, dv, dg = _compare(in_float64(loss, "ntxent"), theirs, a, p)
        _, _, dv32, dg32 = _compare(lambda x, y, loss=loss: loss(x, y), theirs, a, p)
        rows.append(f"| {tau} | {beta} | {tau_plus} | {batch} | {noise} | {v1:.6g} | {v2:.6g} | {dv:.1e} | {dg:.1e} "
                    f"| {dv32:.1e} | {dg32:.1e} |")  # fmt: skip
    return rows


def focal_rows(path: Path) -> list[str]:
    fns = authors_functions(path, ("sp_logits",))
    rows = []
    for tau, margin, batch, noise in itertools.product((0.05, 0.1), (0.0, 0.3, 0.6), (16, 64), (0.3, 1.0)):
        a, p = _views(batch, 32, seed=batch + int(10 * noise), noise=noise)

        def theirs(x, y, tau=tau, margin=margin, batch=batch):
            cos = F.cosine_similarity(x[:, None], y[None, :], dim=-1)
            labels = torch.arange(batch)
            return F.cross_entropy(fns["sp_logits"](cos, tau, margin, labels), labels)

        loss = make_loss("focal_infonce", temperature=tau, focal_margin=margin)
        v1, v2, dv, dg = _compare(in_float64(loss, "simcse"), theirs, a, p)
        _, _, dv32, dg32 = _compare(lambda x, y, loss=loss: loss(x, y), theirs, a, p)
        rows.append(f"| {tau} | {margin} | {batch} | {noise} | {v1:.6g} | {v2:.6g} | {dv:.1e} | {dg:.1e} | {dv32:.1e} "
                    f"| {dg32:.1e} |")  # fmt: skip
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hcl", type=Path, required=True, help="HCL's image/main.py (joshr17/HCL)")
    p.add_argument("--focal", type=Path, required=True, help="Focal-InfoNCE's focalNCE/models.py")
    args = p.parse_args()
    worst = 0.0
    for title, columns, rows in (
        ("HCL (ours: hcl, NT-Xent layout; theirs: criterion(..., estimator='hard'))", "τ | β | τ⁺ | N | noise",
         hcl_rows(args.hcl)),
        ("Focal-InfoNCE (ours: focal_infonce, SimCSE B×B; theirs: cross-entropy of sp_logits)", "τ | m | B | noise",
         focal_rows(args.focal)),
    ):  # fmt: skip
        width = columns.count("|") + 1 + HEAD.count("|")
        print(f"\n{title}\n\n| {columns} | {HEAD}\n|" + "---|" * width)
        for row in rows:
            print(row)
            worst = max(worst, *map(float, row.split("|")[-5:-3]))
    print(f"\nlargest relative difference in float64: {worst:.1e} ({'agree' if worst < 1e-6 else 'DIFFER'} at 1e-6)")


if __name__ == "__main__":
    main()
