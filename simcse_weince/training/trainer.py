"""``ContrastiveTrainer``: the one trainer skeleton of the text and vision recipes.

It overrides only Trainer hooks:

* ``compute_loss`` — ``embed_views`` (model + batch -> ``anchors``, ``positives``, and ``negatives`` for rows
  with hard negatives), ``absent_negatives`` (rows without a hard negative, pairs among triplets),
  ``negative_mask`` (which candidates are known false negatives, e.g. duplicate sentences), then the
  contrastive loss; the loss's
  per-batch diagnostics are accumulated (0-d tensors, no host sync per step). With
  ``gradient_cache_chunk_size`` set, training batches larger than a chunk are embedded chunk by chunk and
  the loss comes back with a gradient-cached backward (:mod:`simcse_weince.training.grad_cache`): the
  Trainer's own ``accelerator.backward`` replays the chunks, so accumulation, loss scaling and DDP behave as
  uncached;
* ``evaluation_loop`` — runs an *evaluator*: a callable ``evaluator(model) -> {name: value}`` (STS-B dev
  Spearman, k-NN accuracy, ...), as sentence-transformers' trainer does, so the Trainer's own ``evaluate``
  adds the prefix and runtime, logs, calls the callbacks and drives model selection;
* ``log`` — adds the diagnostics, averaged since the last training log, to each training log;
* ``_save_checkpoint`` / ``_load_optimizer_and_scheduler`` — also save and restore the loss's running state
  (``loss_state.pt``, the top-M Weibit term's β_t; absent for a loss without one), so that a resume is exact.

The training loop, checkpointing, resuming, mixed precision and multi-process training are the Trainer's own.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, EvalLoopOutput

from simcse_weince.core.file_errors import FileFault, reading, writing
from simcse_weince.core.file_modes import give_usual_modes
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import BatchKind
from simcse_weince.training.grad_cache import batch_norm_layers, batch_rows, cached_contrastive_loss, split_batch
from simcse_weince.training.health import (
    LOSS_STATE_FILE,
    RunFault,
    degenerate_fault,
    go_on,
    learned_text,
    metric_fault,
    metric_name,
    non_finite,
    state_faults,
)
from simcse_weince.training.hub import push_folder, repo_name, trainer_uploads_ignoring
from simcse_weince.training.run_folder import LOCAL_ONLY, kept, step_of
from simcse_weince.training.run_record import RunState, save_record

logger = logging.getLogger(__name__)

LOSS_CONFIG_FILE = "loss_config.json"  # beside an exported model whose loss has parameters
Evaluator = Callable[[nn.Module], dict[str, float]]
DAMAGED_CHECKPOINT = (
    "the checkpoint is damaged: resume from an earlier checkpoint-N folder of the run, or start again with "
    "--overwrite_output_dir true"
)
_EVALUATOR_ONLY = "evaluator"  # stands in for eval_dataset so that Trainer accepts an eval_strategy


class ContrastiveTrainer(Trainer):
    """A ``Trainer`` holding a contrastive loss module, an optional evaluator, and the loss's diagnostics.

    Args:
        loss: a registered loss (:data:`~simcse_weince.losses.LOSSES`; its layout must match the recipe). Its
            ``logged_keys`` diagnostics are logged; its trainable parameters, if any, are optimised in their own
            parameter group (``loss_learning_rate``, ``loss_weight_decay``), their gradients averaged over the
            processes, and saved with the loss's state in every checkpoint (``loss_state.pt``).
        evaluator: ``evaluator(model) -> metrics`` on the unwrapped model, run at every evaluation; metric
            names get the Trainer's prefix (``stsb_spearman`` -> ``eval_stsb_spearman``).
        run_state: the run's own state (its record, the Hub outcome); a fresh one by default.
        train_order: the sampler of the training rows (default: the Trainer's shuffle), e.g. a
            :class:`~simcse_weince.training.source_batches.SourceOrder` for batches from one source at a time.
        *args, **kwargs: as for ``transformers.Trainer``.
    """

    def __init__(
        self,
        *args: Any,
        loss: ContrastiveLoss,
        evaluator: Evaluator | None = None,
        run_state: RunState | None = None,
        train_order: Sampler | None = None,
        **kwargs: Any,
    ) -> None:
        if evaluator is not None and kwargs.get("eval_dataset") is None:
            kwargs["eval_dataset"] = _EVALUATOR_ONLY
        super().__init__(*args, **kwargs)
        if self.eval_dataset == _EVALUATOR_ONLY:
            self.eval_dataset = None
        self.contrastive_loss = loss.to(self.args.device)  # its parameters and buffers beside the model's
        self.evaluator = evaluator
        # the run's own state (its record saved beside every checkpoint, the Hub outcome), not TrainingArguments'
        self.run_state = run_state if run_state is not None else RunState(started=time.perf_counter())
        self._diag_sums: dict[str, torch.Tensor] = {}
        self._diag_steps = 0
        self._warned_batch_norm = False
        self._saving_checkpoint = False  # a checkpoint's push waits for the end of its save (_push_from_checkpoint)
        self._deferred_push: str | None = None
        self.evaluated: dict[int, dict[str, float]] = {}  # the evaluator's metrics by step, this session's
        self._zero_grad_steps = 0  # consecutive optimizer steps whose encoder gradient was exactly 0 (health)
        self._last_loss: torch.Tensor | None = None
        self._warned_metrics: set[str] = set()
        self.train_order = train_order

    def _get_train_sampler(self, train_dataset: Any = None) -> Sampler | None:
        """The run's own order of the training rows when it has one (batches from one source at a time,
        :class:`~simcse_weince.training.source_batches.SourceOrder`), else the Trainer's shuffle."""
        if self.train_order is not None:
            return self.train_order
        return super()._get_train_sampler(train_dataset)

    # ---- the loss's own parameters ------------------------------------------------------------------------
    def loss_parameters(self) -> list[nn.Parameter]:
        """The loss's trainable parameters (none for InfoNCE and WEINCE)."""
        return [p for p in self.contrastive_loss.parameters() if p.requires_grad]

    def create_optimizer(self, model: nn.Module | None = None) -> torch.optim.Optimizer:
        """The Trainer's optimizer over the model, plus one parameter group for the loss's parameters: learning
        rate ``loss_learning_rate`` (default ``learning_rate``), weight decay ``loss_weight_decay`` (default 0).
        The scheduler, made after it, scales both groups alike."""
        optimizer = super().create_optimizer(model)
        params = self.loss_parameters()
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        if params and not held & {id(p) for p in params}:
            lr = self.args.loss_learning_rate or self.args.learning_rate
            optimizer.add_param_group({"params": params, "lr": lr, "weight_decay": self.args.loss_weight_decay})
            # The Trainer zeroes the model's gradients after a step (model.zero_grad()), not the optimizer's: the
            # loss's are zeroed here, or they would sum over every step of the run.
            optimizer.register_step_post_hook(lambda *_: [setattr(p, "grad", None) for p in params])
        return optimizer

    def export_loss_parameters(self, folder: str | Path) -> None:
        """Beside an exported model, a loss with trainable parameters or learned values (the profiled link's
        running (a, b)) writes its state (``loss_state.pt``, its ``state_dict``) and what builds it again
        (``loss_config.json``: its registered ``name`` and ``get_config_dict()``); another loss writes nothing."""
        loss = self.contrastive_loss
        if not (self.loss_parameters() or loss.learned_values()) or not self.args.should_save:
            return
        torch.save({k: v.detach().cpu() for k, v in loss.state_dict().items()}, Path(folder) / LOSS_STATE_FILE)
        config = {"name": loss.name, **loss.get_config_dict()}
        (Path(folder) / LOSS_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    def training_step(self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        """The Trainer's step, then the loss parameters' gradients averaged over the processes, as DDP averages
        the model's (averaging after every micro-step of an accumulation is the same: the mean of a common part
        plus a local one is the common part plus the mean). The loss's state is checked first
        (:meth:`check_loss_state`)."""
        self.check_loss_state(f"at step {self.state.global_step + 1}")
        loss = super().training_step(model, inputs, num_items_in_batch)
        self._last_loss = loss
        self.check_loss_value(float(loss))  # the Trainer's own NaN filter reads the loss every step too
        if self.args.world_size > 1:
            for param in self.loss_parameters():
                if param.grad is not None:
                    param.grad.copy_(self.accelerator.reduce(param.grad, reduction="mean"))
        return loss

    # ---- run-time health (simcse_weince.training.health) ---------------------------------------------------
    def check_loss_state(self, when: str) -> None:
        """Stop the run if the loss's parameters or running state hold NaN or Inf (none: InfoNCE, WEINCE).

        Raises:
            RunFault: names the values, when, and the last good checkpoint.
        """
        bad = state_faults(self.contrastive_loss.state_dict())
        if bad:
            raise RunFault(
                f"the loss's state is not finite {when} ({', '.join(bad)}): its parameters diverged (lower "
                f"--loss_learning_rate or the caps); {go_on(self.args.output_dir)}"
            )

    def check_loss_value(self, value: float) -> None:
        """Stop the run if this step's loss is NaN or Inf although the embeddings were finite (they are checked in
        the loss; the Trainer's log would average the value away, ``logging_nan_inf_filter``).

        Raises:
            RunFault: names the value, the step, the loss's learned values and the last good checkpoint.
        """
        if math.isfinite(value):
            return
        learned = learned_text(self.contrastive_loss.learned_values())
        raise RunFault(
            f"the loss is {value} at step {self.state.global_step + 1} although the embeddings are finite: a loss "
            f"setting drives it out of float range{f' (its learned values: {learned})' if learned else ''}; "
            f"{go_on(self.args.output_dir)}"
        )

    def _get_grad_norm(self, model: nn.Module, grad_norm: Any = None) -> Any:
        """The Trainer's gradient norm before each optimizer step (over all processes), watched: exactly 0 for
        :data:`~simcse_weince.training.health.DEGENERATE_STEPS` steps in a row stops the run.

        Raises:
            RunFault: names the steps, the loss's learned values and the last checkpoint before the spell.
        """
        grad_norm = super()._get_grad_norm(model, grad_norm=grad_norm)
        if grad_norm is None:  # an engine that reports none: nothing to watch
            return grad_norm
        self._zero_grad_steps = self._zero_grad_steps + 1 if float(grad_norm) == 0.0 else 0
        step = self.state.global_step + 1
        loss = None if self._last_loss is None else float(self._last_loss)
        cause = degenerate_fault(self._zero_grad_steps, step, loss, self.contrastive_loss.learned_values())
        if cause is not None:
            raise RunFault(f"{cause}; {go_on(self.args.output_dir, step - self._zero_grad_steps + 1)}")
        return grad_norm

    def check_metrics(self, metrics: dict[str, float]) -> None:
        """Stop the run if its selection metric (``metric_for_best_model``) is not finite; warn once per metric
        about any other one that is not.

        Raises:
            RunFault: names the metric, its value, the step and the last good checkpoint.
        """
        step = self.state.global_step
        selected = metric_name(self.args.metric_for_best_model) if self.args.load_best_model_at_end else None
        cause = metric_fault(metrics, selected, step)
        if cause is not None:
            raise RunFault(f"{cause}; {go_on(self.args.output_dir, step + 1)}")
        for name, value in non_finite(metrics).items():
            if name not in self._warned_metrics:
                self._warned_metrics.add(name)
                logger.warning("the validation metric %s is %s at step %d (reported as null)", name, value, step)

    # ---- training hooks ---------------------------------------------------------------------------------
    def embed_views(self, model: nn.Module, inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The views of the batch: ``{"anchors": (B, D), "positives": (B, D)}``, plus ``"negatives"`` (k, B, D)
        for rows with hard negatives (SimCSE's supervised layout)."""
        return model(**inputs)

    def negative_mask(self, inputs: dict[str, Any]) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """(A, C) bool mask of known false negatives (or ``None``) and extra counters to log.

        May pop the keys it consumes from ``inputs`` (they are not model inputs).
        """
        return None, {}

    def absent_negatives(self, inputs: dict[str, Any]) -> torch.Tensor | None:
        """(k, B) bool: the rows of the batch without a hard negative in column c (pairs among triplets), or
        ``None``. Called before :meth:`negative_mask`; leaves ``inputs`` as they are."""
        return None

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = dict(inputs)
        kind = inputs.get("kind")  # the collator's BatchKind (None: a model whose batches carry none)
        absent = self.absent_negatives(inputs)
        negative_mask, extra = self.negative_mask(inputs)
        if absent is not None:  # summed over the processes when logged: this process's rows
            extra["absent_negatives_per_step"] = absent.sum().float()
        chunks = self.gradient_cache_chunks(model, inputs)
        if chunks is None:
            views = self.embed_views(model, inputs)
            with torch.profiler.record_function("loss"):  # a label in profiles (bench/train_throughput.py --profile)
                loss = self.contrastive_loss(
                    views["anchors"], views["positives"], negative_mask=negative_mask,
                    negatives=views.get("negatives"), absent_negatives=absent, kind=kind,
                )  # fmt: skip
        else:
            loss, views = self.cached_loss(model, chunks, negative_mask, absent, kind)
        if model.training:
            self.accumulate_diagnostics(extra)
        return (loss, views) if return_outputs else loss

    def gradient_cache_chunks(self, model: nn.Module, inputs: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The batch cut into chunks of ``gradient_cache_chunk_size`` examples, or ``None`` for an uncached
        step: no chunk size set, evaluation (no gradient), or a batch that fits in one chunk."""
        chunk = getattr(self.args, "gradient_cache_chunk_size", None)
        if not chunk or not model.training or not torch.is_grad_enabled() or batch_rows(inputs) <= chunk:
            return None
        return split_batch(inputs, chunk)

    def cached_loss(
        self,
        model: nn.Module,
        chunks: list[dict[str, Any]],
        negative_mask: torch.Tensor | None,
        absent_negatives: torch.Tensor | None = None,
        kind: BatchKind | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The full-batch loss over ``chunks`` with a gradient-cached backward, and the detached views.

        The chunks are embedded without gradient (``embed_views`` on each: anchors, positives and, for
        supervised rows, negatives (k, b, D), concatenated along their row dim 1), the loss and its gradient
        with respect to every view are computed once over the whole batch, and the returned loss's backward
        re-embeds every chunk with its recorded dropout masks (under autocast, and DDP's ``no_sync`` for all
        but the last chunk) and back-propagates the cached gradients.
        """
        norm_layers = batch_norm_layers(model)
        if norm_layers and not self._warned_batch_norm:
            self._warned_batch_norm = True
            if self.is_world_process_zero():
                logger.warning(
                    "gradient_cache_chunk_size: the model has %d batch-norm layer(s); they normalise with the "
                    "statistics of each chunk, not of the batch, so training differs from an uncached step "
                    "(per-sample normalisation, e.g. layer norm, is exact)",
                    len(norm_layers),
                )

        def embed(chunk: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
            views = self.embed_views(model, chunk)
            return views["anchors"], views["positives"], views.get("negatives")

        def loss_fn(
            anchors: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor | None = None
        ) -> torch.Tensor:
            with torch.profiler.record_function("loss"):
                return self.contrastive_loss(
                    anchors, positives, negative_mask=negative_mask, negatives=negatives,
                    absent_negatives=absent_negatives, kind=kind,
                )  # fmt: skip

        def replay_context(last: bool) -> AbstractContextManager:
            # The replay runs inside the Trainer's backward, outside compute_loss's autocast: enter it again.
            # Under DDP every backward all-reduces; all but the last chunk accumulate locally instead (an outer
            # no_sync, on a non-final accumulation micro-step, still holds for the last one).
            stack = ExitStack()
            stack.enter_context(self.compute_loss_context_manager())
            if not last:
                stack.enter_context(self.accelerator.no_sync(model))
            return stack

        loss, anchors, positives, negatives = cached_contrastive_loss(
            embed, chunks, loss_fn, replay_context, norm_layers, self.loss_parameters()
        )
        views = {"anchors": anchors, "positives": positives}
        if negatives is not None:
            views["negatives"] = negatives
        return loss, views

    @torch.no_grad()
    def accumulate_diagnostics(self, extra: dict[str, torch.Tensor] | None = None) -> None:
        """Add the last forward's diagnostics (and ``extra`` counters) to the running sums."""
        keys = self.contrastive_loss.logged_keys
        diag = {k: v for k, v in self.contrastive_loss.last_diagnostics.items() if k in keys}
        diag.update(extra or {})
        for k, v in diag.items():
            self._diag_sums[k] = self._diag_sums.get(k, 0) + v.detach().float()
        self._diag_steps += 1

    # ---- evaluation hooks -------------------------------------------------------------------------------
    def get_eval_dataloader(self, eval_dataset=None) -> DataLoader:
        if self.evaluator is not None and eval_dataset is None and self.eval_dataset is None:
            return DataLoader([])  # the evaluator brings its own data
        return super().get_eval_dataloader(eval_dataset)

    def evaluation_loop(
        self,
        dataloader: DataLoader,
        description: str,
        prediction_loss_only: bool | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> EvalLoopOutput:
        if self.evaluator is None:
            return super().evaluation_loop(
                dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix
            )
        with self.compute_loss_context_manager():
            metrics = self.evaluator(self.accelerator.unwrap_model(self.model))
        self.evaluated[self.state.global_step] = {k: float(v) for k, v in metrics.items()}
        self.check_metrics(self.evaluated[self.state.global_step])
        metrics = {f"{metric_key_prefix}_{k}": float(v) for k, v in metrics.items()}
        # the evaluator's sample count (pairs, images), so that the Trainer's samples/s is meaningful
        samples = int(getattr(self.evaluator, "num_samples", 0))
        return EvalLoopOutput(predictions=None, label_ids=None, metrics=metrics, num_samples=samples)

    def metrics_of_final_weights(self) -> dict[str, float] | None:
        """The evaluator's metrics of the weights the model holds after :meth:`train`, when this session already
        evaluated exactly those weights, else ``None``.

        The weights are the best checkpoint's (``load_best_model_at_end``) or the last step's; the Trainer
        evaluates the last step itself (an ``eval_strategy`` of steps evaluates at the end). Only fp32 runs: under
        fp16/bf16 the evaluation ran inside the training autocast, which a later scoring of the model does not.
        Scoring the final model again (as a whole STS-B dev pass: 12 s of a 20-step quickstart on 2 cores) would
        give the same numbers: the same weights, inputs and kernels in eval mode.
        """
        if self.args.fp16 or self.args.bf16:
            return None
        best = self.state.best_model_checkpoint
        if self.args.load_best_model_at_end and best is not None:
            step = step_of(Path(best))
        else:
            step = self.state.global_step
        return self.evaluated.get(step)

    # ---- checkpoints ------------------------------------------------------------------------------------
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """The Trainer's save, plus the run's record (``run_record.json``, see
        :mod:`~simcse_weince.training.run_record`) beside the weights, its digests still to come: a checkpoint
        saves its model first and its ``trainer_state.json`` last, so a complete checkpoint always holds the
        record that resuming checks."""
        super().save_model(output_dir, _internal_call)
        if self.args.should_save:  # the weights are written through a 0600 temporary file: readable as the folder's
            give_usual_modes(output_dir or self.args.output_dir)
        record = self.run_state.record if self.run_state is not None else None
        if record is not None and self.args.should_save:
            save_record(output_dir or self.args.output_dir, record)

    def _save_checkpoint(self, model: nn.Module, trial: Any) -> None:
        """The Trainer's checkpoint save, then the record again with the digest of every file it wrote (the
        checkpoint's last write: a checkpoint without them did not finish saving). A failure to write (a full
        disk, a file-size limit) ends in one :class:`~simcse_weince.core.file_errors.FileFault` naming the folder
        and what was kept: the half-written folder is removed, the previous checkpoints are untouched (the Trainer
        rotates them only after a save)."""
        folder = Path(self._get_output_dir(trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        self.check_loss_state(f"before saving {folder.name}")  # a checkpoint never holds a poisoned state
        self._saving_checkpoint, self._deferred_push = True, None
        try:
            with writing(folder, "the checkpoint", kept=f"{kept(self.args)}; fix the cause first"):
                super()._save_checkpoint(model, trial)
                state = self.contrastive_loss.state_dict()
                if state and self.args.should_save:  # before the digests, which cover it
                    torch.save(state, folder / LOSS_STATE_FILE)
                record = self.run_state.record if self.run_state is not None else None
                if record is not None and self.args.should_save:
                    save_record(folder, record, with_digests=True)
        except FileFault:
            if self.args.should_save:  # the half-written folder goes, and the space it took with it
                shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            self._saving_checkpoint = False
        pending, self._deferred_push = self._deferred_push, None
        if pending is not None:  # the checkpoint is complete now: the push carries what it holds
            self._push_from_checkpoint(pending)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """The Trainer's push of a checkpoint (``push_to_hub``, per ``hub_strategy``), deferred while
        :meth:`_save_checkpoint` runs: the Trainer pushes before returning, so the pushed checkpoint lacked the loss
        state and the record's digests (``files: null``: a checkpoint that cannot be resumed as saved). Every such
        upload skips the run's local files (:data:`~simcse_weince.training.run_folder.LOCAL_ONLY`)."""
        if getattr(self, "_saving_checkpoint", False):
            self._deferred_push = checkpoint_folder
            return
        with trainer_uploads_ignoring(LOCAL_ONLY):
            super()._push_from_checkpoint(checkpoint_folder)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        with reading(resume_from_checkpoint, "the checkpoint's weights in", DAMAGED_CHECKPOINT):
            super()._load_from_checkpoint(resume_from_checkpoint, model)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        """The Trainer's load of the optimizer and scheduler on resume (every resume path calls it), then the
        loss's running state, which a checkpoint of a loss that has one must hold."""
        with reading(checkpoint, "the optimizer state in", DAMAGED_CHECKPOINT):
            super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None or not self.contrastive_loss.state_dict():
            return
        state_file = Path(checkpoint) / LOSS_STATE_FILE

        def earlier() -> str:  # the earlier checkpoints' states are read only on a failure
            return go_on(self.args.output_dir, step_of(Path(checkpoint)))

        with reading(state_file, "the loss's running state", earlier):
            state = torch.load(state_file, map_location="cpu", weights_only=True)
        bad = state_faults(state) if isinstance(state, dict) else []
        if bad:
            raise FileFault(f"the loss's running state {state_file} is not finite ({', '.join(bad)}); {earlier()}")
        with reading(state_file, "the loss's running state", earlier):
            self.contrastive_loss.load_state_dict(state)

    def _load_rng_state(self, checkpoint: str | None) -> None:
        with reading(checkpoint, "the random-number state in", DAMAGED_CHECKPOINT):
            super()._load_rng_state(checkpoint)

    # ---- the Hub -----------------------------------------------------------------------------------------
    def push_final_folder(
        self, folder: str, commit_message: str = "End of training", allow_patterns: list[str] | None = None
    ) -> str:
        """Upload ``folder`` (the exported model, or its files matching ``allow_patterns``) to the run's repository
        once the Trainer's own checkpoint pushes are done; returns the commit URL.

        Raises:
            HubPushError: the upload failed (the local folder is complete).
        """
        self._finish_current_push()
        repo = self.hub_model_id or repo_name(self.args.hub_model_id, self.args.output_dir)
        return push_folder(
            folder, repo, self.args.hub_token, self.args.hub_revision, commit_message, allow_patterns, LOCAL_ONLY
        )

    # ---- logging ----------------------------------------------------------------------------------------
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # Training logs (they carry "loss") get the diagnostics averaged over the micro-steps since the last
        # log; this is the only host sync they cost.
        if "loss" in logs and self._diag_steps:
            logs.update(self.global_diagnostics())
            self._diag_sums, self._diag_steps = {}, 0
            self.log_histograms()
        super().log(logs, start_time)

    def global_diagnostics(self) -> dict[str, float]:
        """The accumulated diagnostics over all processes: per-anchor means (λ, β, ρ, ΔAIC, shares) are
        averaged over the processes, which hold equal numbers of anchors, so they equal the global batch's;
        counters (``*_per_step``) are summed. One collective per log, none per step."""
        keys = sorted(self._diag_sums)
        if not keys:  # InfoNCE without counters: nothing to report (the same on every process)
            return {}
        local = torch.stack([self._diag_sums[k].reshape(()) for k in keys]) / self._diag_steps
        world = self.args.world_size
        mean = self.accelerator.reduce(local, reduction="mean") if world > 1 else local
        values = mean.tolist()
        return {k: round(v * world if k.endswith("_per_step") else v, 6) for k, v in zip(keys, values, strict=True)}

    def log_histograms(self) -> None:
        """The loss's per-anchor tensors of the last global batch (WEINCE: λ and β) as TensorBoard histograms,
        when TensorBoard reporting is on."""
        tensors = self.contrastive_loss.histograms()
        if not tensors:
            return
        if self.args.world_size > 1:  # every process takes part; the anchors of all of them are plotted
            tensors = {name: self.accelerator.gather(t) for name, t in tensors.items()}
        if not self.is_world_process_zero():
            return
        for cb in self.callback_handler.callbacks:
            writer = getattr(cb, "tb_writer", None)
            if writer is not None:
                for name, t in tensors.items():
                    writer.add_histogram(name, t.detach().float().cpu(), self.state.global_step)
