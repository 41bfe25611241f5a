"""Unsupervised SimCSE training pipeline behind ``train_unsup.py`` (``simcse-train``).

Steps: parse the config and build the loss (every setting validated before anything loads), load the
tokenizer, tokenise the sentences into the on-disk token cache (or memory-map the cache a previous run or the
main process built), load the encoder, train with :class:`SimCSETrainer` (STS-B dev every
``eval_steps``, best checkpoint kept), export the best model as a SentenceTransformer folder
``<output_dir>/model`` with a model card, score STS-B test, write ``results.json``, and optionally push the
folder to the Hub.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import datasets
from transformers import AutoTokenizer, TrainerCallback

from simcse_weince.errors import run_command
from simcse_weince.evaluation.sts_data import STSSubset, STSTask, load_sts_task
from simcse_weince.paths import check_model_source, resolve_data_path, senteval_root
from simcse_weince.text.arguments import DataArguments, ModelArguments, SimCSETrainingArguments
from simcse_weince.text.checkpoint import inference_settings
from simcse_weince.text.data import SimCSECollator, TextStats, check_text_file, single_row_tail
from simcse_weince.text.export import export_sentence_transformer
from simcse_weince.text.model import SimCSEModel, inference_max_length, load_hf_encoder
from simcse_weince.text.model_card import render_model_card
from simcse_weince.text.token_cache import prepare_hub_text, prepare_text_files
from simcse_weince.text.trainer import SimCSETrainer, STSEvaluator
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import parse_config, save_run_info
from simcse_weince.training.hub import HubPushError
from simcse_weince.training.run import card_facts, start_run, train_and_record, write_results

logger = logging.getLogger(__name__)
LOCAL_USAGE_PATH = "path/to/this/folder"
ARG_GROUPS = (ModelArguments, DataArguments, LossArguments, SimCSETrainingArguments)


def is_cut_file(path: str, patterns: list[str] | None) -> bool:
    """Whether ``path`` matches one of ``drop_unterminated_last_line``'s names or glob patterns."""
    return any(fnmatch.fnmatch(Path(path).name, p) or fnmatch.fnmatch(path, p) for p in patterns or ())


def training_files(data: DataArguments) -> list[tuple[Path, bool]]:
    """The configured local files, each checked to exist (not a folder, not gzip), with its drop flag."""
    files = [resolve_data_path(f) for f in data.train_files or ()]
    return [(check_text_file(f), is_cut_file(f, data.drop_unterminated_last_line)) for f in files]


def load_training_sentences(data: DataArguments, tokenizer, stats: TextStats, build: bool = True) -> datasets.Dataset:
    """The training sentences, tokenised: a memory-mapped ``Dataset`` of ``input_ids`` and ``sentence_key``.

    Local files (or the Hub dataset) go through the token cache (:mod:`simcse_weince.text.token_cache`):
    tokenised once by the process allowed to ``build``, memory-mapped by the others and by later runs.
    """
    common = dict(
        cache_root=resolve_data_path(data.data_cache_dir) if data.data_cache_dir else None,
        build=build,
        max_rows=data.max_train_samples,
        num_proc=data.preprocessing_num_workers,
    )
    if data.train_files:
        return prepare_text_files(training_files(data), tokenizer, data.max_seq_length, stats, **common)
    return prepare_hub_text(data.hub_dataset, data.hub_data_file, tokenizer, data.max_seq_length, stats, **common)


def stsb_task(data: DataArguments, split: str) -> STSTask:
    """STS-B ``split`` from the configured SentEval folder, cut to ``eval_max_pairs`` pairs if set."""
    root = senteval_root(resolve_data_path(data.senteval_dir) if data.senteval_dir else None)
    task = load_sts_task("STSBenchmark", root, split)
    if data.eval_max_pairs is not None:
        sub = task.subsets[0]
        n = data.eval_max_pairs
        task = STSTask(task.name, [STSSubset(sub.name, sub.sentences1[:n], sub.sentences2[:n], sub.scores[:n])])
    return task


def run(argv: Sequence[str], callbacks: Sequence[TrainerCallback] = ()) -> dict:
    """Train from a config (YAML path + overrides); ``callbacks`` are added to the Trainer's."""
    model_args, data_args, loss_args, training_args = parse_config(ARG_GROUPS, argv)
    loss = loss_args.build("simcse")
    t_start = start_run(training_args)

    model_path = check_model_source(model_args.model_name_or_path)
    tokenizer_path = check_model_source(model_args.tokenizer_name) if model_args.tokenizer_name else model_path

    # Every file is read (and checked) before the model loads. The main process of each machine tokenises
    # the text into the on-disk cache (once: later runs reuse it) while the others wait, then memory-map it.
    stats = TextStats()
    sts_dev = stsb_task(data_args, "dev")
    sts_test = stsb_task(data_args, "test") if data_args.eval_test_at_end else None
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    with training_args.main_process_first(desc="tokenising the training text"):
        train_dataset = load_training_sentences(
            data_args, tokenizer, stats, build=training_args.local_process_index == 0
        )
    logger.info(
        "training text: %d sentences from %s; %d blank lines skipped; %d truncated to %d tokens; cache %s (%s)",
        len(train_dataset),
        ", ".join(stats.files),
        stats.blank_lines_skipped,
        stats.truncated,
        data_args.max_seq_length,
        stats.cache_dir,
        "reused" if stats.cache_reused else "built",
    )
    encoder = load_hf_encoder(model_path, model_args.init_from_config, model_args.overrides())
    model = SimCSEModel(encoder, pooler=model_args.pooler, mlp_only_train=model_args.mlp_only_train)
    batch, processes = training_args.per_device_train_batch_size, training_args.world_size
    drop = single_row_tail(len(train_dataset), batch, processes, loss_args.gather_across_devices)
    if drop and not training_args.dataloader_drop_last:
        logger.warning("dropping the last %d sentence(s): the epoch's last batch would score one sentence alone", drop)
        train_dataset = train_dataset.select(range(len(train_dataset) - drop))
        stats.tail_sentences_dropped = drop

    groups = {"model": model_args, "data": data_args, "loss": loss_args, "training": training_args}
    if training_args.should_save:
        save_run_info(training_args.output_dir, groups, {"text": stats.to_dict()})

    show_progress = not training_args.disable_tqdm and training_args.process_index == 0

    # A SentenceTransformer base model keeps its inference settings (Normalize, length limit) in the export,
    # and the STS scores during training use the same limit, so they are the exported folder's scores.
    base_normalize, base_max_len = inference_settings(model_path)

    def evaluator(task: STSTask) -> STSEvaluator:
        return STSEvaluator(
            task, tokenizer, data_args.eval_batch_size, training_args.device, show_progress, max_length=base_max_len
        )

    trainer = SimCSETrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        data_collator=SimCSECollator(tokenizer),
        processing_class=tokenizer,
        evaluator=evaluator(sts_dev),
        loss=loss,
        mask_duplicates=loss_args.mask_duplicates,
        callbacks=list(callbacks) or None,
    )

    def score(task: STSTask) -> float:
        return evaluator(task)(model)["stsb_spearman"]

    results: dict = {"before": {}, "after": {}}
    if data_args.eval_before_training:
        results["before"]["stsb_dev"] = score(sts_dev)
        if sts_test is not None:
            results["before"]["stsb_test"] = score(sts_test)

    record = train_and_record(trainer, training_args)

    # load_best_model_at_end has put the best checkpoint's weights into `model`.
    results["after"]["stsb_dev"] = score(sts_dev)
    if sts_test is not None:
        results["after"]["stsb_test"] = score(sts_test)
    results.update(
        record,
        text=stats.to_dict(),
        loss=loss.get_config_dict() | {"name": loss_args.loss},
        model=model_args.model_name_or_path,
        pooler=model_args.pooler,
        inference_pooler=model.inference_pooler,
        eval_max_pairs=data_args.eval_max_pairs,
    )

    model_dir = Path(training_args.output_dir) / "model"
    if trainer.is_world_process_zero():
        card = render_model_card(
            base_model=model_args.model_name_or_path,
            from_config=model_args.init_from_config,
            data_desc=f"{len(train_dataset):,} sentences from {', '.join(Path(f).name for f in stats.files)} "
            f"({stats.truncated} truncated)",
            **card_facts(trainer, loss_args.loss, loss),
            max_len=data_args.max_seq_length,
            pooler=model_args.pooler,
            inference_pooler=model.inference_pooler,
            eval_steps=training_args.eval_steps,
            scores={score_label(k, data_args.eval_max_pairs): v for k, v in results["after"].items()},
            usage_path=trainer.hub_model_id if training_args.push_to_hub else LOCAL_USAGE_PATH,
            note=data_args.model_card_note,
            inference_desc=inference_description(base_normalize, base_max_len, tokenizer, encoder.config),
        )
        export_sentence_transformer(
            model, tokenizer, model_dir, max_seq_length=base_max_len, card=card, normalize=base_normalize
        )
        results["model_dir"] = str(model_dir)
        results["total_seconds"] = time.perf_counter() - t_start
        write_results(training_args.output_dir, results)
        print_summary(results)
        if training_args.push_to_hub:
            try:
                url = trainer.push_final_folder(str(model_dir), "End of training: SentenceTransformer model and card")
                logger.info("pushed %s to %s", model_dir, url)
                results["hub_url"] = url
            except HubPushError as err:
                logger.error("%s", err)
                results["hub_error"] = str(err)
                card_path = model_dir / "README.md"  # the card must not point at a repository without the model
                card_path.write_text(
                    card_path.read_text(encoding="utf-8").replace(f'"{trainer.hub_model_id}"', f'"{LOCAL_USAGE_PATH}"'),
                    encoding="utf-8",
                )
        elif training_args.hub_error:
            results["hub_error"] = training_args.hub_error
        results["hub_push_optional"] = training_args.hub_push_optional
        write_results(training_args.output_dir, results)  # the push's outcome is part of the record
    return results


def inference_description(normalize: bool, base_max_len: int | None, tokenizer, config) -> str:
    """What the exported folder does at inference, and where that comes from, for the model card."""
    if base_max_len is not None:
        desc = f"max_seq_length {base_max_len} (as the base model)"
    else:
        desc = f"max_seq_length {inference_max_length(tokenizer, config)} (the model's limit)"
    return desc + ("; L2-normalised output (the base model's Normalize module)" if normalize else "")


def score_label(key: str, max_pairs: int | None) -> str:
    """``stsb_dev`` -> ``STS-B dev``, or ``STS-B dev (first 100 pairs)`` for a subset score."""
    label = "STS-B " + key.split("_")[1]
    return label if max_pairs is None else f"{label} (first {max_pairs} pairs)"


def print_summary(results: dict) -> None:
    before, after = results["before"], results["after"]
    lam = results.get("mean_lambda")
    lines = [
        "",
        f"SimCSE run: {results['model']} ({results['loss']['name']}), pooler {results['inference_pooler']}",
        f"{'':<16}{'before':>10}{'after':>10}",
    ]
    for key in ("stsb_dev", "stsb_test"):
        label = score_label(key, results.get("eval_max_pairs"))
        if key in after:
            b = f"{before[key]:.2f}" if key in before else "-"
            lines.append(f"{label:<16}{b:>10}{after[key]:>10.2f}")
    lines += [
        f"steps {results['steps']}, training wall time {results['train_seconds']:.0f} s, mean lambda {lam:.3f}"
        if lam is not None
        else f"steps {results['steps']}, training wall time {results['train_seconds']:.0f} s",
        f"model folder: {results.get('model_dir')}",
        "(Spearman x 100 of cosine similarity; 'after' is the checkpoint with the best STS-B dev score. One seed:\n"
        " seed-to-seed variation is not measured by this run, so small differences are not evidence of a gain.)",
    ]
    print("\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    results, code = run_command(run, sys.argv[1:] if argv is None else argv)
    # a failed push is an error unless the run asked for an optional push
    return code or (1 if "hub_error" in results and not results.get("hub_push_optional") else 0)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
