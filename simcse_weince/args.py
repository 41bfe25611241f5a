"""Argument groups of unsupervised SimCSE training (model, data, loss, training)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, fields

import torch
from transformers import TrainingArguments

from simcse_weince.losses import InfoNCELoss, WeinceLoss

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    model_name_or_path: str = field(
        default="bert-base-uncased", metadata={"help": "Hub name or local folder of the encoder."}
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer (default: the model's)."})
    init_from_config: bool = field(
        default=False, metadata={"help": "Random weights from the model's config (tiny CPU/test encoders)."}
    )
    config_overrides: str | None = field(
        default=None, metadata={"help": "Config changes, e.g. 'num_hidden_layers=2,hidden_size=128'."}
    )
    pooler: str = field(default="cls", metadata={"help": "cls | cls_before_pooler | avg | avg_first_last"})
    mlp_only_train: bool = field(default=True, metadata={"help": "With pooler cls: the MLP in training only."})

    def overrides(self) -> dict:
        """``config_overrides`` parsed into typed values."""
        out: dict = {}
        if not self.config_overrides:
            return out
        for item in self.config_overrides.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"config_overrides: expected 'key=value' items separated by commas, got {item!r}")
            out[key.strip()] = _typed(value.strip())
        return out


def _typed(value: str):
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(value.lower(), value)


@dataclass
class DataArguments:
    train_files: list[str] | None = field(
        default=None,
        metadata={
            "help": "Local text files, one sentence per line ('{data}/...' = the shared data folder). "
            "When unset, the Hub dataset below is used."
        },
    )
    hub_dataset: str = field(default="princeton-nlp/datasets-for-simcse", metadata={"help": "Hub dataset."})
    hub_data_file: str | None = field(default="wiki1m_for_simcse.txt", metadata={"help": "File in the dataset."})
    max_seq_length: int = field(default=32, metadata={"help": "Truncate sentences to this many tokens."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N sentences."})
    drop_unterminated_last_line: bool = field(
        default=False, metadata={"help": "Drop a last line without newline (a file cut off mid-line)."}
    )
    senteval_dir: str | None = field(
        default=None,
        metadata={
            "help": "SentEval data/downstream folder for STS-B dev/test (default: $SENTEVAL_DATA, the shared "
            "data folder, else the Hub)."
        },
    )
    eval_max_pairs: int | None = field(default=None, metadata={"help": "Evaluate on the first N STS-B dev pairs."})
    eval_test_at_end: bool = field(default=True, metadata={"help": "Score STS-B test with the final model."})
    eval_batch_size: int = field(default=128, metadata={"help": "Batch size of the STS encoder."})
    eval_before_training: bool = field(default=False, metadata={"help": "Also score STS-B before training."})
    model_card_note: str = field(default="", metadata={"help": "A paragraph added to the model card."})


_NOT_WEINCE_KWARGS = frozenset({"loss", "mask_duplicates", "beta_min", "beta_max"})


@dataclass
class LossArguments:
    loss: str = field(default="weince", metadata={"help": "weince | infonce"})
    temperature: float = 0.05
    beta_mode: str = field(default="ols", metadata={"help": "unit | ols | hill"})
    beta_min: float = 0.5
    beta_max: float = 16.0
    min_tail_points: int = 32
    tail_frac: float = 0.10
    burn: int | None = None
    q: float = 0.2
    kappa_rho: float = 10.0
    kappa_aic: float = 1.0
    margin: float = 2.0
    eps: float = 1e-6
    fixed_lambda: float | None = None
    gather_across_devices: bool = field(default=True, metadata={"help": "Negatives from all processes."})
    mask_duplicates: bool = field(default=True, metadata={"help": "Identical sentences are not negatives."})

    def build(self, layout: str = "simcse") -> InfoNCELoss | WeinceLoss:
        """The loss module: every field except ``loss``, ``mask_duplicates`` and the β clamp pair is passed
        to the loss constructor under its own name."""
        if self.loss == "infonce":
            return InfoNCELoss(self.temperature, layout=layout, gather_across_devices=self.gather_across_devices)
        if self.loss == "weince":
            kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_WEINCE_KWARGS}
            return WeinceLoss(layout=layout, beta_clamp=(self.beta_min, self.beta_max), **kwargs)
        raise ValueError(f"loss must be 'weince' or 'infonce', got {self.loss!r}")


@dataclass
class ContrastiveTrainingArguments(TrainingArguments):
    """``TrainingArguments`` shared by the text and vision trainers.

    * ``precision: auto`` means fp16 when CUDA exists, fp32 otherwise (``fp32`` | ``fp16`` | ``bf16`` force it);
    * ``push_to_hub`` uploads the *final* model folder once training has finished (not every checkpoint), so a
      run without network loses nothing;
    * a multi-process launch on a machine without CUDA runs its processes on the CPU with gloo.
    """

    remove_unused_columns: bool = False
    ddp_find_unused_parameters: bool | None = False
    precision: str = field(default="auto", metadata={"help": "auto (fp16 on CUDA) | fp32 | fp16 | bf16"})
    push_final_model: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.precision not in ("auto", "fp32", "fp16", "bf16"):
            raise ValueError(f"precision must be auto, fp32, fp16 or bf16, got {self.precision!r}")
        if not (self.fp16 or self.bf16):
            if self.precision == "auto":
                self.fp16 = torch.cuda.is_available()
            else:
                self.fp16, self.bf16 = self.precision == "fp16", self.precision == "bf16"
        self.push_final_model, self.push_to_hub = self.push_to_hub, False
        if not self.use_cpu and not torch.cuda.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            # A multi-process launch (accelerate --multi_gpu, torchrun) on a machine without CUDA: run the
            # processes on the CPU with gloo instead of falling back to N independent single-process runs.
            self.use_cpu = True
        super().__post_init__()


@dataclass
class SimCSETrainingArguments(ContrastiveTrainingArguments):
    """Training arguments with the unsupervised SimCSE defaults (batch 64, lr 3e-5, 1 epoch, STS-B dev every
    125 steps, best checkpoint kept)."""

    output_dir: str | None = field(default="outputs/simcse", metadata={"help": "Where checkpoints and the model go."})
    per_device_train_batch_size: int = 64
    learning_rate: float = 3e-5
    num_train_epochs: float = 1.0
    eval_strategy: str = "steps"
    eval_steps: float | None = 125
    save_strategy: str = "steps"
    save_steps: float = 125
    save_total_limit: int | None = 2
    load_best_model_at_end: bool = True
    metric_for_best_model: str | None = "stsb_spearman"
    greater_is_better: bool | None = True
    logging_steps: float = 25
