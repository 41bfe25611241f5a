"""Diagnostics of a text run: the saved model's vectors, and the run's own loss settings."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from simcse_weince.cli.diagnose import build_parser, statistics_loss
from simcse_weince.text.export import export_sentence_transformer
from simcse_weince.text.model import SimCSEModel, load_hf_encoder
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import save_run_info

PAIRS = [("a man plays a guitar .", "someone plays an instrument ."), ("the cat sleeps", "a cat is asleep"),
         ("stocks fell on monday", "markets dropped"), ("it rains", "rain is falling")]  # fmt: skip


def _run_folder(tiny_bert_dir: Path, run: Path) -> Path:
    """A training output folder: a cls + MLP-at-inference export and the run's saved settings."""
    torch.manual_seed(5)
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = SimCSEModel(load_hf_encoder(str(tiny_bert_dir), from_config=True), "cls", mlp_only_train=False)
    with torch.no_grad():
        model.mlp[0].weight.normal_(0, 1.0)  # far from identity: dropping the MLP would show
    export_sentence_transformer(model, tok, run / "model")
    save_run_info(run, {"loss": LossArguments(beta_mode="hill", q=0.3, min_tail_points=10)})
    return run


def _args(*argv: str) -> Namespace:
    return build_parser().parse_args(["--model", "m", "--out", "o", *argv])


def test_text_diagnostics_reproduce_the_sentence_transformer(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from simcse_weince.diagnostics.scores import text_pair_batches
    from simcse_weince.text.checkpoint import load_text_checkpoint

    run = _run_folder(tiny_bert_dir, tmp_path / "run")
    st = SentenceTransformer(str(run / "model"), device="cpu")
    ckpt = load_text_checkpoint(str(run))  # what simcse-diagnose loads
    assert ckpt.model.mlp is not None  # the MLP is kept: the head outputs are the inference vectors
    (batch,) = text_pair_batches(ckpt.model, ckpt.tokenizer, PAIRS, 4, 1, show_progress_bar=False)
    order = np.random.default_rng(0).permutation(len(PAIRS))  # text_pair_batches' shuffle (seed 0)
    np.testing.assert_allclose(batch.anchors.numpy(), st.encode([PAIRS[i][0] for i in order]), rtol=0, atol=1e-6)
    np.testing.assert_allclose(batch.positives.numpy(), st.encode([PAIRS[i][1] for i in order]), rtol=0, atol=1e-6)
    # the dropout views go through the same head: in eval mode they equal the vectors too
    enc = ckpt.tokenizer([p[0] for p in PAIRS], padding=True, return_tensors="pt")
    with torch.no_grad():
        head = ckpt.model.eval()(**enc)["anchors"].numpy()
    np.testing.assert_allclose(head, st.encode([p[0] for p in PAIRS]), rtol=0, atol=1e-6)


def test_statistics_use_the_run_settings_then_the_flags(tiny_bert_dir: Path, tmp_path: Path) -> None:
    run = _run_folder(tiny_bert_dir, tmp_path / "run")
    loss, source = statistics_loss(_args(), str(run / "model"), "simcse")
    assert (loss.beta_mode, loss.q, loss.min_tail_points) == ("hill", 0.3, 10)
    assert source == str(run / "run_config.yaml") and not loss.gather_across_devices
    loss, source = statistics_loss(_args("--beta_mode", "unit", "--loss_q", "0.5"), str(run), "simcse")
    assert (loss.beta_mode, loss.q, loss.min_tail_points) == ("unit", 0.5, 10) and "flags" in source
    loss, source = statistics_loss(_args(), str(tmp_path), "ntxent")  # not a run: the WEINCE defaults
    assert (loss.beta_mode, loss.q, loss.layout, source) == ("ols", 0.2, "ntxent", "defaults")


def test_invalid_statistics_setting_fails_before_loading(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from simcse_weince.cli.diagnose import main

    assert main(["--model", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"), "--kappa_rho", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: WEINCE settings (defaults + flags ['kappa_rho']): kappa_rho must be > 0")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--model", "m", "--out", "o", "--temperature", "0.5"])  # the no-op flag is gone
