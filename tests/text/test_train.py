"""End-to-end SimCSE training on tiny models and real data slices: trainer hooks, best checkpoint,
SentenceTransformer export, model card, Hub push failure, resume, and a 2-process accelerate run."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from simcse_weince.cli.train_text import run
from simcse_weince.core.paths import senteval_root
from simcse_weince.evaluation.sts import evaluate_sts
from simcse_weince.evaluation.sts_data import load_sts_task
from simcse_weince.text.encoder import SentenceTransformerEncoder, SimCSEEncoder
from simcse_weince.text.model import SimCSEModel, load_hf_encoder
from tests.helpers import Interrupt, StopAt, accelerate_runs, argv, recording_collator, without_dropout

REPO = Path(__file__).resolve().parents[2]


def _args(tiny: Path, wiki: Path, out: Path, **flags: object) -> list[str]:
    """The tiny run's command line; ``flags`` override or add settings."""
    base = dict(
        model_name_or_path=tiny, init_from_config=True, pooler="cls", train_files=wiki,
        drop_unterminated_last_line="wiki1m_for_simcse.head*", max_train_samples=96, max_seq_length=16,
        eval_max_pairs=60, per_device_train_batch_size=16, learning_rate="1e-3", max_steps=4, eval_steps=2,
        save_steps=2, logging_steps=1, min_tail_points=10, output_dir=out, disable_tqdm=True, seed=3,
    )  # fmt: skip
    return argv(**(base | flags))


@pytest.mark.slow
def test_end_to_end_run(tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    dup = tmp_path / "dups.txt"  # half the sentences repeated: the duplicate mask must fire
    lines = wiki_sample.read_text(encoding="utf-8").splitlines()[:40]
    dup.write_text("\n".join(lines + lines) + "\n", encoding="utf-8")
    results = run(_args(tiny_bert_dir, dup, out, report_to="tensorboard"))

    assert results["steps"] == 4
    history = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())["log_history"]
    train_logs = [e for e in history if "loss" in e]
    evals = [e for e in history if "eval_stsb_spearman" in e]
    assert len(train_logs) == 4 and len(evals) == 2
    for e in train_logs:
        assert {"lambda_mean", "lambda_frac_gt_half", "beta_mean", "duplicates_masked_per_step"} <= set(e)
        assert 0 <= e["lambda_mean"] <= 1
    assert sum(e["duplicates_masked_per_step"] for e in train_logs) > 0
    assert results["lambda_curve"] == [(e["step"], e["lambda_mean"]) for e in train_logs]
    # Best checkpoint by STS-B dev was kept and its score reproduced by the exported model.
    best = max(e["eval_stsb_spearman"] for e in evals)
    assert results["best_metric_during_training"] == pytest.approx(best)
    assert results["after"]["stsb_dev"] == pytest.approx(best, abs=1e-4)
    events = list((out / "runs").rglob("events.out.tfevents*"))
    assert events, "TensorBoard wrote no event file"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(events[0].parent), size_guidance={"histograms": 0})
    acc.Reload()
    assert {"weince/lambda", "weince/beta"} <= set(acc.Tags()["histograms"])
    assert "train/lambda_mean" in acc.Tags()["scalars"]

    # Output folder: resolved config, results, a SentenceTransformer folder with its card.
    info = (out / "run_config.yaml").read_text()
    assert "git_revision" in info and "transformers" in info and "beta_mode: ols" in info
    model_dir = out / "model"
    card = (model_dir / "README.md").read_text()
    for needle in (
        "WEINCE",
        "cls_before_pooler",
        "STS-B dev (first 60 pairs)",
        "STS-B test (first 60 pairs)",
        "4 steps",
        '"beta_mode": "ols"',
        'SentenceTransformer("path/to/this/folder")',
    ):
        assert needle in card, needle
    assert str(tmp_path) not in card and "https://github.com/)" not in card  # no local paths, no placeholder
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    tok = AutoTokenizer.from_pretrained(model_dir)
    enc = load_hf_encoder(str(model_dir))
    ours = SimCSEEncoder(SimCSEModel(enc, "cls_before_pooler"), tok).encode(lines[:8])
    np.testing.assert_allclose(SentenceTransformerEncoder(st).encode(lines[:8]), ours, rtol=1e-5, atol=1e-5)
    # "after" is the training's own evaluation of the best checkpoint (not scored again): the exported model,
    # scored afresh on the same 60 dev pairs, gives the same number.
    dev = load_sts_task("STSBenchmark", senteval_root(), "dev").first_pairs(60)
    afresh = evaluate_sts(SentenceTransformerEncoder(st), dev).main
    assert results["after"]["stsb_dev"] == pytest.approx(afresh, abs=1e-4)
    # The exported weights are the best checkpoint's encoder weights.
    best_ckpt = load_file(Path(results["best_checkpoint"]) / "model.safetensors")
    exported = load_file(model_dir / "model.safetensors")
    name = "encoder.layer.0.attention.self.query.weight"
    torch.testing.assert_close(exported[name], best_ckpt[f"encoder.{name}"])


@pytest.mark.slow
def test_offline_optional_push_keeps_everything_and_no_secret_is_written(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    args = _args(
        tiny_bert_dir, wiki_sample, out, max_steps=2, eval_test_at_end=False, push_to_hub=True,
        hub_model_id="someone/simcse-test", hub_push_optional=True, hub_token="hf_SECRET_test_token",
    )  # fmt: skip
    results = run(args)
    assert "someone/simcse-test" in results["hub_error"] and "--hub_push_optional" in results["hub_error"]
    assert (out / "model" / "model.safetensors").is_file() and (out / "model" / "modules.json").is_file()
    assert "someone/simcse-test" in json.loads((out / "results.json").read_text())["hub_error"]  # recorded
    # the token is in no file written to disk (checkpoints' pickled arguments included)
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "training_args.bin" for p in written)
    assert not [p for p in written if b"hf_SECRET_test_token" in p.read_bytes()]


@pytest.mark.slow
def test_resume_reaches_same_step_with_same_data_order(
    tiny_bert_dir: Path,
    wiki_sample: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    common = dict(max_steps=6, eval_steps=3, save_steps=3, eval_test_at_end=False, save_total_limit=3)
    seen = recording_collator(monkeypatch)
    full = run(_args(tiny_bert_dir, wiki_sample, tmp_path / "full", **common))
    full_order = list(seen)
    assert full["steps"] == 6 and len(full_order) == 6

    # Interrupted run: an exception right after step 4 (checkpoint-3 exists).
    seen.clear()
    with pytest.raises(Interrupt), caplog.at_level(logging.ERROR):
        run(_args(tiny_bert_dir, wiki_sample, tmp_path / "cut", **common), callbacks=[StopAt(4)])
    assert (tmp_path / "cut" / "checkpoint-3").is_dir() and not (tmp_path / "cut" / "model").exists()
    assert "the last complete checkpoint is" in caplog.text and "--resume_from_checkpoint last" in caplog.text

    # a kill during the next save left a half-written folder: "last" must skip it and clean it up
    (tmp_path / "cut" / "checkpoint-4").mkdir()
    (tmp_path / "cut" / "checkpoint-4" / "model.safetensors.tmp1a2b").write_bytes(b"partial")
    seen.clear()
    resumed = run(_args(tiny_bert_dir, wiki_sample, tmp_path / "cut", **common, resume_from_checkpoint="last"))
    assert not (tmp_path / "cut" / "checkpoint-4").exists()
    assert resumed["steps"] == 6
    assert seen == full_order[3:]  # steps 4..6 see exactly the batches of the uninterrupted run
    a = load_file(tmp_path / "full" / "checkpoint-6" / "model.safetensors")
    b = load_file(tmp_path / "cut" / "checkpoint-6" / "model.safetensors")
    for k in a:
        assert torch.equal(a[k], b[k]), k  # bitwise


@pytest.mark.slow
def test_resume_restores_the_running_beta_of_the_top_m_weibit_term(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path
) -> None:
    """The top-M Weibit term's β_t is saved with each checkpoint (``loss_state.pt``) and restored on resume: the
    resumed run ends with the uninterrupted run's weights and β_t, bit for bit. The fit moves β_t on every
    step (R² gate 0), so a resume that restarted it at ``topm_beta_init`` would train step 3 differently."""
    common = dict(
        max_steps=4, eval_steps=2, save_steps=2, eval_test_at_end=False, topm_weibit_weight=0.5,
        topm_min_tail_points=16, topm_r2_min=0.0,
    )  # fmt: skip
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert run(_args(tiny_bert_dir, wiki_sample, full, **common))["steps"] == 4
    with pytest.raises(Interrupt):
        run(_args(tiny_bert_dir, wiki_sample, cut, **common), callbacks=[StopAt(3)])
    assert not (cut / "checkpoint-4").exists()
    saved = torch.load(cut / "checkpoint-2" / "loss_state.pt", weights_only=True)
    assert set(saved) == {"topm.beta_t"} and float(saved["topm.beta_t"]) != 4.0  # moved from topm_beta_init
    assert torch.equal(saved["topm.beta_t"], torch.load(full / "checkpoint-2" / "loss_state.pt")["topm.beta_t"])
    assert run(_args(tiny_bert_dir, wiki_sample, cut, **common, resume_from_checkpoint="last"))["steps"] == 4
    end = [torch.load(folder / "checkpoint-4" / "loss_state.pt")["topm.beta_t"] for folder in (full, cut)]
    assert torch.equal(*end) and not torch.equal(end[0], saved["topm.beta_t"])
    a = load_file(full / "checkpoint-4" / "model.safetensors")
    b = load_file(cut / "checkpoint-4" / "model.safetensors")
    assert set(a) == set(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k  # bitwise


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_processes_match_one_process_global_batch(tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path) -> None:
    """One SGD step on 2 gloo processes (batch 16 each, negatives gathered) equals one process with batch 32.

    Dropout is off, the optimizer is plain SGD with lr 1 (weights after the step = weights − gradient), and
    the data set is exactly the 32 sentences of that step, so the global batch is the same set in both runs.
    """
    tiny = without_dropout(tiny_bert_dir)

    def args(out: Path, batch: int, **flags: object) -> list[str]:
        return _args(
            tiny, wiki_sample, out, pooler="avg", max_train_samples=32, per_device_train_batch_size=batch,
            max_steps=1, optim="sgd", learning_rate="1.0", lr_scheduler_type="constant", max_grad_norm=0,
            weight_decay=0, eval_strategy="no", save_strategy="no", load_best_model_at_end=False,
            eval_test_at_end=False, **flags,
        )  # fmt: skip

    single = run(args(tmp_path / "one", 32))
    accelerate_runs(2, [args(tmp_path / "two", 16), args(tmp_path / "two_local", 16, gather_across_devices=False)],
                    tmp_path)  # fmt: skip

    two = json.loads((tmp_path / "two" / "results.json").read_text())
    assert (single["world_size"], two["world_size"], two["steps"]) == (1, 2, 1)
    assert two["train_loss"] == pytest.approx(single["train_loss"], rel=1e-5)
    # the logged statistics are the global batch's, not rank 0's
    assert single["lambda_curve"] and len(two["lambda_curve"]) == len(single["lambda_curve"])
    assert two["mean_lambda"] == pytest.approx(single["mean_lambda"], rel=1e-5, abs=1e-6)
    local = json.loads((tmp_path / "two_local" / "results.json").read_text())
    assert local["mean_lambda"] != pytest.approx(single["mean_lambda"], rel=1e-3)  # control: 16-row batches
    w1 = load_file(tmp_path / "one" / "model" / "model.safetensors")
    w2 = load_file(tmp_path / "two" / "model" / "model.safetensors")
    w_local = load_file(tmp_path / "two_local" / "model" / "model.safetensors")
    assert set(w1) == set(w2)
    for k in w1:
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-6)
    # Control: without gathering, each process sees only 15 negatives and the step differs.
    key = "encoder.layer.0.attention.self.query.weight"
    assert not torch.allclose(w_local[key], w1[key], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["learned_link", "arctanh"])
def test_a_link_loss_trains_from_the_command_line(tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, loss: str):
    """``--loss learned_link`` (a loss with parameters) and ``--loss arctanh`` (no τ): the run ends, its results
    and card say what the link learned, and the learned link is exported beside the model."""
    out = tmp_path / "run"
    results = run(_args(tiny_bert_dir, wiki_sample, out, loss=loss, max_steps=2, temperature=0.1))
    assert results["steps"] == 2
    card = (out / "model" / "README.md").read_text()
    if loss == "learned_link":
        assert len(results["link_trajectory"]) == 2 and results["link_a_final"] != 10.0
        config = json.loads((out / "model" / "loss_config.json").read_text())
        assert config["name"] == "learned_link" and (out / "model" / "loss_state.pt").is_file()
        assert '"learned": {"link_a": ' in card and "Learned link" in card
    else:
        assert "link_trajectory" not in results and not (out / "model" / "loss_config.json").exists()
        assert "Temperature-free" in card and "2501.17683" in card


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["hardness_infonce", "hcl", "dcl", "focal_infonce", "sigmoid"])
def test_the_field_losses_train_from_the_command_line(
    tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path, loss: str
) -> None:
    """``--loss NAME`` for each of the field's losses (issue 55): the run ends, its card names the loss and cites
    its paper; the sigmoid loss's t and b are exported beside the model and stated on the card."""
    from simcse_weince.losses import LOSSES

    out = tmp_path / "run"
    results = run(_args(tiny_bert_dir, wiki_sample, out, loss=loss, max_steps=2, loss_learning_rate=0.01))
    assert results["steps"] == 2 and math.isfinite(results["train_loss"])
    card = (out / "model" / "README.md").read_text()
    assert LOSSES[loss].display_name in card and LOSSES[loss]().citation.split(",")[0] in card
    exported = (out / "model" / "loss_config.json").exists()
    assert exported == (loss == "sigmoid")
    if exported:
        assert json.loads((out / "model" / "loss_config.json").read_text())["temperature"] == 0.1  # its own default
        assert '"learned": {"sigmoid_b": ' in card and '"sigmoid_t": ' in card


@pytest.mark.parametrize(
    "bad",
    [
        ["--beta_mode", "mle"],
        ["--hcl_tau_plus", "1"],
        ["--hardness_mode", "hard"],
        ["--max_seq_length", "2"],
        ["--temperature", "-1"],
        ["--link_a_max", "5"],
        ["--link_b_min", "1"],
        ["--length_groups", "0"],
        ["--length_groups", "1.5"],
        ["--loss", "softmax"],
        ["--source_batches", "by_file"],
    ],
)
def test_invalid_setting_fails_in_one_line_before_anything_loads(
    bad: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from simcse_weince.cli import train_text as train_module

    def loaded(*args, **kwargs):
        raise AssertionError("a model, tokenizer or data set was loaded before the settings were checked")

    for name in ("load_hf_encoder", "prepare_corpus", "stsb_task", "check_model_source"):
        monkeypatch.setattr(train_module, name, loaded)
    monkeypatch.setattr(train_module.AutoTokenizer, "from_pretrained", loaded)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"{bad[0][2:]}: {bad[1]}\n")
    assert train_module.main([str(cfg), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {cfg}: ") and err.count("\n") == 1 and bad[0][2:] in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_one_sentence_tail_batch_is_dropped_not_fatal(tiny_bert_dir: Path, wiki_sample: Path, tmp_path: Path) -> None:
    # 33 sentences in batches of 16: the epoch's third batch would hold one sentence, which no contrastive
    # loss can score; the run drops it (and says so) instead of dying at the end of the epoch.
    out = tmp_path / "run"
    args = _args(tiny_bert_dir, wiki_sample, out, max_steps=-1, num_train_epochs=1, max_train_samples=33,
                 eval_test_at_end=False)  # fmt: skip
    results = run(args)
    assert results["steps"] == 2 and results["text"]["tail_sentences_dropped"] == 1
    assert (out / "model" / "model.safetensors").is_file() and (out / "results.json").is_file()
