"""Batches from one training file at a time, through the training command: every batch of one file, a resume
mid-epoch trains the same batches bitwise, 2 processes equal 1, and a file too small for a batch is refused."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from simcse_weince.cli.train_text import run
from simcse_weince.losses.duplicates import sentence_key
from simcse_weince.text.sources.lines import read_sentences
from tests.helpers import Interrupt, StopAt, accelerate_runs, recording_collator, text_run_args, without_dropout


@pytest.fixture(scope="module")
def two_files(wiki_sample: Path, tmp_path_factory) -> tuple[Path, Path]:
    """48 Wikipedia sentences in a.txt and 32 others in b.txt."""
    lines = read_sentences(wiki_sample, drop_unterminated_last_line=True)
    folder = tmp_path_factory.mktemp("two-files")
    a, b = folder / "a.txt", folder / "b.txt"
    a.write_text("\n".join(lines[:48]) + "\n", encoding="utf-8")
    b.write_text("\n".join(lines[300:332]) + "\n", encoding="utf-8")
    return a, b


def _keys(path: Path, tiny: Path) -> set[int]:
    tok = AutoTokenizer.from_pretrained(tiny)
    ids = tok(read_sentences(path), truncation=True, max_length=16)["input_ids"]
    return {sentence_key(x) for x in ids}


def _args(tiny: Path, files, out: Path, **flags: object) -> list[str]:
    base = dict(
        drop_unterminated_last_line=None, max_train_samples=None, per_device_train_batch_size=8,
        source_batches="proportional", eval_strategy="no", load_best_model_at_end=False,
    )  # fmt: skip
    return text_run_args(tiny, list(files), out, **(base | flags))


@pytest.mark.slow
def test_every_batch_is_one_files_and_a_resume_mid_epoch_trains_the_same_batches(
    tiny_bert_dir: Path, two_files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """a.txt gives 6 batches of 8 and b.txt 4 per epoch; 14 steps run into the second epoch, and a run stopped
    after step 12 resumes from checkpoint-11 (the second epoch's first step) and sees the same batches."""
    common = dict(max_steps=14, save_steps=11, save_total_limit=3)
    seen = recording_collator(monkeypatch)
    with caplog.at_level(logging.INFO):
        full = run(_args(tiny_bert_dir, two_files, tmp_path / "full", **common))
    assert "global batches of 8 rows per epoch from " in caplog.text and "a.txt (48 rows): 6, " in caplog.text
    assert full["text"]["rows_by_source"] == [48, 32]
    full_order = list(seen)
    a, b = (_keys(f, tiny_bert_dir) for f in two_files)
    sources = ["a" if set(k) <= a else "b" if set(k) <= b else "mixed" for k in full_order]
    assert sorted(sources[:10]) == ["a"] * 6 + ["b"] * 4 and sources[10:] and "mixed" not in sources
    assert sources[:10] != ["a"] * 6 + ["b"] * 4  # the files' batches are shuffled, not one file after the other
    assert full_order[10:] != full_order[:4]  # a new epoch, a new order

    seen.clear()
    with pytest.raises(Interrupt):
        run(_args(tiny_bert_dir, two_files, tmp_path / "cut", **common), callbacks=[StopAt(12)])
    seen.clear()
    resumed = run(_args(tiny_bert_dir, two_files, tmp_path / "cut", **common, resume_from_checkpoint="last"))
    assert resumed["steps"] == 14 and seen == full_order[11:]
    w1, w2 = (load_file(tmp_path / r / "model" / "model.safetensors") for r in ("full", "cut"))
    for k in w1:
        assert torch.equal(w1[k], w2[k]), k  # bitwise


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_processes_equal_one_with_batches_from_one_file(tiny_bert_dir: Path, two_files, tmp_path: Path) -> None:
    """Three SGD steps, dropout off: 2 gloo processes of 4 rows (negatives gathered) equal 1 process of 8, under
    proportional and round_robin; the processes' rows of a step are one global batch of one file. InfoNCE: over
    several steps of learning rate 1, WEINCE's λ (a selection of tail points) turns the rounding differences of
    the gathered sums into visibly different steps (its one-step equality: tests/text/test_train.py)."""
    tiny = without_dropout(tiny_bert_dir)

    def args(out: Path, batch: int, mode: str) -> list[str]:
        return _args(
            tiny, two_files, out, per_device_train_batch_size=batch, max_steps=3, optim="sgd", learning_rate="1.0",
            lr_scheduler_type="constant", max_grad_norm=0, weight_decay=0, save_strategy="no", source_batches=mode,
            loss="infonce", pooler="avg",
        )  # fmt: skip

    modes = ("proportional", "round_robin")
    single = {m: run(args(tmp_path / f"one-{m}", 8, m)) for m in modes}
    accelerate_runs(2, [args(tmp_path / f"two-{m}", 4, m) for m in modes], tmp_path)
    for m in modes:
        two = json.loads((tmp_path / f"two-{m}" / "results.json").read_text())
        assert (single[m]["world_size"], two["world_size"], two["steps"]) == (1, 2, 3)
        assert two["train_loss"] == pytest.approx(single[m]["train_loss"], rel=1e-5)
        w1, w2 = (load_file(tmp_path / f"{r}-{m}" / "model" / "model.safetensors") for r in ("one", "two"))
        for k in (k for k in w1 if not k.endswith("attention.self.key.bias")):  # rounding noise only there
            torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-4 * float(w1[k].abs().max()), msg=k)
    assert single["proportional"]["train_loss"] != single["round_robin"]["train_loss"]  # other batches


def test_a_file_smaller_than_a_global_batch_is_refused_by_name(tiny_bert_dir: Path, two_files, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"b\.txt has 32 row\(s\), fewer than one global batch \(40 × 1 process"):
        run(_args(tiny_bert_dir, two_files, tmp_path / "run", per_device_train_batch_size=40))
    assert not (tmp_path / "run" / "checkpoint-1").exists()
