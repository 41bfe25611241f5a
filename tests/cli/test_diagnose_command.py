"""``simcse-diagnose``: a stop ends in one line saying what was kept and how to go on."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import torch

from simcse_weince.cli import diagnose


def _terminated(*args, **kwargs):
    """A ``SIGTERM`` to this process (as ``kill`` sends it), arriving while the command works."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises here
    raise AssertionError("SIGTERM was not handled")


def _embedded(args, path: str, kind: str):
    """Three batches of 32 random unit vectors and their noisy positives, in place of an encoder's (fast)."""
    from simcse_weince.diagnostics.scores import EmbeddedBatch

    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(3):
        a = torch.nn.functional.normalize(torch.randn(32, 16, generator=g), dim=1)
        p = torch.nn.functional.normalize(a + 0.5 * torch.randn(32, 16, generator=g), dim=1)
        batches.append(EmbeddedBatch(a, p, "simcse"))
    return batches, {"alignment": 0.0, "uniformity": 0.0}, "random vectors"


def test_a_stop_says_what_was_kept_and_that_the_same_command_runs_again(
    tiny_bert_weights_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "diag"
    argv = ["--model", str(tiny_bert_weights_dir), "--pooler", "avg", "--out", str(out), "--bootstrap", "10",
            "--q", "0.95", "--qs", "0.9", "0.95"]  # fmt: skip
    with monkeypatch.context() as patch:
        patch.setattr(diagnose, "collect", _terminated)
        assert diagnose.main(argv) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"stopped: SIGTERM: nothing was written into {out} (the plots and report.json are written at the end); "
        "run the same command to diagnose again from the start"
    )
    assert not list(out.iterdir())
    monkeypatch.setattr(diagnose, "collect", _embedded)
    with monkeypatch.context() as patch:
        patch.setattr(diagnose, "plot_link", _terminated)
        assert diagnose.main(argv) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"stopped: SIGTERM: kept tail_gpd.png, threshold_stability.png, lambda_hist.png in {out}, report.json not "
        "written; run the same command to diagnose again from the start (it replaces them)"
    )
    assert diagnose.main(argv) == 0 and (out / "report.json").is_file()


def _quantiles(*argv: str) -> tuple:
    args = diagnose.build_parser().parse_args(["--model", "m", "--out", "o", *argv])
    return args.pot_quantile, args.stability_quantiles, args.hardness_quantile


def test_the_quantile_flags_say_what_they_hold_and_the_former_spellings_still_work() -> None:
    """``--pot_quantile`` (POT threshold), ``--stability_quantiles`` (stability plot) and ``--hardness_quantile``
    (the loss's q) were ``--q``, ``--qs`` and ``--loss_q``: those still parse, to the same settings, unlisted."""
    assert _quantiles() == (0.99, [0.98, 0.985, 0.99, 0.992, 0.995], None)  # None: the run's saved q
    named = ("--pot_quantile", "0.95", "--stability_quantiles", "0.9", "0.95", "--hardness_quantile", "0.5")
    former = ("--q", "0.95", "--qs", "0.9", "0.95", "--loss_q", "0.5")
    assert _quantiles(*named) == _quantiles(*former) == (0.95, [0.9, 0.95], 0.5)
    shown = diagnose.build_parser().format_help()
    assert "--hardness_quantile" in shown and "--pot_quantile" in shown
    assert not {"--q", "--qs", "--loss_q"} & set(shown.replace("[", " ").split())
