"""``ContrastiveTrainer``: what the text and vision trainers share — the loss module and its diagnostics.

Subclasses override ``compute_loss`` (how a batch becomes anchors and positives) and ``evaluate`` (the
model-selection metric). This base only accumulates the loss's per-batch diagnostics (0-d tensors, no host
sync per step) and adds their averages to each training log in the ``log`` hook.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer

from simcse_weince.losses.base import ContrastiveLoss

DIAGNOSTIC_KEYS = ("lambda_mean", "lambda_frac_gt_half", "beta_mean", "rho_mean", "delta_aic_mean")


class ContrastiveTrainer(Trainer):
    """A ``Trainer`` holding a contrastive loss module and logging its diagnostics.

    Args:
        loss: :class:`InfoNCELoss` or :class:`WeinceLoss`.
        *args, **kwargs: as for ``transformers.Trainer``.
    """

    def __init__(self, *args: Any, loss: ContrastiveLoss, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.contrastive_loss = loss
        self._diag_sums: dict[str, torch.Tensor] = {}
        self._diag_steps = 0

    @torch.no_grad()
    def accumulate_diagnostics(self, extra: dict[str, torch.Tensor] | None = None) -> None:
        """Add the last forward's diagnostics (and ``extra`` counters) to the running sums."""
        diag = {k: v for k, v in self.contrastive_loss.last_diagnostics.items() if k in DIAGNOSTIC_KEYS}
        diag.update(extra or {})
        for k, v in diag.items():
            self._diag_sums[k] = self._diag_sums.get(k, 0) + v.detach().float()
        self._diag_steps += 1

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # Training logs (they carry "loss") get the diagnostics averaged over the micro-steps since the last
        # log; this is the only host sync they cost.
        if "loss" in logs and self._diag_steps:
            for k, v in self._diag_sums.items():
                logs[k] = round(float(v) / self._diag_steps, 6)
            self._diag_sums, self._diag_steps = {}, 0
            self.log_histograms()
        super().log(logs, start_time)

    def log_histograms(self) -> None:
        """λ and β of the last batch as TensorBoard histograms, when TensorBoard reporting is on."""
        stats = getattr(self.contrastive_loss, "last_statistics", None)
        if stats is None or not self.is_world_process_zero():
            return
        for cb in self.callback_handler.callbacks:
            writer = getattr(cb, "tb_writer", None)
            if writer is not None:
                step = self.state.global_step
                writer.add_histogram("weince/lambda", stats.lam.detach().float().cpu(), step)
                writer.add_histogram("weince/beta", stats.beta.detach().float().cpu(), step)
