"""Golden values of the losses: InfoNCE and WEINCE (β modes unit, ols, hill) in the SimCSE B×B, NT-Xent and
supervised (hard-negative) layouts, at fixed seeded inputs, against the numbers stored in ``golden/losses.json``.

They pin behaviour, as torchtune's and open_clip's regression tests pin theirs: a torch (or other dependency)
release that changes a loss value, WEINCE's λ or β, or a gradient beyond rounding makes these tests fail,
instead of moving every result silently. A failure is not necessarily a bug: if the change is understood (a
deliberate fix, a new kernel with a known rounding change), regenerate the values and say why in the commit::

    python -m tests.losses.test_golden               # the current values against the stored ones (a table)
    python -m tests.losses.test_golden --regenerate  # write golden/losses.json anew

Two precisions:

* ``float32``: the public path, ``loss(anchors, positives[, negatives=...])`` on float32 embeddings, as in
  training; λ and β means from ``last_diagnostics``.
* ``float64``: the same loss from float64 inputs, with the float64 cosine scores handed to ``loss_from_scores``
  (the public path scores in float32 whatever the input); it pins the statistics, the blend and the
  cross-entropy far below float32's rounding, so that a small change of a formula or constant (an ``eps``, a
  quantile rule, a clamp) cannot hide in float32 noise. λ and β means from ``last_statistics`` (the
  diagnostics are float32 by design).

Tolerances (relative; ``_ATOL`` absolute floors for λ and β, which may be near 0), against the deviations
measured on this machine (AMD EPYC with AVX-512, torch 2.14.1, MKL) between six settings: native AVX-512,
``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` (the slowest CI machines have AVX2 only), the same plus
``MKL_ENABLE_INSTRUCTIONS=AVX2``, each with 1 and 2 threads (``OMP_NUM_THREADS``):

* float64, 1e-10: measured at most 5.9e-16 relative (a few ulps: summation order). float64 rounding is ~1e-16
  per operation and the sums here have ≤ 128 terms scaled by 1/τ = 20, so another machine's kernels stay near
  1e-14; 1e-10 leaves four orders of magnitude and still flags τ moved by a relative 1e-8
  (``test_the_tolerance_catches_a_tiny_change``).
* float32, 1e-5: measured at most 1.3e-7 relative (AVX-512 vs AVX2, 2 threads; the float32 values themselves
  differ from the float64 ones by ~1e-7 to 1e-6). 1e-5 is ~75× the measured spread and still flags τ moved by a
  relative 1e-4.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from simcse_weince.losses import InfoNCELoss, WeinceLoss, score_matrix
from simcse_weince.losses.base import ContrastiveLoss

GOLDEN = Path(__file__).with_name("golden") / "losses.json"
LOSSES = ("infonce", "weince-unit", "weince-ols", "weince-hill")
LAYOUTS = ("simcse", "ntxent", "supervised")
PRECISIONS = ("float64", "float32")
RTOL = {"float64": 1e-10, "float32": 1e-5}
_ATOL = {"float64": 1e-12, "float32": 1e-7}
CASES = [(p, lay, loss) for p in PRECISIONS for lay in LAYOUTS for loss in LOSSES]
SEED = 20260601


def make_inputs(layout: str) -> dict[str, torch.Tensor]:
    """Seeded float64 embeddings of one layout: ``anchors``, ``positives`` (B, D) and, for the supervised layout,
    ``negatives`` (1, B, D). Positives are noisy copies of the anchors, hard negatives noisier ones, so that the
    tails are informative and λ is neither 0 nor 1."""
    g = torch.Generator().manual_seed(SEED + LAYOUTS.index(layout))
    rows = {"simcse": 64, "ntxent": 32, "supervised": 32}[layout]  # ntxent: 2N = 64 anchors; supervised: C = 64
    anchors = torch.randn(rows, 32, generator=g, dtype=torch.float64)  # (B, D)
    out = {"anchors": anchors, "positives": anchors + 1.0 * torch.randn(rows, 32, generator=g, dtype=torch.float64)}
    if layout == "supervised":
        out["negatives"] = (anchors + 1.5 * torch.randn(rows, 32, generator=g, dtype=torch.float64))[None]  # (1, B, D)
    return out


def make_loss(name: str, layout: str) -> ContrastiveLoss:
    layout_arg = "ntxent" if layout == "ntxent" else "simcse"
    temperature = 0.5 if layout == "ntxent" else 0.05  # SimCLR's and SimCSE's defaults
    weight = 0.5 if layout == "supervised" else 0.0  # w ≠ 0 so that it is pinned too
    if name == "infonce":
        return InfoNCELoss(temperature, layout=layout_arg, hard_negative_weight=weight)
    return WeinceLoss(temperature, layout=layout_arg, hard_negative_weight=weight, beta_mode=name.split("-")[1])


def _scores64(leaves: dict[str, torch.Tensor], layout: str) -> torch.Tensor:
    """Float64 cosine scores in the candidate order of :func:`score_matrix`."""
    a = F.normalize(leaves["anchors"], dim=-1)
    p = F.normalize(leaves["positives"], dim=-1)
    if layout == "ntxent":
        views = torch.cat([a, p])  # (2N, D): anchors are candidates too
        return views @ views.T
    negatives = [F.normalize(n, dim=-1) for n in leaves.get("negatives", [])]
    return a @ torch.cat([p, *negatives]).T  # (B, (1+k)B)


def compute(precision: str, layout: str, name: str, loss: ContrastiveLoss | None = None) -> dict[str, float]:
    """Loss value, λ and β means (WEINCE) and the gradient norm over all inputs, for one case."""
    loss = make_loss(name, layout) if loss is None else loss
    dtype = torch.float64 if precision == "float64" else torch.float32
    leaves = {k: v.to(dtype).requires_grad_() for k, v in make_inputs(layout).items()}
    negatives = leaves.get("negatives")
    if precision == "float32":
        value = loss(leaves["anchors"], leaves["positives"], negatives=negatives)
        diag = loss.last_diagnostics
        lam, beta = diag.get("lambda_mean"), diag.get("beta_mean")
    else:
        plain = {k: v.detach() for k, v in leaves.items()}
        lay = score_matrix(plain["anchors"], plain["positives"], loss.layout, negatives=plain.get("negatives"))
        scores = _scores64(leaves, layout)
        torch.testing.assert_close(scores.float(), lay.scores, rtol=0, atol=1e-6)  # the same candidate order
        value = loss.loss_from_scores(dataclasses.replace(lay, scores=scores))
        stats = getattr(loss, "last_statistics", None)
        lam, beta = (stats.lam.mean(), stats.beta.mean()) if stats is not None else (None, None)
    assert value.dtype == dtype
    value.backward()
    grad_sq = sum(leaf.grad.double().pow(2).sum() for leaf in leaves.values())
    out = {"loss": value.item(), "grad_norm": math.sqrt(float(grad_sq))}
    if lam is not None:
        out |= {"lambda_mean": float(lam), "beta_mean": float(beta)}
    return out


def input_checksums() -> dict[str, list[float]]:
    """Sum and sum of squares of each layout's inputs: if these differ, torch's generator changed, not a loss."""
    return {
        layout: [float(sum(v.sum() for v in x.values())), float(sum(v.pow(2).sum() for v in x.values()))]
        for layout, x in ((layout, make_inputs(layout)) for layout in LAYOUTS)
    }


def key(precision: str, layout: str, name: str) -> str:
    return f"{precision}/{layout}/{name}"


def regenerate() -> dict[str, Any]:
    return {
        "about": "Golden values of tests/losses/test_golden.py; regenerate: python -m tests.losses.test_golden "
        "--regenerate (and say why in the commit).",
        "generated_with": {"torch": torch.__version__, "python": platform.python_version()},
        "inputs": input_checksums(),
        "values": {key(*case): compute(*case) for case in CASES},
    }


def _stored() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def mismatches(got: dict[str, float], want: dict[str, float], precision: str) -> list[str]:
    """The quantities of a case outside the tolerance, described (empty: all within)."""
    if got.keys() != want.keys():
        return [f"quantities {sorted(got)} != stored {sorted(want)}"]
    rtol, atol = RTOL[precision], _ATOL[precision]
    return [
        f"{q}: {got[q]!r} vs stored {want[q]!r} (relative difference {abs(got[q] - want[q]) / abs(want[q]):.2e}, "
        f"tolerance {rtol:g})"
        for q in want
        if not math.isclose(got[q], want[q], rel_tol=rtol, abs_tol=atol)
    ]


def test_the_seeded_inputs_are_the_stored_ones() -> None:
    now = input_checksums()
    for layout, (total, squares) in _stored()["inputs"].items():
        (now_total, now_squares) = now[layout]
        same = math.isclose(now_total, total, abs_tol=1e-9) and math.isclose(now_squares, squares, rel_tol=1e-12)
        assert same, (
            f"torch.Generator's stream changed ({layout}): the inputs differ, so every golden value will; "
            "regenerate the file if that is the only change"
        )


def test_the_stored_file_holds_exactly_the_cases() -> None:
    stored = _stored()["values"]
    assert sorted(stored) == sorted(key(*case) for case in CASES)
    for case in CASES:  # WEINCE's blend is active: λ strictly inside (0, 1), else WEINCE = InfoNCE and pins nothing
        if case[2] != "infonce":
            assert 0.02 < stored[key(*case)]["lambda_mean"] < 0.98, case


@pytest.mark.parametrize(("precision", "layout", "name"), CASES, ids=[key(*case) for case in CASES])
def test_golden_values(precision: str, layout: str, name: str) -> None:
    got = compute(precision, layout, name)
    bad = mismatches(got, _stored()["values"][key(precision, layout, name)], precision)
    assert not bad, f"{key(precision, layout, name)} changed: " + "; ".join(bad) + " (see this module's docstring)"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_tolerance_catches_a_tiny_change(precision: str) -> None:
    """A test that cannot fail is a defect: τ moved by a relative 1e-8 (float64) or 1e-4 (float32) is flagged."""
    step = 1e-8 if precision == "float64" else 1e-4
    nudged = WeinceLoss(0.05 * (1 + step), beta_mode="ols")
    got = compute(precision, "simcse", "weince-ols", loss=nudged)
    assert mismatches(got, _stored()["values"][key(precision, "simcse", "weince-ols")], precision)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regenerate", action="store_true", help=f"write {GOLDEN.name} anew")
    args = parser.parse_args(argv)
    if args.regenerate:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(regenerate(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {GOLDEN}")
        return 0
    stored, failed = _stored()["values"], 0
    for case in CASES:
        got = compute(*case)
        bad = mismatches(got, stored[key(*case)], case[0])
        failed += bool(bad)
        worst = max(abs(got[q] - v) / max(abs(v), 1e-300) for q, v in stored[key(*case)].items())
        print(f"{key(*case):<32} max relative difference {worst:.2e}  {'CHANGED: ' + '; '.join(bad) if bad else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
