"""A loss with one trainable scalar, and a tiny run of it under :class:`ContrastiveTrainer` (used by
``test_loss_parameters.py``, in this process or in each process of an ``accelerate launch``):

    python -m accelerate.commands.launch --multi_gpu --num_processes 2 scalar_loss_run.py OUT_DIR [LOSS ...]

The loss is InfoNCE with a learned scale, logits ``e^{θ}·s/τ``: θ gets a gradient on every step, so a wrong
optimizer group, a lost checkpoint state or unreduced gradients all show in θ. Each ``LOSS`` names a loss to run in
turn: ``scaled_infonce`` (that loss) or a registered one (``learned_link``, ``profiled_link``, ...), built at
τ = 0.5 with its defaults.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import field
from pathlib import Path

import torch
from torch import nn

from simcse_weince.core import checks
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import ScoreMatrix, masked_cross_entropy

ROWS, DIM = 16, 6  # one global batch of 16 rows a step: every process count sees the same global batch


@dataclasses.dataclass(frozen=True)
class ScaledConfig:
    temperature: float = field(default=0.5, metadata=checks.setting(checks.positive, "τ > 0."))
    init_log_scale: float = field(default=0.0, metadata=checks.setting(checks.finite, "θ at the start."))

    def __post_init__(self) -> None:
        checks.check_fields(self)


class ScaledInfoNCE(ContrastiveLoss):
    """InfoNCE with logits ``e^{θ}·s/τ`` and θ a trainable scalar (``log_scale``)."""

    name = "scaled_infonce"
    display_name = "Scaled InfoNCE"
    Config = ScaledConfig
    diagnostic_keys = ("scale",)

    def __init__(self, temperature: float = 0.5, init_log_scale: float = 0.0, **common) -> None:
        super().__init__(temperature, **common)
        self.log_scale = nn.Parameter(torch.tensor(float(init_log_scale)))

    def loss_from_scores(self, lay: ScoreMatrix) -> torch.Tensor:
        self.last_diagnostics = {"scale": self.log_scale.detach().exp()}
        logits = lay.scores * self.log_scale.exp() / self.temperature
        return masked_cross_entropy(logits, lay, self.hard_negative_weight)


class TinyEncoder(nn.Module):
    """A linear map of two views of each row (the row, and the row plus its fixed noise)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(DIM, 4)

    def forward(self, x: torch.Tensor, noise: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"anchors": self.proj(x), "positives": self.proj(x + noise)}


def rows() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x, noise = torch.randn(ROWS, DIM, generator=g), 0.3 * torch.randn(ROWS, DIM, generator=g)
    return [{"x": x[i], "noise": noise[i]} for i in range(ROWS)]


def build_loss(name: str, world: int) -> ContrastiveLoss:
    """:class:`ScaledInfoNCE` (``scaled_infonce``) or the registered loss ``name``, at τ = 0.5."""
    if name == ScaledInfoNCE.name:
        return ScaledInfoNCE(0.5, gather_across_devices=world > 1)
    from simcse_weince.losses import loss_class

    return loss_class(name)(temperature=0.5, gather_across_devices=world > 1)


def trainer(out: Path, world: int = 1, loss: str = ScaledInfoNCE.name, evaluator=None, **overrides):
    """A :class:`ContrastiveTrainer` of :class:`TinyEncoder` with ``loss`` (:func:`build_loss`), one global batch
    of :data:`ROWS` a step, checkpoints every 3 steps (and ``evaluator``, if given)."""
    from simcse_weince.training.arguments import ContrastiveTrainingArguments
    from simcse_weince.training.trainer import ContrastiveTrainer

    settings = dict(
        output_dir=str(out), per_device_train_batch_size=ROWS // world, max_steps=6, save_steps=3,
        learning_rate=0.05, loss_learning_rate=0.2, weight_decay=0.1, lr_scheduler_type="constant",
        logging_steps=1, report_to="none", use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, seed=0,
        save_only_model=False,
    )  # fmt: skip
    args = ContrastiveTrainingArguments(**(settings | overrides))
    return ContrastiveTrainer(
        model=TinyEncoder(), args=args, train_dataset=rows(), loss=build_loss(loss, world), evaluator=evaluator
    )


def outcome(t) -> dict:
    """The loss's state (θ for :class:`ScaledInfoNCE`) and the model's weights after training, as lists (JSON)."""
    loss = t.contrastive_loss
    return {
        **({"log_scale": loss.log_scale.item()} if isinstance(loss, ScaledInfoNCE) else {}),
        "loss_state": {k: v.flatten().tolist() for k, v in loss.state_dict().items()},
        "weights": {k: v.flatten().tolist() for k, v in t.model.state_dict().items()},
        "logged_scale": [e["scale"] for e in t.state.log_history if "scale" in e],
    }


def main() -> None:
    out = Path(sys.argv[1])
    for name in sys.argv[2:] or [ScaledInfoNCE.name]:  # one launch, one run per loss in turn
        t = trainer(out / f"run_{name}", world=int(os.environ.get("WORLD_SIZE", "1")), loss=name)
        t.train()
        world = t.args.world_size
        if t.args.process_index == 0:
            (out / f"outcome_{name}_{world}.json").write_text(json.dumps(outcome(t)), encoding="utf-8")
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
