"""Argument groups shared by the text and vision recipes: the loss and the training arguments.

Every field is checked when the configuration is parsed (``__post_init__``), so an invalid value stops the
run before any model or data is loaded: choices are ``Literal`` types (``--help`` lists them, argparse
rejects others on the command line) and are checked again for values that come from a YAML file, and the
loss knobs' ranges are checked by the registered losses' configs (``Config`` of each class in
:data:`~simcse_weince.losses.LOSSES`) and :class:`~simcse_weince.losses.topm.TopMConfig`, which also own their
defaults and help texts (``LossArguments`` is generated from their fields).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, make_dataclass
from datetime import timedelta
from typing import Any, Literal, get_origin, get_type_hints

import torch
from transformers import TrainingArguments

from simcse_weince.core import checks
from simcse_weince.core.checks import check_at_least, check_choice
from simcse_weince.losses import LOSSES, ContrastiveLoss, WithTopMTerms, loss_configs
from simcse_weince.losses.base import check_hard_negative_weight
from simcse_weince.losses.layout import Layout
from simcse_weince.losses.topm import TopMConfig
from simcse_weince.losses.weince import BetaMode as BetaMode  # re-exported: the CLIs' choices of beta_mode
from simcse_weince.losses.weince import WeinceConfig
from simcse_weince.training.hub import check_repo_id, repo_name

LossName = Literal[tuple(LOSSES)]  # type: ignore[valid-type]  # the registry's names: --help lists them
Precision = Literal["auto", "fp32", "fp16", "bf16"]


def shared_defaults() -> dict[str, dict[str, Any]]:
    """The knobs that several registered losses declare with different defaults: ``{knob: {loss name: its
    default}}`` (``temperature``: WEINCE's 0.05, the sigmoid loss's 0.1, ...)."""
    seen: dict[str, dict[str, Any]] = {}
    for name, cls in LOSSES.items():
        for f in fields(cls.Config):
            seen.setdefault(f.name, {})[name] = f.default
    return {knob: by_loss for knob, by_loss in seen.items() if len(set(map(repr, by_loss.values()))) > 1}


class _LossArgumentsMethods:
    """The behaviour of :data:`LossArguments`; its fields are generated from the registered losses' configs."""

    def __post_init__(self) -> None:
        check_choice("loss", self.loss, LossName)
        for name, by_loss in shared_defaults().items():  # a shared knob left unset: the chosen loss's default
            if getattr(self, name) is None:
                setattr(self, name, by_loss.get(self.loss, next(iter(by_loss.values()))))
        for f in fields(self):
            if get_origin(f.type) is Literal:  # loss, beta_mode: also for values that come from a YAML file
                check_choice(f.name, getattr(self, f.name), f.type)
        # Every loss's knobs are checked, also those the chosen loss does not read (a typo in a WEINCE knob must
        # not pass silently because the run uses InfoNCE); and the extra terms' ranges, likewise.
        for config in loss_configs():
            self.config_of(config)
        # Finite, checked here at parse time; 0 for a layout without hard negatives, checked by the loss in build().
        check_hard_negative_weight(self.hard_negative_weight)

    def config_of(self, config: type) -> Any:
        """The ``config`` dataclass with these arguments' values of its fields."""
        return config(**{f.name: getattr(self, f.name) for f in fields(config)})

    def weince_config(self) -> WeinceConfig:
        """The WEINCE knobs of these arguments (every :class:`WeinceConfig` field, under its own name)."""
        return self.config_of(WeinceConfig)

    def terms_config(self) -> TopMConfig:
        """The extra top-M terms' knobs of these arguments (every :class:`TopMConfig` field, under its own name)."""
        return self.config_of(TopMConfig)

    def build(self, layout: Layout = "simcse") -> ContrastiveLoss:
        """The chosen loss (``LOSSES[loss]`` from its ``Config``) with ``layout`` and ``gather_across_devices``,
        wrapped with the top-M terms when one of their weights is > 0."""
        cls = LOSSES[self.loss]
        loss = cls.from_config(
            self.config_of(cls.Config),
            layout=layout,
            gather_across_devices=self.gather_across_devices,
            hard_negative_weight=self.hard_negative_weight,  # the loss checks it against the layout
        )
        terms = self.terms_config()
        return WithTopMTerms(loss, terms) if terms.active else loss


def _loss_argument_fields() -> list[tuple[str, Any, Any]]:
    """``loss``, then every field of the registered losses' configs and of :class:`TopMConfig` (its real type,
    default and help text; the range checks stay in those configs; a field two losses share, such as
    ``temperature``, once), then the switches that are not loss knobs.

    A shared field must have one type in every config; its default may differ (a loss declares its own, as the
    sigmoid loss its τ = 0.1): the argument's default is then ``None``, read as the chosen loss's default
    (:func:`shared_defaults`, resolved when the arguments are made)."""
    knobs: dict[str, tuple[str, Any, Any]] = {}
    per_loss = shared_defaults()
    for config in loss_configs():
        hints = get_type_hints(config)  # real types, so that HfArgumentParser sees Literal / int | None
        for f in fields(config):
            if f.name in knobs:  # one setting of two losses: it must mean the same in both
                if knobs[f.name][1] != hints[f.name] and knobs[f.name][1] != hints[f.name] | None:
                    raise TypeError(f"{config.__name__}.{f.name} differs from another loss's field of that name")
                continue
            if f.name in per_loss:
                values = list(per_loss[f.name].values())
                usual = max(values, key=values.count)
                others = "".join(f", {name} {v}" for name, v in per_loss[f.name].items() if v != usual)
                help_text = f"{f.metadata['help']} Default: the loss's own ({usual}{others})."
                knobs[f.name] = (f.name, hints[f.name] | None, field(default=None, metadata={"help": help_text}))
            else:
                knobs[f.name] = (f.name, hints[f.name], field(default=f.default, metadata={"help": f.metadata["help"]}))
    names = " | ".join(f"{name} ({cls.display_name})" for name, cls in LOSSES.items())
    return [
        ("loss", LossName, field(default="weince", metadata={"help": f"The contrastive loss: {names}."})),
        *knobs.values(),
        ("gather_across_devices", bool, field(default=True, metadata={"help": "Negatives from all processes."})),
        ("mask_duplicates", bool, field(default=True, metadata={"help": "Identical sentences are not negatives."})),
        (
            "hard_negative_weight",
            float,
            field(
                default=0.0,
                metadata={
                    "help": "SimCSE's hard_negative_weight: added to the logit of each anchor's own hard negative(s) "
                    "(supervised rows; 0, SimCSE's default, adds nothing)."
                },
            ),
        ),
    ]


LossArguments = make_dataclass(
    "LossArguments",
    _loss_argument_fields(),
    bases=(_LossArgumentsMethods,),
    namespace={
        "__module__": __name__,
        "__doc__": "The contrastive loss and its knobs: one field per field of the registered losses' configs and "
        "of :class:`TopMConfig` (same name, type, default and help), plus ``loss``, ``gather_across_devices``, "
        "``mask_duplicates`` and ``hard_negative_weight``.",
    },
)


def accelerator_available() -> bool:
    """Whether torch sees an accelerator (CUDA, MPS, XPU, ...) that pinned host memory can feed."""
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    return accelerator.is_available() if accelerator is not None else torch.cuda.is_available()


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
    resume_allow_changes: str | None = field(
        default=None,
        metadata={
            "help": "Settings a resumed checkpoint may differ in, comma-separated (e.g. max_steps,num_train_epochs "
            "to train longer), or 'all'; any other difference from the checkpoint's run is refused."
        },
    )
    loss_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Learning rate of the loss's own trainable parameters, in their own parameter group without "
            "weight decay (a loss without parameters has none; default: learning_rate)."
        },
    )
    loss_weight_decay: float = field(
        default=0.0, metadata={"help": "Weight decay of the loss's own trainable parameters (default 0)."}
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
        checks.optional(checks.positive_finite)("loss_learning_rate", self.loss_learning_rate)
        checks.non_negative()("loss_weight_decay", self.loss_weight_decay)
        self._check_optimizer()
        self._check_schedule()
        self._check_hub_id()
        self._check_output_dir()
        self._check_engine()
        self._check_gradient_cache()
        self._check_stop_handling()
        if not (self.fp16 or self.bf16):
            if self.precision == "auto":
                self.fp16 = torch.cuda.is_available()
            else:
                self.fp16, self.bf16 = self.precision == "fp16", self.precision == "bf16"
        if not self.use_cpu and not torch.cuda.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            # A multi-process launch (accelerate --multi_gpu, torchrun) on a machine without CUDA: run the
            # processes on the CPU with gloo instead of falling back to N independent single-process runs.
            self.use_cpu = True
        self._start_cpu_process_group()
        super().__post_init__()
        if self.dataloader_pin_memory and (self.use_cpu or not accelerator_available()):
            self.dataloader_pin_memory = False  # pinning needs an accelerator (torch warns on every loader)
        processes = int(os.environ.get("WORLD_SIZE", "1"))
        if self.per_device_train_batch_size * processes < 2:
            raise ValueError(
                f"a contrastive batch needs at least 2 rows: per_device_train_batch_size "
                f"{self.per_device_train_batch_size} × {processes} process(es)"
            )

    def _check_optimizer(self) -> None:
        """The optimizer's numbers in their ranges (the Trainer would take a negative learning rate, or a negative
        max_grad_norm as "no clipping", silently; torch's AdamW refuses bad betas only once the model is loaded)."""
        for name in ("learning_rate", "weight_decay", "adam_epsilon", "max_grad_norm"):
            check_at_least(name, getattr(self, name), 0.0)
        for name in ("adam_beta1", "adam_beta2"):
            checks.check_in(name, getattr(self, name), checks.within(0, 1, open_high=True))

    def _check_hub_id(self) -> None:
        """The Hub repository's id in the form the Hub accepts, before the Hub is asked for a token: the
        ``hub_model_id``, or the output folder's name that stands for it when pushing (or resuming from the Hub)."""
        if self.hub_model_id is not None:
            check_repo_id(self.hub_model_id)
        elif self.push_to_hub or str(self.resume_from_checkpoint).lower() == "hub":
            try:
                check_repo_id(repo_name(None, str(self.output_dir)), "the output folder's name")
            except ValueError as err:
                raise ValueError(
                    f"{err} (without hub_model_id the Hub repository is named after output_dir); set hub_model_id"
                ) from err

    def _check_schedule(self) -> None:
        """A schedule that trains nothing is an error (the Trainer would run 1 step for ``max_steps 0``, and
        export the untrained model as trained for ``num_train_epochs 0``)."""
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"max_steps must be > 0, or -1 to train for num_train_epochs (> 0); got {self.max_steps}")
        if self.max_steps == -1 and not self.num_train_epochs > 0:
            raise ValueError(
                f"num_train_epochs must be > 0 when max_steps is -1 (or set max_steps > 0); got {self.num_train_epochs}"
            )

    def _check_output_dir(self) -> None:
        """An ``output_dir`` that is a file (or lies under one) cannot become the run's folder."""
        if not self.output_dir:
            return
        path = existing = os.path.expanduser(str(self.output_dir))
        while not os.path.exists(existing) and os.path.dirname(existing) not in ("", existing):
            existing = os.path.dirname(existing)  # the nearest part of the path that exists
        if os.path.exists(existing) and not os.path.isdir(existing):
            where = "is a file" if existing == path else f"lies under {existing}, a file"
            raise ValueError(f"output_dir {path} {where}; expected a folder")

    def _check_stop_handling(self) -> None:
        """The run's own ``SIGTERM`` handling is the only one (:mod:`~simcse_weince.training.signals`).

        transformers' ``enable_jit_checkpoint`` installs its own ``SIGTERM`` handler over the run's: a signal then
        saves a checkpoint and ends the loop as if training had finished (the model is exported, exit 0, no
        ``stopped:`` line), and resuming that checkpoint can fail. Refused before anything loads.
        """
        if getattr(self, "enable_jit_checkpoint", False):
            raise ValueError(
                "enable_jit_checkpoint is not supported: its SIGTERM handler replaces the run's own, which already "
                "saves a checkpoint at the next step on SIGTERM and ends in a stopped: line (Ctrl-C keeps the last "
                "complete checkpoint); drop --enable_jit_checkpoint"
            )

    def _start_cpu_process_group(self) -> None:
        """Start the process group of a multi-process CPU run (gloo) with ``ddp_timeout``.

        transformers hands ``ddp_timeout`` to the process group on GPUs only; with ``use_cpu`` the group would keep
        torch's default (30 minutes), so a machine that hangs without closing its connections would hold the others
        for half an hour whatever ``--ddp_timeout`` says. accelerate then finds the group started and uses it.
        """
        import torch.distributed as dist

        if not (self.use_cpu and int(os.environ.get("WORLD_SIZE", "1")) > 1 and dist.is_available()):
            return
        if not dist.is_initialized():
            dist.init_process_group(backend=self.ddp_backend or "gloo", timeout=timedelta(seconds=self.ddp_timeout))

    def _check_engine(self) -> None:
        """DDP only (one process per device, torchrun or accelerate): DeepSpeed and FSDP are refused before anything
        loads, whether asked for by a setting or by the launcher (``accelerate launch --use_deepspeed/--use_fsdp`` or
        a config naming them set ``ACCELERATE_USE_DEEPSPEED`` / ``ACCELERATE_USE_FSDP``)."""
        asked = {
            "deepspeed": bool(self.deepspeed) or os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true",
            "fsdp": bool(self.fsdp) or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true",
        }
        for name, on in asked.items():
            if on:
                raise ValueError(
                    f"{name} is not supported: the loss gathers every process's embeddings as full replicas (in-batch "
                    "negatives across devices), the gradient cache replays a plain autograd backward, and a loss's own "
                    f"parameters train outside the model in their own optimizer group, none of which {name} keeps; "
                    "launch with DDP instead (accelerate launch --multi_gpu, or torchrun), one process per device"
                )

    def _check_gradient_cache(self) -> None:
        check_at_least("gradient_cache_chunk_size", self.gradient_cache_chunk_size, 1)
        if self.gradient_cache_chunk_size is None:
            return
        if self.ddp_static_graph:
            # a static graph expects one forward and one backward per step; the cache runs one per chunk
            raise ValueError("gradient_cache_chunk_size does not work with ddp_static_graph; unset one of them")
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
