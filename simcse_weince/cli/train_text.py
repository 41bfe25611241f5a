"""``train_unsup.py`` / ``simcse-train``: SimCSE, unsupervised (sentences, two dropout views) or
supervised (rows of pairs or triplets), with WEINCE or InfoNCE.

Parse the config (every setting validated before anything loads), read and tokenise the corpus into the
token cache, load the encoder, train with :class:`~simcse_weince.text.trainer.SimCSETrainer` (the validation,
STS-B dev by default, every ``eval_steps``, best checkpoint kept), score STS-B, and end the run
(:func:`~simcse_weince.training.ending.finish_run`: SentenceTransformer export, Hub push, card, ``results.json``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from transformers import AutoTokenizer, TrainerCallback

from simcse_weince.cli.errors import command_main
from simcse_weince.core.hardware import warn_if_slow_bf16
from simcse_weince.core.model_sources import check_model_source
from simcse_weince.core.paths import resolve_data_path, senteval_root
from simcse_weince.evaluation.sts_data import STSTask, load_sts_task
from simcse_weince.text.arguments import DataArguments, ModelArguments, SimCSETrainingArguments
from simcse_weince.text.checkpoint import inference_settings
from simcse_weince.text.corpus import describe_rows, prepare_corpus
from simcse_weince.text.data import SimCSECollator
from simcse_weince.text.export import export_sentence_transformer
from simcse_weince.text.model import SimCSEModel, inference_max_length, load_hf_encoder
from simcse_weince.text.model_card import inference_description, render_model_card, score_label
from simcse_weince.text.positions import check_length_fits, model_position_limit
from simcse_weince.text.trainer import SimCSETrainer
from simcse_weince.text.validation import ValidationEvaluator, parse_validation
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import SettingSources, parse_config_and_sources, save_run_info
from simcse_weince.training.ending import exit_code, finish_run
from simcse_weince.training.run import card_facts, start_run, train_and_record
from simcse_weince.training.run_record import RunState

logger = logging.getLogger(__name__)
ARG_GROUPS = (ModelArguments, DataArguments, LossArguments, SimCSETrainingArguments)


def senteval_folder(data: DataArguments) -> Path | None:
    """The configured SentEval folder (``None``: STS-B from the Hub)."""
    return senteval_root(resolve_data_path(data.senteval_dir) if data.senteval_dir else None)


def stsb_task(data: DataArguments, split: str) -> STSTask:
    """STS-B ``split`` from the configured SentEval folder, cut to ``eval_max_pairs`` pairs if set."""
    return load_sts_task("STSBenchmark", senteval_folder(data), split).first_pairs(data.eval_max_pairs)


def evaluation_tasks(data: DataArguments, metric: str | None) -> tuple[dict, dict]:
    """The tasks scored during and after training, every file read (before the model loads): ``{"stsb_dev" or
    "validation": (the validation, its task), "stsb_test": (STS-B, its test split, with eval_test_at_end)}``, and
    what ``results.json`` records of the validation (its setting, label and the metric that picks the best
    checkpoint).

    Raises:
        ValueError: ``metric`` is not one the validation reports.
    """
    chosen = parse_validation(data.validation)
    record = {
        "setting": chosen.spec,
        "label": chosen.label,
        "metric": chosen.check_metric(metric),
        "pairs": chosen.dev.pairs,
    }
    key = "stsb_dev" if chosen.spec == "stsb" else "validation"
    tasks = {key: (chosen, chosen.load(senteval_folder(data), data.eval_max_pairs))}
    if data.eval_test_at_end:
        tasks["stsb_test"] = (parse_validation("stsb"), stsb_task(data, "test"))
    return tasks, record


def run(argv: Sequence[str], callbacks: Sequence[TrainerCallback] = ()) -> dict:
    """Train from a config (YAML path + overrides); ``callbacks`` are added to the Trainer's."""
    (model_args, data_args, loss_args, args), sources = parse_config_and_sources(ARG_GROUPS, argv)
    warn_if_slow_bf16(args.precision_name, "cpu" if args.use_cpu else None, "training with")
    parse_validation(data_args.validation).check_metric(args.metric_for_best_model)  # before the folder is locked
    check_max_seq_length(model_args, data_args, sources)
    loss = loss_args.build("simcse")
    groups = {"model": model_args, "data": data_args, "loss": loss_args, "training": args}
    with start_run(groups) as state:  # the output folder locked for this run, the resume checked
        return train(groups, loss, state, callbacks)


def check_max_seq_length(model_args: ModelArguments, data_args: DataArguments, sources: SettingSources) -> None:
    """``max_seq_length`` within the model's position table, read from its config alone (after
    ``config_overrides``), before the output folder is locked and any text is tokenised to that length."""
    limit = model_position_limit(check_model_source(model_args.model_name_or_path), model_args.overrides())
    where = sources.describe("max_seq_length", data_args.max_seq_length)
    check_length_fits(where, data_args.max_seq_length, model_args.model_name_or_path, limit)


def train(groups: dict, loss, state: RunState, callbacks: Sequence[TrainerCallback]) -> dict:
    model_args, data_args, loss_args, args = groups.values()
    model_path = check_model_source(model_args.model_name_or_path)
    tokenizer_path = check_model_source(model_args.tokenizer_name) if model_args.tokenizer_name else model_path
    tasks, validation = evaluation_tasks(data_args, args.metric_for_best_model)  # every file read before the model
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    corpus, stats, order = prepare_corpus(data_args, tokenizer, args, loss_args.gather_across_devices)
    encoder = load_hf_encoder(model_path, model_args.init_from_config, model_args.overrides())
    model = SimCSEModel(encoder, model_args.pooler, model_args.mlp_only_train, model_args.length_groups)
    if args.should_save:
        save_run_info(args.output_dir, groups, {"text": stats.to_dict()})
    # A SentenceTransformer base keeps its inference settings (Normalize, length limit) in the export, and the
    # STS scores during training use the same limit, so they are the exported folder's scores.
    normalize, max_len = inference_settings(model_path)
    show = not args.disable_tqdm and args.process_index == 0
    evaluators = {
        key: ValidationEvaluator(chosen, task, tokenizer, data_args.eval_batch_size, args.device, show, max_len)
        for key, (chosen, task) in tasks.items()
    }
    picked = {key: validation["metric"] if key != "stsb_test" else "stsb_spearman" for key in evaluators}
    trainer = SimCSETrainer(
        model=model, args=args, train_dataset=corpus, data_collator=SimCSECollator(tokenizer),
        processing_class=tokenizer, evaluator=next(iter(evaluators.values())), loss=loss,
        mask_duplicates=loss_args.mask_duplicates, callbacks=list(callbacks) or None, run_state=state,
        train_order=order,
    )  # fmt: skip

    def scores(after: bool = False) -> dict[str, float]:
        return picked_scores(evaluators, picked, model, trainer if after else None)

    results: dict = {"before": scores() if data_args.eval_before_training else {}}
    results |= train_and_record(trainer, args)  # the model now holds the best checkpoint's weights
    results |= {
        "after": scores(after=True), "text": stats.to_dict(), "loss": loss.get_config_dict() | {"name": loss.name},
        "model": model_args.model_name_or_path, "pooler": model_args.pooler,
        "inference_pooler": model.inference_pooler, "eval_max_pairs": data_args.eval_max_pairs,
        "validation": validation,
    }  # fmt: skip

    def card(usage_path: str) -> str:
        files = ", ".join(Path(f).name for f in stats.files)
        return render_model_card(
            base_model=model_args.model_name_or_path, from_config=model_args.init_from_config,
            data_desc=f"{describe_rows(stats, len(corpus))} from {files} ({stats.truncated} truncated)",
            supervised=len(stats.text_columns) > 1,
            **card_facts(trainer, loss), max_len=data_args.max_seq_length,
            pooler=model_args.pooler, inference_pooler=model.inference_pooler, eval_steps=args.eval_steps,
            scores={score_label(k, data_args.eval_max_pairs, validation): v for k, v in results["after"].items()},
            selection=f"best {validation['metric']} on {validation['label']}",
            usage_path=usage_path, note=data_args.model_card_note,
            inference_desc=inference_description(normalize, max_len, inference_max_length(tokenizer, encoder.config)),
        )  # fmt: skip

    def export(folder: Path) -> Path:
        return export_sentence_transformer(model, tokenizer, folder, max_seq_length=max_len, normalize=normalize)

    finish_run(trainer, results, export=export, render_card=card, what="SentenceTransformer model")
    if trainer.is_world_process_zero():
        print_summary(results)
    return results


def picked_scores(evaluators: dict, picked: dict[str, str], model, trainer: SimCSETrainer | None) -> dict[str, float]:
    """Each evaluator's picked metric of ``model``; the trainer's own evaluator's from its evaluation of these
    weights during training when it made one (``metrics_of_final_weights``), rather than scored again."""
    known = trainer.metrics_of_final_weights() if trainer is not None else None
    return {
        key: (known if known is not None and evaluate is trainer.evaluator else evaluate(model))[picked[key]]
        for key, evaluate in evaluators.items()
    }


def print_summary(results: dict) -> None:
    before, after = results["before"], results["after"]
    lam = results.get("mean_lambda")
    lines = [
        "",
        f"SimCSE run: {results['model']} ({results['loss']['name']}), pooler {results['inference_pooler']}",
        f"{'':<16}{'before':>10}{'after':>10}",
    ]
    for key in ("stsb_dev", "validation", "stsb_test"):
        label = score_label(key, results.get("eval_max_pairs"), results.get("validation"))
        if key in after:
            b = f"{before[key]:.2f}" if key in before else "-"
            lines.append(f"{label:<16}{b:>10}{after[key]:>10.2f}")
    steps = f"steps {results['steps']}, training wall time {results['train_seconds']:.0f} s"
    lines += [
        steps + (f", mean lambda {lam:.3f}" if lam is not None else ""),
        f"model folder: {results.get('model_dir')}",
        *([f"Hub: {results['hub_url']}"] if "hub_url" in results else []),
        *([f"Hub push failed: {results['hub_error']}"] if "hub_error" in results else []),
        f"(x 100: cosine Spearman for STS; 'after' is the checkpoint with the best {picked_by(results)}. One seed:\n"
        " seed-to-seed variation is not measured by this run, so small differences are not evidence of a gain.)",
    ]
    print("\n".join(lines))


def picked_by(results: dict) -> str:
    """``stsb_spearman on STS-B dev``: what chose the 'after' checkpoint."""
    chosen = results.get("validation") or {"metric": "stsb_spearman", "label": "STS-B dev"}
    return f"{chosen['metric']} on {chosen['label']}"


def main(argv: Sequence[str] | None = None, callbacks: Sequence[TrainerCallback] = ()) -> int:
    return command_main(lambda a: run(a, callbacks), argv, exit_code=exit_code)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
