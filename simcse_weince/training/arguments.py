"""Argument groups shared by the text and vision recipes: the loss and the training arguments.

Every field is checked when the configuration is parsed (``__post_init__``), so an invalid value stops the
run before any model or data is loaded: choices are ``Literal`` types (``--help`` lists them, argparse
rejects others on the command line) and are checked again for values that come from a YAML file, and the
loss's ranges are checked by building the loss.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Literal, get_args

import torch
from transformers import TrainingArguments

from simcse_weince.losses import InfoNCELoss, WeinceLoss
from simcse_weince.losses.layout import Layout

LossName = Literal["weince", "infonce"]
BetaMode = Literal["unit", "ols", "hill"]
Precision = Literal["auto", "fp32", "fp16", "bf16"]


def check_choice(name: str, value: object, choices: object) -> None:
    """``ValueError`` naming the field, the value and the allowed choices of a ``Literal`` type."""
    allowed = get_args(choices)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))}; got {value!r}")


def check_at_least(name: str, value: float | None, minimum: float) -> None:
    if value is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value!r}")


_NOT_WEINCE_KWARGS = frozenset({"loss", "mask_duplicates", "beta_min", "beta_max"})


@dataclass
class LossArguments:
    """The contrastive loss and its WEINCE knobs (spec names; see :class:`WeinceLoss`)."""

    loss: LossName = field(default="weince", metadata={"help": "weince | infonce"})
    temperature: float = field(default=0.05, metadata={"help": "τ > 0 dividing the cosine similarities."})
    beta_mode: BetaMode = field(default="ols", metadata={"help": "unit | ols | hill"})
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

    def __post_init__(self) -> None:
        check_choice("loss", self.loss, LossName)
        check_choice("beta_mode", self.beta_mode, BetaMode)
        self.build("simcse")  # the loss's own range checks (temperature > 0, q in [0, 1], ...)

    def build(self, layout: Layout = "simcse") -> InfoNCELoss | WeinceLoss:
        """The loss module: every field except ``loss``, ``mask_duplicates`` and the β clamp pair is passed
        to the loss constructor under its own name."""
        if self.loss == "infonce":
            # The WEINCE knobs are still validated: a typo must not pass silently because it is unused.
            self._weince(layout)
            return InfoNCELoss(self.temperature, layout=layout, gather_across_devices=self.gather_across_devices)
        return self._weince(layout)

    def _weince(self, layout: Layout) -> WeinceLoss:
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_WEINCE_KWARGS}
        return WeinceLoss(layout=layout, beta_clamp=(self.beta_min, self.beta_max), **kwargs)


@dataclass
class ContrastiveTrainingArguments(TrainingArguments):
    """``TrainingArguments`` shared by the text and vision trainers.

    * ``precision: auto`` means fp16 when CUDA exists, fp32 otherwise (``fp32`` | ``fp16`` | ``bf16`` force it);
    * ``push_to_hub`` keeps the Trainer's meaning (checkpoints pushed per ``hub_strategy``); the exported model
      folder is pushed at the end; the Hub is checked before anything loads (``hub_push_optional`` turns a
      failed check into a local-only run that records the error);
    * a multi-process launch on a machine without CUDA runs its processes on the CPU with gloo;
    * ``gradient_cache_chunk_size`` turns on gradient caching: batches larger than it are embedded that many
      examples at a time, so activation memory is that of a chunk whatever the batch (exact for
      per-sample normalisation; batch norm sees chunk statistics).
    """

    remove_unused_columns: bool = False
    ddp_find_unused_parameters: bool | None = False
    precision: Precision = field(default="auto", metadata={"help": "auto (fp16 on CUDA) | fp32 | fp16 | bf16"})
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Train into an output_dir that holds a previous run (its checkpoints may be replaced)."},
    )
    gradient_cache_chunk_size: int | None = field(
        default=None,
        metadata={
            "help": "Gradient caching: embed the batch this many examples (both views) at a time, compute the "
            "full-batch loss and its gradient, then re-run each chunk with gradient and its dropout masks. "
            "Memory of one chunk, about one extra forward of time (default: off)."
        },
    )
    hub_push_optional: bool = field(
        default=False,
        metadata={
            "help": "With push_to_hub: if the Hub cannot be written, train anyway, keep everything local "
            "and record the error in results.json (default: stop before loading anything)."
        },
    )

    def __post_init__(self) -> None:
        check_choice("precision", self.precision, Precision)
        check_at_least("per_device_train_batch_size", self.per_device_train_batch_size, 1)
        check_at_least("per_device_eval_batch_size", self.per_device_eval_batch_size, 1)
        check_at_least("gradient_accumulation_steps", self.gradient_accumulation_steps, 1)
        self._check_gradient_cache()
        if not (self.fp16 or self.bf16):
            if self.precision == "auto":
                self.fp16 = torch.cuda.is_available()
            else:
                self.fp16, self.bf16 = self.precision == "fp16", self.precision == "bf16"
        self.hub_error: str | None = None  # set when an optional Hub push was turned off by a failed check
        if not self.use_cpu and not torch.cuda.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            # A multi-process launch (accelerate --multi_gpu, torchrun) on a machine without CUDA: run the
            # processes on the CPU with gloo instead of falling back to N independent single-process runs.
            self.use_cpu = True
        super().__post_init__()
        processes = int(os.environ.get("WORLD_SIZE", "1"))
        if self.per_device_train_batch_size * processes < 2:
            raise ValueError(
                f"a contrastive batch needs at least 2 rows: per_device_train_batch_size "
                f"{self.per_device_train_batch_size} × {processes} process(es)"
            )

    def _check_gradient_cache(self) -> None:
        check_at_least("gradient_cache_chunk_size", self.gradient_cache_chunk_size, 1)
        if self.gradient_cache_chunk_size is None:
            return
        if self.ddp_static_graph:
            # a static graph expects one forward and one backward per step; the cache runs one per chunk
            raise ValueError("gradient_cache_chunk_size does not work with ddp_static_graph; unset one of them")
        for name in ("deepspeed", "fsdp"):
            if getattr(self, name, None):
                raise ValueError(
                    f"gradient_cache_chunk_size is not supported with {name} (its backward is not the plain "
                    f"autograd backward the cache replays into); got {name}={getattr(self, name)!r}"
                )
        gpus = torch.cuda.device_count()
        if gpus > 1 and not self.use_cpu and int(os.environ.get("WORLD_SIZE", "1")) == 1:
            # One process on several GPUs is DataParallel: its replicas draw dropout from generators the
            # replay does not restore, so the re-run chunks would see other masks than the cached pass.
            raise ValueError(
                f"gradient_cache_chunk_size needs one process per GPU, but this single process sees {gpus} GPUs "
                "(DataParallel); launch with `accelerate launch --multi_gpu --num_processes N` or set "
                "CUDA_VISIBLE_DEVICES to one GPU"
            )

    def __getstate__(self) -> dict:
        # The Trainer pickles its arguments next to every checkpoint (training_args.bin): secrets stay out.
        state = dict(self.__dict__)
        state["hub_token"] = None
        return state

    @property
    def precision_name(self) -> str:
        """The precision actually used: ``fp16``, ``bf16`` or ``fp32``."""
        return "fp16" if self.fp16 else "bf16" if self.bf16 else "fp32"
