"""Gradient-cached SimCSE steps on a tiny BERT and real sentences: parameter gradients equal the uncached
step's (dropout on: same masks through the full graph; dropout off: the plain one-forward step), a wrong
replay differs, and Trainer runs (gradient accumulation, bf16 autocast, the command line, two processes)."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, TrainerCallback

from simcse_weince.losses.duplicates import ABSENT_KEY, duplicate_mask, sentence_key, supervised_duplicate_mask
from simcse_weince.losses.layout import BatchKind
from simcse_weince.text.model import SimCSEModel
from simcse_weince.training.grad_cache import RngState, split_batch
from tests.helpers import (
    NO_DROPOUT,
    B,
    accelerate_launch,
    argv,
    assert_grads_close,
    collate,
    grads,
    make_loss,
    tiny_model,
    trainer,
)

NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICES = ["cpu", pytest.param("cuda", marks=NO_CUDA)]  # cuda: the CUDA generator's replay


def sentences(wiki: Path, n: int) -> list[str]:
    lines = [s.strip() for s in wiki.read_text(encoding="utf-8").splitlines()[: 2 * n] if s.strip()][:n]
    lines[5] = lines[2]  # a duplicate: masked as a negative through the sentence keys
    return lines


@pytest.fixture(scope="module")
def batch(tiny_bert_dir: Path, wiki_sample: Path) -> dict[str, torch.Tensor]:
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    return collate(tok)(sentences(wiki_sample, B))


def cached_step(model: SimCSEModel, out: Path, chunk: int, batch: dict, seed: int) -> tuple[torch.Tensor, dict]:
    device = next(model.parameters()).device
    t = trainer(model, out, chunk, use_cpu=device.type == "cpu")
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    torch.manual_seed(seed)
    loss = t.compute_loss(model, batch)
    (loss / 2).backward()  # as the Trainer does with gradient_accumulation_steps = 2
    assert float(t.contrastive_loss.last_diagnostics["lambda_mean"]) > 0.01  # WEINCE's λ is active
    return loss.detach(), grads(model)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", [4, 5])
def test_dropout_on_cached_gradients_equal_the_uncached_step_with_the_same_masks(
    chunk: int, device: str, tiny_bert_dir: Path, batch: dict, tmp_path: Path
) -> None:
    """Dropout on: the reference is the uncached step that draws the same masks — the same chunk forwards from
    the same seed, kept in one graph, one backward of the full-batch loss."""
    model = tiny_model(tiny_bert_dir).to(device)
    loss, got = cached_step(model, tmp_path, chunk, batch, seed=1)

    torch.manual_seed(1)
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    inputs = {k: v for k, v in batch.items() if k != "sentence_key"}
    views = [model(**c) for c in split_batch(inputs, chunk)]
    anchors, positives = torch.cat([v["anchors"] for v in views]), torch.cat([v["positives"] for v in views])
    want_loss = make_loss()(anchors, positives, duplicate_mask(batch["sentence_key"]))
    (want_loss / 2).backward()
    torch.testing.assert_close(loss, want_loss.detach())
    assert_grads_close(got, grads(model))


def test_dropout_on_without_the_replay_the_gradients_differ(
    tiny_bert_dir: Path, batch: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: the same step with the RNG replay switched off (new dropout masks in the re-run)."""
    model = tiny_model(tiny_bert_dir)
    _, want = cached_step(model, tmp_path, 5, batch, seed=1)
    monkeypatch.setattr(RngState, "replay", lambda self: nullcontext())
    _, got = cached_step(model, tmp_path, 5, batch, seed=1)
    with pytest.raises(AssertionError):
        assert_grads_close(got, want)


@pytest.mark.parametrize("chunk", [4, 5])
def test_dropout_off_cached_gradients_equal_the_one_forward_step(
    chunk: int, tiny_bert_dir: Path, batch: dict, tmp_path: Path
) -> None:
    """Without dropout the masks play no part: the reference is the plain uncached step (one forward of 2B)."""
    model = tiny_model(tiny_bert_dir, **NO_DROPOUT)
    loss, got = cached_step(model, tmp_path, chunk, batch, seed=1)
    plain = trainer(model, tmp_path, None)
    want_loss = plain.compute_loss(model, batch)
    (want_loss / 2).backward()
    torch.testing.assert_close(loss, want_loss.detach())
    assert_grads_close(got, grads(model))


@pytest.fixture(scope="module")
def mixed_rows(tiny_bert_dir: Path, wiki_sample: Path) -> dict[str, torch.Tensor]:
    """B supervised rows (anchor, positive, hard negative) of real sentences, 5 of them pairs (absent negative)."""
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    texts = sentences(wiki_sample, 3 * B)
    cells = [[texts[3 * i], texts[3 * i + 1], texts[3 * i + 2] if i % 5 not in (1, 3) else ""] for i in range(B)]
    ids = [tok(c, truncation=True, max_length=16)["input_ids"] if c else [] for row in cells for c in row]
    keys = [[sentence_key(x) if x else ABSENT_KEY for x in ids[3 * i : 3 * i + 3]] for i in range(B)]
    batch = {k: v.view(B, 3, -1) for k, v in tok.pad({"input_ids": ids}, return_tensors="pt").items()}
    return batch | {"sentence_key": torch.tensor(keys), "kind": BatchKind.TRIPLETS}


@pytest.mark.parametrize("dropout", [True, False])
def test_rows_with_absent_negatives_cached_equal_uncached(
    dropout: bool, tiny_bert_dir: Path, mixed_rows: dict, tmp_path: Path
) -> None:
    """Pairs among the triplets (absent negatives, not encoded, masked): the cached step (chunks of 5) equals the
    uncached step — with dropout, the same chunk forwards in one graph; without, the plain one-forward step."""
    assert int((mixed_rows["sentence_key"] == ABSENT_KEY).sum()) == 5
    model = tiny_model(tiny_bert_dir, **({} if dropout else NO_DROPOUT))
    loss, got = cached_step(model, tmp_path, 5, mixed_rows, seed=1)
    torch.manual_seed(1)
    if dropout:
        inputs = {k: v for k, v in mixed_rows.items() if k != "sentence_key"}
        views = [model(**c) for c in split_batch(inputs, 5)]
        keys = mixed_rows["sentence_key"]
        mask = supervised_duplicate_mask(keys[:, 0], keys[:, 1], list(keys[:, 2:].T))
        want_loss = make_loss()(
            torch.cat([v["anchors"] for v in views]), torch.cat([v["positives"] for v in views]), mask,
            negatives=torch.cat([v["negatives"] for v in views], dim=1), absent_negatives=(keys[:, 2:] == ABSENT_KEY).T,
        )  # fmt: skip
    else:
        want_loss = trainer(model, tmp_path, None).compute_loss(model, dict(mixed_rows))
    (want_loss / 2).backward()
    torch.testing.assert_close(loss, want_loss.detach())
    # one forward against chunks: a LayerNorm bias gradient sums every token in another order (1.1e-5 seen)
    assert_grads_close(got, grads(model), rel=1e-5 if dropout else 3e-5)


class FirstStepGrads(TrainerCallback):
    """The parameter gradients of the first optimizer step (after accumulation, before the update)."""

    def __init__(self) -> None:
        self.grads: dict[str, torch.Tensor] = {}

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if not self.grads:
            self.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def train_two_steps(folder: Path, texts: list[str], out: Path, chunk: int | None, precision: str):
    model = tiny_model(folder, **NO_DROPOUT)
    tok = AutoTokenizer.from_pretrained(folder)
    t = trainer(
        model, out, chunk, gradient_accumulation_steps=2, max_steps=2, logging_steps=1, precision=precision,
        use_cpu=precision != "fp16", learning_rate=1e-3, seed=3, disable_tqdm=True, dataloader_num_workers=0,
    )  # fmt: skip
    t.train_dataset, t.data_collator = texts, collate(tok)
    callback = FirstStepGrads()
    t.add_callback(callback)
    t.train()
    return callback.grads, t.state.log_history


@pytest.mark.parametrize("precision", ["fp32", "bf16", pytest.param("fp16", marks=NO_CUDA)])
def test_trainer_run_with_accumulation_matches_the_uncached_run(
    precision: str, tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    """Through ``Trainer.train``: 2 steps of 2 accumulated micro-batches of 12; the first step's gradients
    equal the uncached run's (bf16/fp16 autocast: within 2 % of each tensor's scale, measured 0.4 % in bf16;
    fp16 runs on CUDA, through the gradient scaler), the logs carry a finite loss and WEINCE diagnostics."""
    texts = sentences(wiki_sample, 4 * B)
    want, _ = train_two_steps(tiny_bert_dir, texts, tmp_path / "plain", None, precision)
    got, logs = train_two_steps(tiny_bert_dir, texts, tmp_path / "cached", 5, precision)
    if precision != "fp32":
        for name, w in want.items():
            if name.endswith("attention.self.key.bias"):
                continue  # exactly 0 (a softmax is shift-invariant): bf16 rounding noise, whatever the padding
            scale = float(w.abs().max())
            torch.testing.assert_close(got[name], w, rtol=0.02, atol=0.02 * scale, msg=name)
    else:
        assert_grads_close(got, want)
    steps = [log for log in logs if "loss" in log]
    assert len(steps) == 2 and all(torch.isfinite(torch.tensor(log["loss"])) for log in steps)
    assert all(0 <= log["lambda_mean"] <= 1 for log in steps)


class TrainingForwards(TrainerCallback):
    """The number of rows of every training-mode forward of the model (a forward hook added at train begin)."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        def record(module, args, kwargs, output):
            if module.training:
                self.rows.append(int(kwargs["input_ids"].shape[0]))

        model.register_forward_hook(record, with_kwargs=True)


@pytest.mark.slow
def test_command_line_run_embeds_every_batch_in_cached_chunks(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    """``--gradient_cache_chunk_size 5`` with batches of 16: each step embeds chunks of 5, 5, 5, 1 without
    gradient, then again in the backward's replay; no training forward sees the whole batch."""
    from simcse_weince.cli.train_text import run

    out = tmp_path / "run"
    forwards = TrainingForwards()
    results = run(
        argv(
            model_name_or_path=tiny_bert_dir, init_from_config=True, train_files=wiki_sample,
            drop_unterminated_last_line="wiki1m_for_simcse.head*", max_train_samples=64, max_seq_length=16,
            eval_max_pairs=40, per_device_train_batch_size=16, gradient_cache_chunk_size=5, max_steps=2,
            eval_steps=2, save_steps=2, logging_steps=1, min_tail_points=10, output_dir=out, disable_tqdm=True,
            report_to="none",
        ),
        callbacks=[forwards],
    )  # fmt: skip
    assert forwards.rows == 2 * (2 * [5, 5, 5, 1])  # 2 steps x (first pass + replay) x 4 chunks
    saved = (out / "run_config.yaml").read_text(encoding="utf-8")
    assert "gradient_cache_chunk_size: 5" in saved
    assert results["steps"] == 2 and json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_two_processes_cached_match_one_process_uncached(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    """DDP (2 CPU processes, gloo), negatives gathered: each process embeds its 6 sentences in chunks of 4;
    only the last chunk's backward all-reduces (as many bucket all-reduces as an uncached step); the averaged
    gradients equal one process's uncached step on the global batch of 12."""
    texts = sentences(wiki_sample, B)
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    script = Path(__file__).with_name("grad_cache_ddp.py")
    accelerate_launch(2, [str(script), str(tiny_bert_dir), str(tmp_path)])
    got = torch.load(tmp_path / "grads.pt")
    calls = json.loads((tmp_path / "allreduce.json").read_text())
    assert calls["cached"] == calls["uncached"] > 0  # the chunk backwards all-reduce once, as an uncached step

    model = tiny_model(tiny_bert_dir, **NO_DROPOUT)
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    batch = collate(tok)(texts)
    plain = trainer(model, tmp_path / "plain", None)
    plain.compute_loss(model, batch).backward()
    assert_grads_close(got, grads(model))
