"""The MLM start of issue 44 at a tiny scale: a quick pretraining whose loss falls, an exact resume, the time
budget, the characterisation, and two SimCSE steps from the quick model with configs/unsup_mlm_mini.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcse_weince.core.digests import folder_damage
from weince_lab.experiments.pretrain_mlm import characterise, main

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def small_corpus(shared_data: Path, tmp_path_factory) -> Path:
    lines = (shared_data / "wikipedia_en_gensim_sample" / "sentences.txt").read_text(encoding="utf-8").splitlines()
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines[:1500]) + "\n", encoding="utf-8")
    return path


def quick(corpus: Path, out: Path, *flags: str) -> dict:
    assert main(["--quick", "--corpus", str(corpus), "--out", str(out), "--no_progress", *flags]) == 0
    return json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def quick_run(small_corpus: Path, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("mlm_quick")
    return out, quick(small_corpus, out)


def test_quick_pretraining_loss_falls(quick_run) -> None:
    out, r = quick_run
    assert r["steps"] == 20 and r["resumed_from"] is None and not r["stopped_by_time"]
    first, last = r["loss_curve"][0][1], r["loss_curve"][-1][1]
    assert first > 9.5  # ~ln(30522) = 10.3 at the start: an untrained output layer
    assert last < first - 0.3, r["loss_curve"]
    held = [x for _, x in r["heldout_curve"]]  # the same fixed masks at every evaluation
    assert held[-1] < held[0] - 0.2 and r["heldout_loss"] == pytest.approx(held[-1])
    for name in ("model/config.json", "model/tokenizer.json", "mlm/model.safetensors", "loss_curve.png"):
        assert (out / name).is_file(), name
    assert folder_damage(out / "model") == [] and folder_damage(out / "mlm") == []  # digests recorded and matching
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(out / "model")
    assert encoder.config.num_hidden_layers == 2 and encoder.config.hidden_size == 32
    assert r["model_config"]["vocab_size"] == 30522


def test_resume_continues_and_reproduces_the_uninterrupted_run(quick_run, small_corpus: Path, tmp_path: Path) -> None:
    _, straight = quick_run
    first = quick(small_corpus, tmp_path, "--max_steps", "10")
    assert first["steps"] == 10
    again = quick(small_corpus, tmp_path, "--max_steps", "20")  # the same command, more steps: resumes
    assert again["resumed_from"] == str(tmp_path / "checkpoints" / "checkpoint-10")
    assert again["steps"] == 20 and [s for s, _ in again["loss_curve"]] == list(range(2, 21, 2))
    # quick mode's constant learning rate: the resumed run must be the uninterrupted one, step for step
    assert [s for s, _ in straight["loss_curve"]] == [s for s, _ in again["loss_curve"]]
    assert [x for _, x in again["loss_curve"]] == pytest.approx([x for _, x in straight["loss_curve"]], rel=1e-5)
    assert again["heldout_loss"] == pytest.approx(straight["heldout_loss"], rel=1e-5)
    assert quick(small_corpus, tmp_path, "--max_steps", "20")["resumed_from"] == again["resumed_from"]  # finished


def test_time_budget_stops_and_saves(small_corpus: Path, tmp_path: Path) -> None:
    r = quick(small_corpus, tmp_path, "--max_minutes", "0.0001")
    assert r["stopped_by_time"] and 1 <= r["steps"] < 20
    assert (tmp_path / "checkpoints" / f"checkpoint-{r['steps']}" / "budget.json").is_file()
    assert (tmp_path / "model" / "config.json").is_file()


def test_characterise_the_start_model(quick_run, tmp_path: Path) -> None:
    out, _ = quick_run
    c = characterise(str(out / "model"), str(tmp_path), tasks="STSB", diagnose_batches=3, batch_size=32, bootstrap=20)
    for pooler in ("avg", "cls_before_pooler"):
        x = c[pooler]
        assert set(x["sts"]) == {"STSBenchmark"} and -100 <= x["sts_avg"] <= 100
        assert 0 < x["anisotropy"] <= 1  # a barely trained encoder: every sentence points the same way
        assert {"xi", "a", "b", "xi_ci", "a_ci", "b_ci"} <= set(x)
    assert json.loads((tmp_path / "characterisation.json").read_text()) == json.loads(json.dumps(c))


def test_simcse_two_steps_from_the_quick_start(quick_run, small_corpus: Path, tmp_path: Path) -> None:
    from simcse_weince.cli.train_text import run
    from tests.helpers import argv

    out, _ = quick_run
    results = run(argv(
        REPO / "configs" / "unsup_mlm_mini.yaml", model_name_or_path=out / "model", train_files=small_corpus,
        max_train_samples=64, max_seq_length=16, per_device_train_batch_size=16, max_steps=2, eval_steps=2,
        save_steps=2, eval_max_pairs=40, min_tail_points=10, eval_before_training=False, eval_test_at_end=False,
        output_dir=tmp_path / "simcse", disable_tqdm=True,
    ))  # fmt: skip
    assert results["steps"] == 2
    assert (tmp_path / "simcse" / "model" / "modules.json").is_file()
