"""Command line of ``evaluate_sts.py``: evaluate any checkpoint on STS, SentEval transfer and retrieval tasks."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from simcse_weince.cli.errors import Stopped, command_main
from simcse_weince.core import checks
from simcse_weince.core.devices import FORMS as DEVICE_FORMS
from simcse_weince.core.devices import check_device
from simcse_weince.core.hardware import warn_if_slow_bf16
from simcse_weince.core.model_sources import check_model_source, looks_like_path, resolve_model_path
from simcse_weince.core.paths import resolve_data_path, senteval_root
from simcse_weince.core.stopping import Terminated
from simcse_weince.evaluation.retrieval import SEARCHES
from simcse_weince.evaluation.runner import (
    MODES,
    EvaluationReport,
    load_tasks,
    report_paths,
    run_evaluation,
    write_report,
)
from simcse_weince.evaluation.senteval_classifier import ENGINES
from simcse_weince.evaluation.transfer import CLASSIFIERS, classifier_device
from simcse_weince.text.checkpoint import checkpoint_folder
from simcse_weince.text.encoder import load_text_encoder
from simcse_weince.text.poolers import POOLERS
from simcse_weince.text.positions import MIN_SEQ_LENGTH, check_length_fits, model_position_limit


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Evaluate a sentence encoder on STS12-16, STS-B, SICK-R (Spearman, SentEval 'all'), the "
        "SentEval transfer tasks (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC) and retrieval (BEIR-layout folders, or "
        "offline tasks constructed from SentEval's files).",
        allow_abbrev=False,
    )
    p.add_argument("--model", required=True, help="SimCSE output folder, SentenceTransformer folder, or HF encoder")
    p.add_argument(
        "--pooler",
        choices=POOLERS,
        default=None,
        help="override the pooling (default: the SentenceTransformer's own; cls_before_pooler for plain HF encoders)",
    )
    p.add_argument(
        "--tasks",
        default="sts",
        help="sts | transfer | retrieval | all | comma-separated task names, sts:PATH for a CSV/TSV/JSONL file of "
        "sentence1, sentence2, score, and retrieval:PATH for a BEIR folder "
        "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv) or its qrels file; 'retrieval' alone runs the offline "
        "tasks STSB-paraphrase, MRPC-paraphrase, SICK-entailment (constructed here, not published benchmarks)",
    )
    p.add_argument("--mode", choices=MODES, default="test", help="dev | test | fast (5-fold transfer)")
    p.add_argument(
        "--data_dir",
        default=None,
        help="SentEval data/downstream folder (default: $SENTEVAL_DATA, "
        "then the shared data folder; STS-B falls back to the Hub)",
    )
    p.add_argument(
        "--output_dir",
        default=None,
        help="where eval_<mode>.json/.md go (default: eval_results/<the whole --model path or Hub id, '/' -> '__'>, "
        "e.g. eval_results/runA__model for runA/model)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an eval_<mode> report of a different model in the output folder (the same model's own "
        "report is always replaced)",
    )
    add_run_options(p)
    return p


def add_run_options(p: argparse.ArgumentParser) -> None:
    """How the evaluation runs: encoding, the transfer classifiers, the retrieval search, progress."""
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--max_length", type=int, default=None, help="token limit (default: the model's, at most 512)")
    p.add_argument("--device", default=None, help=f"{DEVICE_FORMS} (default: CUDA when there, else cpu)")
    p.add_argument("--seed", type=int, default=1111)
    p.add_argument(
        "--precision",
        choices=("fp32", "bf16", "fp16"),
        default="fp32",
        help="fp32 (exact, default) or autocast bf16/fp16: ~3x faster on GPUs and on CPUs with bf16 units "
        "(AVX-512-BF16 or AMX), up to ~6.6x slower on CPUs without them (a warning says so); scores move in the "
        "2nd decimal",
    )
    p.add_argument(
        "--classifier",
        choices=CLASSIFIERS,
        default="senteval",
        help="transfer-task classifier: senteval (SentEval's PyTorch protocol as the SimCSE authors run it, "
        "comparable with published tables; default) or sklearn (exact L2 logistic regression)",
    )
    p.add_argument(
        "--classifier_engine",
        choices=ENGINES,
        default="auto",
        help="how the senteval classifiers step (same models either way): auto (a CUDA graph per step on a GPU, "
        "eager on a CPU), eager (one kernel at a time), static or graph (CUDA only)",
    )
    p.add_argument(
        "--search",
        choices=SEARCHES,
        default="exact",
        help="retrieval search: exact (chunked top-k, memory linear in the corpus; default) or faiss (an exact "
        "flat index; needs pip install faiss-cpu)",
    )
    p.add_argument("--no_progress", action="store_true", help="hide progress bars")


SEED_MAX = 2**32 - 1  # seeds go to numpy and scikit-learn (32 bits)


def _seed(name: str, value: object, owner: object = None) -> None:
    """A seed: an integer in [0, :data:`SEED_MAX`]."""
    if not (checks.is_real(value) and int(value) == value and 0 <= value <= SEED_MAX):
        checks.fail(name, f"an integer in [0, {SEED_MAX}]", value)


# the integer options' checks (:mod:`simcse_weince.core.checks`); --max_length unset is the model's own limit
INT_CHECKS = {
    "batch_size": checks.integer_at_least(1),
    "max_length": checks.integer_at_least(MIN_SEQ_LENGTH),
    "seed": _seed,
}


def _check_numbers(args: argparse.Namespace) -> None:
    """Each integer option set passes its check (:data:`INT_CHECKS`).

    Raises:
        ValueError: ``command line: --batch_size 0: expected an integer >= 1``.
    """
    for name, check in INT_CHECKS.items():
        value = getattr(args, name)
        if value is None:
            continue
        try:
            check(name, value)
        except ValueError as err:  # "<name> must be <expected>, got <value>", said the command line's way
            expected = str(err).partition(" must be ")[2].rpartition(", got ")[0]
            raise ValueError(f"command line: --{name} {value}: expected {expected}") from None


def _check_options(args: argparse.Namespace) -> None:
    """What the options need, said before anything loads: integers in their ranges, a device this machine has,
    ``graph`` needs the classifiers on a CUDA device, and ``--search faiss`` the faiss package."""
    _check_numbers(args)
    check_device(args.device, "command line: --device")
    target = classifier_device(args.device)
    if args.classifier_engine == "graph" and target.type != "cuda":
        raise ValueError(f"--classifier_engine graph needs a CUDA device; the classifiers would run on {target}")
    if args.search == "faiss" and importlib.util.find_spec("faiss") is None:
        raise ValueError("--search faiss needs the faiss package, which is not installed: pip install faiss-cpu")


MAX_NAME = 120  # characters of a default report folder's name


def default_output_dir(model: str) -> Path:
    """``eval_results/<name>``, the name built from the whole ``--model`` so that two models do not share it (the
    few names that still could, e.g. ``a b`` and ``a_b``, are caught by :func:`check_replaceable`):
    a local folder's path relative to the working directory (absolute when it lies outside it) and a Hub id,
    with ``__`` for each ``/`` (``runA/model`` -> ``runA__model``, ``/data/runs/x/model`` ->
    ``data__runs__x__model``, ``org/name`` -> ``org__name``). Characters other than letters, digits, ``.``,
    ``_``, ``-`` become ``_``; a name over 120 characters keeps its end after a short hash of the whole."""
    local = resolve_data_path(model)
    if Path(local).exists() or looks_like_path(model):
        path = Path(os.path.abspath(local))
        try:
            parts = path.relative_to(Path.cwd()).parts
        except ValueError:
            parts = ()
        parts = parts or path.parts[1:] or ("root",)  # outside the working directory (or it): the absolute path
    else:
        parts = tuple(p for p in model.split("/") if p)  # a Hub id
    name = re.sub(r"[^A-Za-z0-9._-]", "_", "__".join(parts))
    name = "_" + name[1:] if name.startswith(".") else name
    if len(name) > MAX_NAME:
        digest = hashlib.sha1("__".join(parts).encode()).hexdigest()[:8]
        name = f"{digest}-{name[-(MAX_NAME - len(digest) - 1) :]}"
    return Path("eval_results") / name


def model_identity(model: str) -> str:
    """Which model ``--model`` names, as recorded in the report: the resolved local folder, else the Hub id."""
    resolved = resolve_model_path(model)
    return os.path.realpath(resolved) if Path(resolved).exists() else model


def check_replaceable(js: Path, model_id: str, overwrite: bool) -> None:
    """Refuse to replace ``js`` when it is the report of a different model (unless ``overwrite``).

    Raises:
        ValueError: ``js`` holds another model's report, or cannot be read as one.
    """
    if overwrite or not js.exists():
        return
    hint = "pass --overwrite to replace it or --output_dir to write elsewhere"
    try:
        old = json.loads(js.read_text(encoding="utf-8"))
        old_id = old.get("model_id") or model_identity(str(old["model"]))  # reports from before model_id
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{js} exists but is not a readable evaluation report ({err}); {hint}") from err
    if old_id != model_id:
        raise ValueError(f"{js} is the report of another model ({old_id}), not {model_id}; {hint}")


def stopped_message(report: EvaluationReport | None, js: Path, md: Path, why: str = "interrupted (Ctrl-C)") -> str:
    """The ``stopped:`` line of an interrupted evaluation: where its partial report is and what it lacks."""
    if report is None:
        return f"{why} before the report was written"
    missing = report.missing_tasks()
    done = len(report.planned) - len(missing)
    return (
        f"{why} during {missing[0] if missing else 'the last save'}: partial report in {js} and "
        f"{md.name} ({done} of {len(report.planned)} tasks done; missing {', '.join(missing) or 'none'})"
    )


def run(argv: Sequence[str]) -> dict:
    """Parse, read every task's files, load the model, evaluate (results saved before the first task, marked
    partial, and after every task); Ctrl-C ends in :class:`Stopped`, naming the partial report."""
    args = build_parser().parse_args(argv)
    _check_options(args)
    warn_if_slow_bf16(args.precision, args.device, "evaluating with")
    data_dir = senteval_root(resolve_data_path(args.data_dir) if args.data_dir else None)
    tasks = load_tasks(args.tasks, args.mode, data_dir)  # missing or malformed files fail before the model loads
    model_path = check_model_source(args.model)
    limit = model_position_limit(str(checkpoint_folder(model_path)))  # its config only
    check_length_fits(f"command line: --max_length {args.max_length}", args.max_length, args.model, limit)
    model_id = model_identity(args.model)
    out = Path(args.output_dir) if args.output_dir else default_output_dir(args.model)
    check_replaceable(report_paths(out, tasks.mode)[0], model_id, args.overwrite)  # before the model loads
    encoder = load_text_encoder(
        model_path,
        pooler=args.pooler,
        batch_size=args.batch_size,
        max_length=args.max_length,
        device=args.device,
        show_progress_bar=not args.no_progress,
        precision=args.precision,
    )
    saved: list[EvaluationReport] = []  # the report as last saved (first saved before any task runs)

    def save(r: EvaluationReport) -> None:
        write_report(r, out)
        saved[:] = [r]

    try:
        report = run_evaluation(
            encoder,
            args.model,
            tasks,
            seed=args.seed,
            on_task=save,
            classifier=args.classifier,
            engine=args.classifier_engine,
            device=args.device,
            show_progress_bar=not args.no_progress,
            model_id=model_id,
            search=args.search,
        )
    except KeyboardInterrupt as err:
        why = "SIGTERM" if isinstance(err, Terminated) else "interrupted (Ctrl-C)"
        raise Stopped(stopped_message(saved[0] if saved else None, *report_paths(out, tasks.mode), why)) from err
    js, md = write_report(report, out)
    print()
    print(report.markdown())
    print(f"results: {js} and {md}")
    return report.to_dict()


def main(argv: Sequence[str] | None = None) -> int:
    return command_main(run, argv, log_info=True)


if __name__ == "__main__":
    raise SystemExit(main())
