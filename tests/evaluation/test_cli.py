"""evaluate_sts.py end to end on a tiny model: table, JSON and Markdown outputs, bad options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcse_weince.cli.evaluate import main
from tests.helpers import argv


def test_cli_on_plain_hf_encoder(tiny_bert_weights_dir: Path, shared_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "ev"
    data = shared_data / "senteval" / "downstream"
    options = argv(
        model=tiny_bert_weights_dir, pooler="avg", tasks="STSB,SICKR", mode="dev", data_dir=data, output_dir=out
    )
    rc = main([*options, "--no_progress"])  # --no_progress is a switch: no value
    assert rc == 0
    printed = capsys.readouterr().out
    assert "| STS-B | SICK-R | STS Avg. |" in printed
    report = json.loads((out / "eval_dev.json").read_text())
    assert report["sts"]["STSBenchmark"]["num_pairs"] == 1500 and report["sts"]["SICKRelatedness"]["num_pairs"] == 500
    assert (out / "eval_dev.md").read_text().startswith("Model:")
    assert report["seconds"] > 0


def test_cli_rejects_bad_options(tiny_bert_weights_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--model", str(tiny_bert_weights_dir), "--mode", "full"])
    capsys.readouterr()
    bad_task = argv(model=tiny_bert_weights_dir, pooler="avg", tasks="STS17", output_dir=tmp_path)
    assert main(bad_task) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown task 'STS17'") and err.count("\n") == 1
    assert main(["--model", str(tiny_bert_weights_dir), "--pooler", "cls", "--output_dir", str(tmp_path)]) == 2
    assert "needs the trained SimCSE MLP" in capsys.readouterr().err


def test_cli_classifier_engine_reaches_the_classifiers_and_graph_needs_cuda(
    tiny_bert_weights_dir: Path, shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch
) -> None:
    import simcse_weince.evaluation.transfer as transfer

    assert main(["--model", "/nonexistent", "--classifier_engine", "graph", "--device", "cpu"]) == 2
    err = capsys.readouterr().err  # before the model or any file is looked at
    assert err == "error: --classifier_engine graph needs a CUDA device; the classifiers would run on cpu\n"
    seen = []
    real = transfer.fit_logregs

    def recording(*args, **kwargs):
        seen.append(args[6] if len(args) > 6 else kwargs.get("engine"))
        return real(*args, **kwargs)

    monkeypatch.setattr(transfer, "fit_logregs", recording)
    argv = ["--model", str(tiny_bert_weights_dir), "--pooler", "avg", "--tasks", "TREC", "--mode", "fast",
            "--data_dir", str(shared_data / "senteval" / "downstream"), "--output_dir", str(tmp_path), "--no_progress",
            "--device", "cpu", "--classifier_engine", "static"]  # fmt: skip
    assert main(argv) == 0
    assert seen == ["static", "static"]  # the penalty search and the refit
    assert json.loads((tmp_path / "eval_fast.json").read_text())["transfer"]["TREC"]["test_acc"] > 0
