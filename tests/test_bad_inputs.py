"""A catalogue of bad inputs, one parametrised test per command: each ends in one line on stderr
(``error: ...`` naming the file, value or model and what was expected), exit code 2, no traceback, no
argparse usage text, and nothing heavy loaded first (the cases run in well under a second each). An
expected text that starts with ``error: `` must begin the line: it names the error's true source (the YAML
file, ``{tmp}`` standing for the test's folder, or ``command line: --flag value``; ``{tiny}`` and ``{weights}``
stand for the tiny model's folders)."""

from __future__ import annotations

import gzip
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

Case = Callable[[Path, dict], list[str]]  # (tmp folder, fixtures) -> argv


def _text_args(tmp: Path, fx: dict, *extra: str) -> list[str]:
    return ["--model_name_or_path", str(fx["tiny"]), "--init_from_config", "true", "--train_files", str(fx["wiki"]),
            "--output_dir", str(tmp / "out"), *extra]  # fmt: skip


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _yaml(tmp: Path, text: str) -> str:
    return _write(tmp / "c.yaml", text.encode())


def _corrupt_image_run(tmp: Path) -> list[str]:
    """A tiny SimCLR run on the fake CIFAR-10 zips, one training member of which is not an image, read by a
    DataLoader worker (which re-raises the error with its whole traceback in the message)."""
    from tests.helpers import argv, write_cifar10_zips

    root = write_cifar10_zips(tmp / "data", train_per_class=4, test_per_class=2)
    with zipfile.ZipFile(root / "cifar10_train_jpeg.zip", "a") as z:
        z.writestr("train/dog/9999.jpg", b"definitely not a jpeg")
    return argv(data_dir=root, backbone="resnet18_slim", output_dir=tmp / "o", per_device_train_batch_size=4,
                dataloader_num_workers=1, disable_tqdm=True, report_to="none")  # fmt: skip


def _previous_run(tmp: Path) -> Path:
    (tmp / "out" / "checkpoint-40").mkdir(parents=True)
    (tmp / "out" / "results.json").write_text("{}")
    return tmp / "out"


TRAIN_CASES: dict[str, tuple[Case, str]] = {
    "missing config file": (lambda t, fx: [str(t / "nope.yaml")], "config file not found"),
    "unknown YAML key": (lambda t, fx: [_write(t / "c.yaml", b"learning_rat: 3\n")], "unknown config keys"),
    "YAML not a mapping": (lambda t, fx: [_write(t / "c.yaml", b"- a\n- b\n")], "expected a mapping"),
    "invalid YAML": (
        lambda t, fx: [_write(t / "c.yaml", b"a: [1\n")],
        "error: {tmp}/c.yaml:2:1: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow "
        "sequence at line 1, column 4)",
    ),
    "bad choice in YAML": (lambda t, fx: [_write(t / "c.yaml", b"beta_mode: mle\n")], "beta_mode must be one of"),
    "unknown flag": (lambda t, fx: _text_args(t, fx, "--learning_rat", "1"), "--learning_rat"),
    # errors name their true source: a value from the command line is not blamed on the YAML file, and back
    "unknown flag after a YAML file": (
        lambda t, fx: [_yaml(t, "temperature: 0.05\n"), *_text_args(t, fx, "--learning_rat", "1")],
        "error: command line: unknown flag --learning_rat (did you mean --learning_rate?)",
    ),
    "bad value on the command line after a YAML file": (
        lambda t, fx: [_yaml(t, "temperature: 0.05\n"), *_text_args(t, fx, "--temperature", "-0.05")],
        "error: command line: --temperature -0.05: temperature must be > 0, got -0.05",
    ),
    "bad choice on the command line": (
        lambda t, fx: [_yaml(t, "beta_mode: ols\n"), *_text_args(t, fx, "--beta_mode", "mle")],
        "error: command line: --beta_mode mle: invalid choice: 'mle'",
    ),
    "bad number on the command line": (
        lambda t, fx: _text_args(t, fx, "--max_steps", "ten"),
        "error: command line: --max_steps ten: invalid int value: 'ten'",
    ),
    "bad YAML value with command-line overrides": (
        lambda t, fx: [_yaml(t, "temperature: -0.05\n"), *_text_args(t, fx, "--q", "0.3")],
        "error: {tmp}/c.yaml: temperature must be > 0, got -0.05",
    ),
    "YAML value that is not a number": (
        lambda t, fx: [_yaml(t, "max_steps: ten\n"), *_text_args(t, fx)],
        "error: {tmp}/c.yaml: max_steps: invalid int value: 'ten'",
    ),
    "max_steps 0": (
        lambda t, fx: _text_args(t, fx, "--max_steps", "0"),
        "error: command line: --max_steps 0: max_steps must be > 0, or -1 to train for num_train_epochs (> 0); got 0",
    ),
    "num_train_epochs 0": (
        lambda t, fx: _text_args(t, fx, "--max_steps", "-1", "--num_train_epochs", "0"),
        "error: command line: --num_train_epochs 0: num_train_epochs must be > 0 when max_steps is -1",
    ),
    "output_dir is a file": (
        lambda t, fx: _text_args(t, fx, "--output_dir", _write(t / "out.txt", b"x")),
        "error: command line: --output_dir {tmp}/out.txt: output_dir {tmp}/out.txt is a file; expected a folder",
    ),
    "temperature 0": (lambda t, fx: _text_args(t, fx, "--temperature", "0"), "temperature must be > 0"),
    "hard_negative_weight nan": (
        lambda t, fx: _text_args(t, fx, "--hard_negative_weight", "nan"),
        "error: command line: --hard_negative_weight nan: hard_negative_weight must be a finite number, got nan",
    ),
    "hard_negative_weight inf in YAML": (
        lambda t, fx: [_yaml(t, "hard_negative_weight: .inf\n"), *_text_args(t, fx)],
        "error: {tmp}/c.yaml: hard_negative_weight must be a finite number, got inf",
    ),
    # every float setting is finite (a nan fails `> 0` checks as false, an inf passes them as true)
    "temperature inf": (
        lambda t, fx: _text_args(t, fx, "--temperature", "inf"),
        "error: command line: --temperature inf: temperature must be a finite number, got inf",
    ),
    "learning_rate nan": (
        lambda t, fx: _text_args(t, fx, "--learning_rate", "nan"),
        "error: command line: --learning_rate nan: learning_rate must be a finite number, got nan",
    ),
    "learning_rate inf in YAML": (
        lambda t, fx: [_yaml(t, "learning_rate: .inf\n"), *_text_args(t, fx)],
        "error: {tmp}/c.yaml: learning_rate must be a finite number, got inf",
    ),
    "negative learning rate in scientific notation": (
        lambda t, fx: _text_args(t, fx, "--learning_rate", "-1e-5"),
        "error: command line: --learning_rate -1e-5: learning_rate must be >= 0.0; got -1e-05",
    ),
    "key given twice in YAML": (
        lambda t, fx: [_yaml(t, "max_steps: 2\ntemperature: 0.1\nmax_steps: 120\n"), *_text_args(t, fx)],
        "error: {tmp}/c.yaml:3: max_steps is given twice (lines 1 and 3); expected each key once",
    ),
    "empty name in comma-joined text_columns": (
        lambda t, fx: _text_args(t, fx, "--text_columns", "sent0,,hard_neg"),
        "error: command line: --text_columns sent0,,hard_neg: text_columns: every column name must be a non-empty",
    ),
    "hub_model_id not an id, with push_to_hub and no token": (
        lambda t, fx: _text_args(t, fx, "--push_to_hub", "true", "--hub_model_id", "a/b/c"),
        "error: command line: --hub_model_id a/b/c: hub_model_id 'a/b/c' is not a Hub repository id; expected name "
        "or namespace/name",
    ),
    "max_seq_length beyond the model's positions": (
        lambda t, fx: _text_args(t, fx, "--max_seq_length", "100"),
        "error: command line: --max_seq_length 100: the model {tiny} has 64 positions; expected at most 64",
    ),
    "max_seq_length 2": (lambda t, fx: _text_args(t, fx, "--max_seq_length", "2"), "max_seq_length must be >= 3"),
    "batch of 1": (lambda t, fx: _text_args(t, fx, "--per_device_train_batch_size", "1"), "at least 2 rows"),
    "drop flag as bool": (
        lambda t, fx: _text_args(t, fx, "--drop_unterminated_last_line", "true"),
        "drop_unterminated_last_line names the files",
    ),
    "missing training file": (
        lambda t, fx: _text_args(t, fx, "--train_files", str(t / "none.txt")),
        "training text file not found",
    ),
    "directory as training file": (lambda t, fx: _text_args(t, fx, "--train_files", str(t)), "is a directory"),
    "pipe as training file": (  # what bash's <(head -400 f.txt) passes: /dev/fd/63, a pipe (read it never blocks)
        lambda t, fx: _text_args(t, fx, "--train_files", _fifo(t / "part.txt")),
        "error: training text file {tmp}/part.txt is a pipe (process substitution, <(...), or a FIFO); training "
        "reads a file more than once",
    ),
    "gzip training file": (
        lambda t, fx: _text_args(t, fx, "--train_files", _write(t / "a.txt.gz", gzip.compress(b"a b\n"))),
        "gzip-compressed; decompress it first",
    ),
    "invalid UTF-8": (
        lambda t, fx: _text_args(t, fx, "--train_files", _write(t / "bad.txt", b"ok line\nbad \xff byte\n")),
        "bad.txt:2: invalid UTF-8",
    ),
    "empty training file": (
        lambda t, fx: _text_args(t, fx, "--train_files", _write(t / "e.txt", b"\n \n")),
        "no sentences",
    ),
    "model path missing": (
        lambda t, fx: [*_text_args(t, fx), "--model_name_or_path", str(t / "no-model")],
        "no such path",
    ),
    "folder without a model": (
        lambda t, fx: [*_text_args(t, fx), "--model_name_or_path", str(t)],
        "is not a model folder",
    ),
    "unknown Hub id offline": (
        lambda t, fx: [*_text_args(t, fx), "--model_name_or_path", "nobody/no-such-model"],
        "offline Hugging Face cache",
    ),
    "output folder holds a run": (
        lambda t, fx: _text_args(t, fx, "--output_dir", str(_previous_run(t))),
        "holds a previous run",
    ),
    "resume without checkpoint": (
        lambda t, fx: _text_args(t, fx, "--resume_from_checkpoint", "last"),
        "no complete checkpoint",
    ),
    "resume from a path that does not exist": (
        lambda t, fx: _text_args(t, fx, "--resume_from_checkpoint", str(t / "nowhere" / "checkpoint-4")),
        "error: command line: --resume_from_checkpoint {tmp}/nowhere/checkpoint-4: no such folder",
    ),
    "fsdp asked for": (
        lambda t, fx: _text_args(t, fx, "--fsdp", "full_shard"),
        "error: command line: --fsdp full_shard: fsdp is not supported: the loss gathers every process's embeddings",
    ),
    "deepspeed asked for": (
        lambda t, fx: _text_args(t, fx, "--deepspeed", str(t / "ds.json")),
        "error: command line: --deepspeed {tmp}/ds.json: deepspeed is not supported:",
    ),
    "validation in no known form": (
        lambda t, fx: _text_args(t, fx, "--validation", "beir:x"),
        "error: command line: --validation beir:x: validation 'beir:x': expected stsb (STS-B dev: stsb_spearman, "
        "stsb_pearson), sts:PATH (a CSV/TSV/JSONL file",
    ),
    "validation metric it does not report": (
        lambda t, fx: _text_args(t, fx, "--validation", f"retrieval:{t}"),
        "metric_for_best_model 'stsb_spearman' is not a metric of validation 'retrieval:{tmp}'; expected one of "
        "retrieval_ndcg@10",
    ),
    "validation folder missing": (
        lambda t, fx: _text_args(
            t, fx, "--validation", f"retrieval:{t / 'no'}", "--metric_for_best_model", "retrieval_ndcg@10"
        ),
        "error: no such retrieval folder {tmp}/no",
    ),
    "validation STS file lacks a column": (
        lambda t, fx: _text_args(
            t,
            fx,
            "--validation",
            "sts:" + _write(t / "v.csv", b"sentence1,score\na,1\n"),
            "--metric_for_best_model",
            "sts_spearman",
        ),
        "error: {tmp}/v.csv:1: the header lacks sentence2",
    ),
    "eval_max_pairs with a retrieval validation": (
        lambda t, fx: _text_args(t, fx, "--validation", f"retrieval:{t}", "--eval_max_pairs", "10"),
        "eval_max_pairs cuts STS pairs, but validation",
    ),
    "missing SentEval folder": (
        lambda t, fx: _text_args(t, fx, "--senteval_dir", str(t / "no-senteval")),
        "STSBenchmark",
    ),
}


def _beir(tmp: Path, corpus: str = '{"_id": "d1", "text": "a"}\n', queries: str = '{"_id": "q1", "text": "b"}\n',
          qrels: str | None = "q1\td1\t1\n", header: str = "query-id\tcorpus-id\tscore\n") -> str:  # fmt: skip
    """A BEIR folder in ``tmp/beir``, its files as given (``qrels`` None: no qrels folder)."""
    folder = tmp / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (folder / "queries.jsonl").write_text(queries, encoding="utf-8")
    if qrels is not None:
        (folder / "qrels").mkdir()
        (folder / "qrels" / "test.tsv").write_text(header + qrels, encoding="utf-8")
    return f"retrieval:{folder}"


def _eval_beir(**files: str | None) -> Case:
    return lambda t, fx: ["--model", str(fx["weights"]), "--tasks", _beir(t, **files)]


EVAL_CASES: dict[str, tuple[Case, str]] = {
    "retrieval folder missing": (
        lambda t, fx: ["--model", str(fx["weights"]), "--tasks", f"retrieval:{t / 'nope'}"],
        "error: no such retrieval folder {tmp}/nope; expected a BEIR folder",
    ),
    "retrieval corpus line not JSON": (
        _eval_beir(corpus='{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": \n'),
        "error: {tmp}/beir/corpus.jsonl:2: not JSON",
    ),
    "retrieval duplicate document id": (
        _eval_beir(corpus='{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n'),
        "error: {tmp}/beir/corpus.jsonl:2: duplicate _id 'd1' (first at line 1)",
    ),
    "retrieval query without text": (
        _eval_beir(queries='{"_id": "q1"}\n'),
        "error: {tmp}/beir/queries.jsonl:1: expected a text 'text', got no such field",
    ),
    "retrieval empty corpus": (_eval_beir(corpus="\n"), "error: {tmp}/beir/corpus.jsonl: no entries"),
    "retrieval qrel names an unknown query": (
        _eval_beir(qrels="q1\td1\t1\nq9\td1\t1\n"),
        "error: {tmp}/beir/qrels/test.tsv:3: query-id 'q9' is not in queries.jsonl",
    ),
    "retrieval qrel names an unknown document": (
        _eval_beir(qrels="q1\td7\t1\n"),
        "error: {tmp}/beir/qrels/test.tsv:2: corpus-id 'd7' is not in corpus.jsonl",
    ),
    "retrieval qrels without a header, a text score first": (  # was skipped as if it were a header, silently
        _eval_beir(qrels="q1\td1\thigh\nq1\td1\t1\n", header=""),
        "error: {tmp}/beir/qrels/test.tsv:1: expected a numeric score in column 3 or a header line naming query-id, "
        "corpus-id, score, got 'high'",
    ),
    "retrieval qrels header of other names": (
        _eval_beir(qrels="q1\td7\t1\n", header="QID\tdoc_id\tRelevance\n"),
        "error: {tmp}/beir/qrels/test.tsv:2: corpus-id 'd7' is not in corpus.jsonl",
    ),
    "retrieval qrels split missing": (
        _eval_beir(qrels=None),
        "error: missing file {tmp}/beir/qrels/test.tsv (the test split); it has no qrels/*.tsv",
    ),
    "retrieval without a folder": (
        lambda t, fx: ["--model", str(fx["weights"]), "--tasks", "retrieval:"],
        "names no folder; expected retrieval:PATH",
    ),
    "unknown task": (lambda t, fx: ["--model", str(fx["weights"]), "--tasks", "STS17"], "unknown task 'STS17'"),
    "batch_size 0": (
        lambda t, fx: ["--model", str(fx["weights"]), "--tasks", "STSB", "--batch_size", "0"],
        "error: command line: --batch_size 0: expected an integer >= 1",
    ),
    "max_length 0": (
        lambda t, fx: ["--model", str(fx["weights"]), "--tasks", "STSB", "--max_length", "0"],
        "error: command line: --max_length 0: expected an integer >= 3",
    ),
    "negative seed": (
        lambda t, fx: ["--model", str(fx["weights"]), "--tasks", "STSB", "--seed", "-1"],
        "error: command line: --seed -1: expected an integer in [0, 4294967295]",
    ),
    "max_length beyond the model's positions": (
        lambda t, fx: ["--model", str(fx["weights"]), "--tasks", "STSB", "--max_length", "100"],
        "error: command line: --max_length 100: the model {weights} has 64 positions; expected at most 64",
    ),
    "missing task folder": (
        lambda t, fx: ["--model", str(fx["weights"]), "--tasks", "MR", "--data_dir", str(t)],
        "MR",
    ),
    "model path missing": (lambda t, fx: ["--model", str(t / "none"), "--tasks", "STSB"], "no such path"),
    "cls pooler on a plain encoder": (
        lambda t, fx: ["--model", str(fx["weights"]), "--pooler", "cls", "--tasks", "STSB"],
        "needs the trained SimCSE MLP",
    ),
}

VISION_CASES: dict[str, tuple[Case, str]] = {
    "bad backbone in YAML": (lambda t, fx: [_write(t / "v.yaml", b"backbone: vgg\n")], "backbone must be one of"),
    "bad backbone on the command line": (
        lambda t, fx: ["--backbone", "vgg", "--output_dir", str(t / "o")],
        "error: command line: --backbone vgg: invalid choice: 'vgg'",
    ),
    "corrupt image in the archive, read by a worker": (
        lambda t, fx: _corrupt_image_run(t),
        "error: {tmp}/data/cifar10_train_jpeg.zip: cannot decode member 'train/dog/9999.jpg' (not a format PIL "
        "can read); expected an image file",
    ),
    "image size 0": (lambda t, fx: ["--image_size", "0", "--output_dir", str(t / "o")], "image_size must be >= 8"),
    "crop_min_scale nan": (
        lambda t, fx: ["--crop_min_scale", "nan", "--output_dir", str(t / "o")],
        "error: command line: --crop_min_scale nan: crop_min_scale must be a finite number, got nan",
    ),
    "augment_strength inf in YAML": (
        lambda t, fx: [_write(t / "v.yaml", b"augment_strength: .inf\n"), "--output_dir", str(t / "o")],
        "error: {tmp}/v.yaml: augment_strength must be a finite number, got inf",
    ),
    "hard_negative_weight on SimCLR views": (
        lambda t, fx: ["--hard_negative_weight", "1", "--output_dir", str(t / "o")],
        "error: hard_negative_weight must be 0 for layout 'ntxent' (it has no hard negatives), got 1.0",
    ),
    "hard_negative_weight nan on SimCLR views": (
        lambda t, fx: ["--hard_negative_weight", "nan", "--output_dir", str(t / "o")],
        "error: command line: --hard_negative_weight nan: hard_negative_weight must be a finite number, got nan",
    ),
    "missing image archive": (
        lambda t, fx: ["--data_dir", str(t), "--output_dir", str(t / "o")],
        "image archive not found",
    ),
}

DIAGNOSE_CASES: dict[str, tuple[Case, str]] = {
    "invalid statistics flag": (
        lambda t, fx: ["--model", str(fx["weights"]), "--out", str(t / "d"), "--loss_q", "2"],
        "q must be in [0, 1]",
    ),
    "model path missing": (lambda t, fx: ["--model", str(t / "none"), "--out", str(t / "d")], "no such path"),
}


@pytest.fixture
def fx(tiny_bert_dir: Path, tiny_bert_weights_dir: Path, wiki_sample: Path) -> dict:
    return {"tiny": tiny_bert_dir, "weights": tiny_bert_weights_dir, "wiki": wiki_sample}


def _check(main: Callable, argv: list[str], expected: str, capsys: pytest.CaptureFixture, tmp: Path, fx: dict) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and "\n" not in err, captured.err
    for name, value in (("tmp", tmp), ("tiny", fx["tiny"]), ("weights", fx["weights"])):
        expected = expected.replace(f"{{{name}}}", str(value))
    assert err.startswith(expected) if expected.startswith("error: ") else expected in err, err
    assert "Traceback" not in captured.out + captured.err
    assert "usage:" not in captured.out + captured.err  # argparse's usage wall


@pytest.mark.parametrize("case", sorted(TRAIN_CASES))
def test_train(case: str, fx: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from simcse_weince.cli.train_text import main

    argv, expected = TRAIN_CASES[case][0](tmp_path, fx), TRAIN_CASES[case][1]
    _check(main, argv, expected, capsys, tmp_path, fx)


@pytest.mark.parametrize("case", sorted(EVAL_CASES))
def test_evaluate(case: str, fx: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from simcse_weince.cli.evaluate import main

    argv, expected = EVAL_CASES[case][0](tmp_path, fx), EVAL_CASES[case][1]
    _check(main, [*argv, "--output_dir", str(tmp_path / "eval")], expected, capsys, tmp_path, fx)


@pytest.mark.parametrize("case", sorted(VISION_CASES))
def test_vision(case: str, fx: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from simcse_weince.cli.train_vision import main

    argv, expected = VISION_CASES[case][0](tmp_path, fx), VISION_CASES[case][1]
    _check(main, argv, expected, capsys, tmp_path, fx)


@pytest.mark.parametrize("case", sorted(DIAGNOSE_CASES))
def test_diagnose(case: str, fx: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from simcse_weince.cli.diagnose import main

    argv, expected = DIAGNOSE_CASES[case][0](tmp_path, fx), DIAGNOSE_CASES[case][1]
    _check(main, argv, expected, capsys, tmp_path, fx)


def test_debug_variable_shows_the_traceback(fx: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simcse_weince.cli.train_text import main
    from simcse_weince.training.config import ConfigError

    monkeypatch.setenv("SIMCSE_WEINCE_DEBUG", "1")
    with pytest.raises(ConfigError, match="temperature"):
        main(_text_args(tmp_path, fx, "--temperature", "0"))
