"""WEINCE's per-anchor statistics (beta, rho_0) at the true vectors of the ground-truth endpoint universe.

Reproduces the sentence of docs/results.md "Ground truth II": "at the true endpoint vectors, beta 3.00 and rho_0 0.095
over the universe against 2.54 and 0.172 over 64 negatives". The universe is the negatives sweep's (settings of
experiments/results/ground_truth/negatives.settings.json: 512 items, d = 8, endpoint kernel beta* = 3, seeds 0-2 ->
universe seed 10_007 + seed). The table is the true latent vectors. WEINCE at its shipped defaults (beta mode ols,
q = 0.2); tau does not enter lambda or beta.

* "universe": each anchor's statistics over its N - 1 other items, as the search posterior of the sweeps computes them
  (weince_lab.simulation.search.model_log_posterior: a padded, excluded first column plus the anchor excluded).
* "64 negatives": as training computes them (weince_lab.simulation.learning._fit / batch_scores): batches of 256
  anchors from the training pairs, the positive in column 0 and 64 uniform negatives; means over 200 batches.

python experiments/results/diagnostics/weince_statistics_universe/compute.py > \
    experiments/results/diagnostics/weince_statistics_universe/output.json
"""

from __future__ import annotations

import json

import torch

from simcse_weince.losses import loss_class
from simcse_weince.losses.layout import ScoreMatrix
from weince_lab.simulation.learning import batch_scores
from weince_lab.simulation.universe import kernel_law, make_universe

SETTINGS = {"items": 512, "dim": 8, "kappa": 10.0, "beta": 3.0, "blend_lambda": 0.5}
BATCHES, BATCH, K = 200, 256, 64


def universe_statistics(vectors: torch.Tensor, loss) -> dict[str, float]:
    n = vectors.shape[0]
    scores = (vectors @ vectors.T).clamp(-1.0, 1.0).float()  # (N, N)
    excluded = torch.eye(n, dtype=torch.bool)
    padded = torch.cat([torch.zeros(n, 1), scores], dim=1)
    mask = torch.cat([torch.ones(n, 1, dtype=torch.bool), excluded], dim=1)
    lay = ScoreMatrix(scores=padded, positive_index=torch.zeros(n, dtype=torch.long), self_mask=mask,
                      user_mask=torch.zeros_like(mask), num_negatives=n - 1)  # fmt: skip
    st = loss.statistics(lay)
    return {"beta_mean": float(st.beta.mean()), "beta_ols_mean": float(st.beta_ols.mean()),
            "rho0": float(st.rho0), "lambda_frac_gt_half": float((st.lam > 0.5).float().mean())}  # fmt: skip


def training_statistics(universe, loss, seed: int) -> dict[str, float]:
    gen = torch.Generator().manual_seed(2 * seed)
    anchors_all, positives_all = universe.sample_pairs(100_000, gen)
    betas, rho0s, fracs = [], [], []
    for _ in range(BATCHES):
        rows = torch.randint(0, 100_000, (BATCH,), generator=gen)
        anchors = anchors_all[rows]
        negatives = universe.sample_negatives(anchors, K, gen)
        candidates = torch.cat([positives_all[rows, None], negatives], dim=1)
        st = loss.statistics(batch_scores(universe.vectors.float(), anchors, candidates))
        betas.append(float(st.beta.mean()))
        rho0s.append(float(st.rho0))
        fracs.append(float((st.lam > 0.5).float().mean()))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"beta_mean": mean(betas), "rho0": mean(rho0s), "lambda_frac_gt_half": mean(fracs)}


def main() -> None:
    loss = loss_class("weince")(0.1)
    law = kernel_law("endpoint", SETTINGS["kappa"], SETTINGS["beta"], SETTINGS["blend_lambda"])
    out = {"settings": SETTINGS | {"batches": BATCHES, "batch": BATCH, "k": K, "loss": loss.get_config_dict()},
           "seeds": {}}  # fmt: skip
    for seed in (0, 1, 2):
        universe = make_universe(SETTINGS["items"], SETTINGS["dim"], law, seed=10_007 + seed, name="endpoint")
        out["seeds"][seed] = {"universe": universe_statistics(universe.vectors, loss),
                              "64_negatives": training_statistics(universe, loss, seed)}  # fmt: skip
    for where in ("universe", "64_negatives"):
        vals = [out["seeds"][s][where] for s in (0, 1, 2)]
        out[f"mean_over_seeds_{where}"] = {k: sum(v[k] for v in vals) / 3 for k in vals[0]}
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
