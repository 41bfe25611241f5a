"""evaluate_sts.py end to end on a tiny model: table, JSON and Markdown outputs, bad options."""

from __future__ import annotations

import json
import os
import signal
import time
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
    assert report["complete"] is True and report["missing_tasks"] == []


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


def _two_models_named_model(weights: Path, root: Path) -> None:
    """The same tiny encoder saved as ``root/runA/model`` and ``root/runB/model``: two models, one last name."""
    import shutil

    for run in ("runA", "runB"):
        shutil.copytree(weights, root / run / "model")


def test_cli_reports_of_two_models_named_model_do_not_collide(
    tiny_bert_weights_dir: Path, shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch
) -> None:
    _two_models_named_model(tiny_bert_weights_dir, tmp_path)
    monkeypatch.chdir(tmp_path)
    data = shared_data / "senteval" / "downstream"

    def evaluate(model: str, *extra: str) -> int:
        options = argv(model=model, pooler="avg", tasks="SICKR", mode="dev", data_dir=data, device="cpu")
        return main([*options, "--no_progress", *extra])

    assert evaluate("runA/model") == 0 and evaluate("runB/model") == 0
    reports = {run: tmp_path / "eval_results" / f"{run}__model" / "eval_dev.json" for run in ("runA", "runB")}
    for run, js in reports.items():
        saved = json.loads(js.read_text())
        assert saved["model"] == f"{run}/model" and saved["model_id"] == str((tmp_path / run / "model").resolve())
        assert saved["complete"] is True and saved["missing_tasks"] == []
        assert js.with_suffix(".md").read_text().startswith(f"Model: `{run}/model`")
    assert not (tmp_path / "eval_results" / "model").exists()
    capsys.readouterr()
    # the same model again, spelt differently, replaces its own report
    assert evaluate(str(tmp_path / "runA" / "model") + "/") == 0
    assert json.loads(reports["runA"].read_text())["model"].endswith("runA/model/")
    # another model's report is not replaced without --overwrite; the refusal comes before the model loads
    before = reports["runA"].read_text()
    capsys.readouterr()
    assert evaluate("runB/model", "--output_dir", str(reports["runA"].parent)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {reports['runA']} is the report of another model") and err.count("\n") == 1
    assert "--overwrite" in err and reports["runA"].read_text() == before
    assert evaluate("runB/model", "--output_dir", str(reports["runA"].parent), "--overwrite") == 0
    assert json.loads(reports["runA"].read_text())["model"] == "runB/model"


@pytest.mark.parametrize("stop", ["interrupted (Ctrl-C)", "SIGTERM"])
def test_cli_interrupted_evaluation_ends_in_one_line_and_leaves_a_partial_report(
    stop: str,
    tiny_bert_weights_dir: Path,
    shared_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch,
) -> None:
    """Ctrl-C, or SIGTERM (a scheduler's stop: handled as Ctrl-C is), in the second task."""
    import simcse_weince.evaluation.families.sts as sts_family
    import simcse_weince.evaluation.transfer as transfer

    out = tmp_path / "ev"
    js, md = out / "eval_fast.json", out / "eval_fast.md"
    on_disk_before_first_task = []
    real_sts = sts_family.evaluate_sts

    def sts_seeing_the_saved_report(*args, **kwargs):
        on_disk_before_first_task.append(json.loads(js.read_text()) if js.exists() else None)  # what a kill leaves
        return real_sts(*args, **kwargs)

    def ctrl_c(*args, **kwargs):
        if stop == "SIGTERM":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        raise KeyboardInterrupt  # Ctrl-C in the transfer phase, after the first task

    monkeypatch.setattr(sts_family, "evaluate_sts", sts_seeing_the_saved_report)
    monkeypatch.setattr(transfer, "evaluate_transfer", ctrl_c)
    data = shared_data / "senteval" / "downstream"
    options = argv(
        model=tiny_bert_weights_dir, pooler="avg", tasks="SICKR,TREC,MPQA", mode="fast", data_dir=data,
        output_dir=out, device="cpu",
    )  # fmt: skip
    assert main([*options, "--no_progress"]) == 130
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if line and "\r" not in line]  # not transformers' "Loading weights" bar
    assert len(lines) == 1 and "Traceback" not in err, err  # one line, no traceback
    err = lines[0]
    assert err.startswith(f"stopped: {stop} during TREC: partial report in {js} and eval_fast.md")
    assert "(1 of 3 tasks done; missing TREC, MPQA)" in err
    assert on_disk_before_first_task[0] is not None and on_disk_before_first_task[0]["complete"] is False
    assert on_disk_before_first_task[0]["missing_tasks"] == ["SICKRelatedness", "TREC", "MPQA"]
    saved = json.loads(js.read_text())
    assert saved["complete"] is False and saved["missing_tasks"] == ["TREC", "MPQA"]
    assert list(saved["sts"]) == ["SICKRelatedness"] and saved["transfer"] == {}
    assert "**Partial report**: 1 of 3 tasks done, missing TREC, MPQA" in md.read_text()
    assert not list(out.glob(".*.tmp"))


def _beir_folder(folder: Path, qrels: str = "q1\td1\t1\n") -> Path:
    """A one-query, one-document BEIR folder with the given qrels rows."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a cat"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "a dog"}\n', encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    return folder


def test_cli_cuts_a_huge_quoted_value_to_a_readable_length(
    tiny_bert_weights_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A qrels row whose id is megabytes long (a file with no line breaks, a binary file) ends in one readable
    line: the quoted id cut, its length said, the rest of the message kept."""
    huge = "x" * 3_000_000
    folder = _beir_folder(tmp_path / "beir", f"{huge}\td1\t1\n")
    options = ["--model", str(tiny_bert_weights_dir), "--tasks", f"retrieval:{folder}", "--output_dir", str(tmp_path)]
    assert main(options) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 600, err[:1000]
    assert err.startswith(f"error: {folder}/qrels/test.tsv:2: query-id '{'x' * 200}…' (3000000 characters) is not "
                          "in queries.jsonl")  # fmt: skip
    from simcse_weince.cli.errors import cut_long

    prose = "the column 'sent1' holds " + "words " * 60 + "of the model's file"
    assert cut_long(prose) == prose  # apostrophes of words do not pair up around a part of the message
    assert cut_long("/" + "a" * 300) == "/" + "a" * 300  # a long path is kept


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("cuda:3", "error: command line: --device cuda:3: CUDA is not available on this machine"),
        ("cuda", "error: command line: --device cuda: CUDA is not available on this machine"),
        (
            "foo",
            "error: command line: --device foo: not a device; expected cpu, cuda, cuda:N, mps",
        ),
        (
            "cuda:x",
            "error: command line: --device cuda:x: not a device; expected cpu, cuda, cuda:N, mps",
        ),
    ],
)
def test_cli_checks_the_device_before_anything_loads(
    device: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device this machine does not have is one line naming it, before the model (here: none) is looked at."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--model", str(tmp_path / "no-model"), "--device", device, "--output_dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(expected) and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.out + captured.err


def test_cli_device_index_beyond_the_devices_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert main(["--model", str(tmp_path / "no-model"), "--device", "cuda:3", "--output_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: command line: --device cuda:3: this machine has 2 CUDA devices (cuda:0 to cuda:1)")


def test_cli_retrieval_path_with_commas(
    tiny_bert_weights_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--tasks is split on commas, but a comma inside retrieval:PATH is part of the path: the spec is split only
    where the next part starts a task (a name, a family word, a prefix), or where the joined path does not exist."""
    from simcse_weince.evaluation.runner import resolve_tasks

    one = _beir_folder(tmp_path / "beir,v2")
    two = _beir_folder(tmp_path / "other,STSB")  # a part that reads as a task name, but the joined path exists
    chosen = resolve_tasks(f"retrieval:{one},STSB, retrieval:{two},sickr")
    assert chosen["retrieval"] == [f"retrieval:{one}", f"retrieval:{two}"]
    assert chosen["sts"] == ["STSBenchmark", "SICKRelatedness"]
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        resolve_tasks(f"STSB,nope,retrieval:{one}")
    out = tmp_path / "ev"
    options = ["--model", str(tiny_bert_weights_dir), "--pooler", "avg", "--tasks", f"retrieval:{one},retrieval:{two}",
               "--output_dir", str(out), "--device", "cpu", "--no_progress"]  # fmt: skip
    assert main(options) == 0
    report = json.loads((out / "eval_test.json").read_text())
    assert sorted(report["retrieval"]) == sorted([f"retrieval:{one}", f"retrieval:{two}"]), report["retrieval"].keys()
