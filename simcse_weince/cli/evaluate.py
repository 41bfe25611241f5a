"""Command line of ``evaluate_sts.py``: evaluate any checkpoint on STS and SentEval transfer tasks."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from simcse_weince.cli.errors import run_command
from simcse_weince.evaluation.runner import MODES, load_tasks, run_evaluation, write_report
from simcse_weince.evaluation.senteval_classifier import ENGINES
from simcse_weince.evaluation.transfer import CLASSIFIERS, classifier_device
from simcse_weince.model_sources import check_model_source
from simcse_weince.paths import resolve_data_path, senteval_root
from simcse_weince.text.encoder import load_text_encoder
from simcse_weince.text.poolers import POOLERS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Evaluate a sentence encoder on STS12-16, STS-B, SICK-R (Spearman, SentEval 'all') and the "
        "SentEval transfer tasks (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC).",
        allow_abbrev=False,
    )
    p.add_argument("--model", required=True, help="SimCSE output folder, SentenceTransformer folder, or HF encoder")
    p.add_argument(
        "--pooler",
        choices=POOLERS,
        default=None,
        help="override the pooling (default: the SentenceTransformer's own; cls_before_pooler for plain HF encoders)",
    )
    p.add_argument("--tasks", default="sts", help="sts | transfer | all | comma-separated task names")
    p.add_argument("--mode", choices=MODES, default="test", help="dev | test | fast (5-fold transfer)")
    p.add_argument(
        "--data_dir",
        default=None,
        help="SentEval data/downstream folder (default: $SENTEVAL_DATA, "
        "then the shared data folder; STS-B falls back to the Hub)",
    )
    p.add_argument("--output_dir", default=None, help="where eval_<mode>.json/.md go (default: eval_results/<model>)")
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--max_length", type=int, default=None, help="token limit (default: the model's, at most 512)")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=1111)
    p.add_argument(
        "--precision",
        choices=("fp32", "bf16", "fp16"),
        default="fp32",
        help="fp32 (exact, default) or autocast bf16/fp16: ~3x faster on CPUs with bf16 units and on "
        "GPUs; scores move in the 2nd decimal",
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
    p.add_argument("--no_progress", action="store_true", help="hide progress bars")
    return p


def _check_engine(engine: str, device: str | None) -> None:
    """``graph`` needs the classifiers on a CUDA device: say so before anything loads."""
    target = classifier_device(device)
    if engine == "graph" and target.type != "cuda":
        raise ValueError(f"--classifier_engine graph needs a CUDA device; the classifiers would run on {target}")


def run(argv: Sequence[str]) -> dict:
    """Parse, read every task's files, load the model, evaluate (results saved after every task)."""
    args = build_parser().parse_args(argv)
    _check_engine(args.classifier_engine, args.device)
    data_dir = senteval_root(resolve_data_path(args.data_dir) if args.data_dir else None)
    tasks = load_tasks(args.tasks, args.mode, data_dir)  # missing or malformed files fail before the model loads
    model_path = check_model_source(args.model)
    encoder = load_text_encoder(
        model_path,
        pooler=args.pooler,
        batch_size=args.batch_size,
        max_length=args.max_length,
        device=args.device,
        show_progress_bar=not args.no_progress,
        precision=args.precision,
    )
    out = args.output_dir or Path("eval_results") / Path(args.model.rstrip("/")).name
    report = run_evaluation(
        encoder,
        args.model,
        tasks,
        seed=args.seed,
        on_task=lambda r: write_report(r, out),
        classifier=args.classifier,
        engine=args.classifier_engine,
        device=args.device,
        show_progress_bar=not args.no_progress,
    )
    js, md = write_report(report, out)
    print()
    print(report.markdown())
    print(f"results: {js} and {md}")
    return report.to_dict()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO, stream=sys.stdout)
    return run_command(run, sys.argv[1:] if argv is None else argv)[1]


if __name__ == "__main__":
    raise SystemExit(main())
