"""Training throughput: the project's SimCSE step (InfoNCE, WEINCE) vs sentence-transformers' unsupervised
SimCSE recipe (MultipleNegativesRankingLoss on duplicated sentences, SentenceTransformerTrainer).

Same small BERT (built from a config, seeded random weights), batch, max_seq_length, data (real Wikipedia
sentences) and number of steps. Each variant runs in its own subprocess (so peak memory is its own), the
variants are run in rotating order ``--repeats`` times, and the medians are printed as ratios:

    .venv/bin/python bench/train_throughput.py [--steps 30] [--batch 64] [--layers 4 --hidden 256] [--repeats 2]

sentences/s counts training sentences (each sentence is one SimCSE example with two views). Peak memory is
the subprocess's peak resident set (CPU) or ``torch.cuda.max_memory_allocated`` (GPU). Training time is the
Trainer's own ``train_runtime`` (model loading and tokenisation of the whole set excluded for both).

Where the time goes: ``--profile N`` runs each variant once under ``torch.profiler`` for N steps (after the
first 3) and splits the wall time per step into data (collation, and tokenisation for sentence-transformers,
which tokenises in its collator), encoder forward, loss, backward, gradient clipping, optimizer, and the rest
(Python and Trainer bookkeeping between profiled ops), plus the top operators by self time:

    .venv/bin/python bench/train_throughput.py --steps 12 --profile 8
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from common import child_env, wiki_sample, write_bert

VARIANTS = ("ours-infonce", "ours-weince", "st-mnrl")


def peak_memory_mb() -> float:
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


PROFILE_WARMUP = 3


class StepProfiler:
    """A TrainerCallback that profiles from the end of step ``PROFILE_WARMUP`` to the end of step
    ``PROFILE_WARMUP + steps``: exactly ``steps`` whole iterations of the training loop."""

    def __init__(self, steps: int) -> None:
        from torch.profiler import ProfilerActivity, profile

        self.steps = steps
        self.prof = profile(activities=[ProfilerActivity.CPU])
        self.t0 = 0.0
        self.wall = 0.0

    def as_callback(self) -> Any:  # a transformers.TrainerCallback, imported lazily
        from transformers import TrainerCallback

        outer = self

        class _Callback(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                import time

                if state.global_step == PROFILE_WARMUP:
                    outer.t0 = time.perf_counter()
                    outer.prof.start()
                elif state.global_step == PROFILE_WARMUP + outer.steps:
                    outer.prof.stop()
                    outer.wall = time.perf_counter() - outer.t0
                return control

        return _Callback()

    def breakdown(self) -> dict:
        """Milliseconds per step by phase, from the top-level profiler events (``cpu_parent is None``)."""
        phases = dict.fromkeys(("data", "encoder forward", "loss", "backward", "grad clip", "optimizer"), 0.0)
        for ev in self.prof.events():
            if ev.cpu_parent is not None:
                continue
            name = ev.name
            if "DataLoader" in name:
                key = "data"
            elif name == "loss":
                key = "loss"
            elif name.startswith("autograd::engine"):
                key = "backward"
            elif name.startswith("Optimizer."):
                key = "optimizer"
            elif "_foreach" in name or "clip_grad" in name:
                key = "grad clip"
            else:
                key = "encoder forward"
            phases[key] += ev.cpu_time_total / 1e3
        per_step = {k: v / self.steps for k, v in phases.items()}
        per_step["rest (Python, Trainer)"] = self.wall * 1e3 / self.steps - sum(per_step.values())
        per_step["total"] = self.wall * 1e3 / self.steps
        top = sorted(self.prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
        return {"phases_ms": per_step, "top_ops_ms": {e.key: e.self_cpu_time_total / 1e3 / self.steps for e in top}}


def _label_loss(fn: Callable) -> Callable:
    """Wrap a loss function so its work shows up as one ``loss`` event in the profile."""

    def wrapped(*a: Any, **k: Any) -> Any:
        with torch.profiler.record_function("loss"):
            return fn(*a, **k)

    return wrapped


def run_variant(
    variant: str,
    model_dir: str,
    data: str,
    steps: int,
    batch: int,
    max_len: int,
    out: str,
    profile: int = 0,
    precision: str = "fp32",
) -> dict:
    n = steps * batch
    profiler = StepProfiler(profile) if profile else None
    if variant.startswith("ours"):
        from simcse_weince.cli.train_text import run

        # the trainer labels its loss call "loss" in profiles itself
        callbacks = [profiler.as_callback()] if profiler is not None else []
        res = run(
            [
                "--model_name_or_path",
                model_dir,
                "--pooler",
                "cls",
                "--train_files",
                data,
                "--drop_unterminated_last_line",
                "wiki1m_for_simcse.head*",
                "--max_train_samples",
                str(n),
                "--max_seq_length",
                str(max_len),
                "--per_device_train_batch_size",
                str(batch),
                "--max_steps",
                str(steps),
                "--loss",
                variant.split("-")[1],
                "--eval_strategy",
                "no",
                "--save_strategy",
                "no",
                "--load_best_model_at_end",
                "false",
                "--eval_test_at_end",
                "false",
                "--output_dir",
                out,
                "--disable_tqdm",
                "true",
                "--logging_steps",
                "10",
                "--dataloader_num_workers",
                "0",
                "--precision",
                precision,
            ],
            callbacks=callbacks,
        )
        seconds = res["train_seconds_trainer"]
    else:
        from datasets import Dataset
        from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
        from sentence_transformers import SentenceTransformerTrainingArguments as Args
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

        from simcse_weince.text.sources.lines import read_sentences

        sentences = read_sentences(data, drop_unterminated_last_line=True)[:n]
        t = Transformer(model_dir, max_seq_length=max_len)
        model = SentenceTransformer(modules=[t, Pooling(t.get_embedding_dimension(), "cls")], device="cpu")
        ds = Dataset.from_dict({"anchor": sentences, "positive": sentences})
        args = Args(
            output_dir=out,
            per_device_train_batch_size=batch,
            max_steps=steps,
            learning_rate=3e-5,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            logging_steps=10,
            dataloader_num_workers=0,
            fp16=precision == "fp16",
            bf16=precision == "bf16",
        )
        loss = MultipleNegativesRankingLoss(model, scale=20.0)  # τ = 0.05
        callbacks = None
        if profiler is not None:
            loss.compute_loss_from_embeddings = _label_loss(loss.compute_loss_from_embeddings)
            callbacks = [profiler.as_callback()]
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss, callbacks=callbacks)
        seconds = trainer.train().metrics["train_runtime"]
    res = {"variant": variant, "seconds": seconds, "sentences_per_s": n / seconds, "peak_mb": peak_memory_mb()}
    if profiler is not None:
        res.update(profiler.breakdown())
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=32)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--data", default=str(wiki_sample()))
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="profile N steps of each variant (one run each) instead of measuring throughput",
    )
    ap.add_argument(
        "--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
        help="the variants to run (st-mnrl, the reference of the ratios, always runs)",
    )  # fmt: skip
    ap.add_argument("--json", type=Path, help="also write each variant's medians here")
    ap.add_argument(
        "--precision", choices=("fp32", "fp16", "bf16"), default="fp32", help="both recipes (autocast on a GPU)"
    )
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # child mode
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    variants = [v for v in VARIANTS if v in args.variants or v == "st-mnrl"]
    if args.variant:
        with tempfile.TemporaryDirectory() as out:
            res = run_variant(
                args.variant,
                args.model_dir,
                args.data,
                args.steps,
                args.batch,
                args.max_len,
                out,
                args.profile,
                args.precision,
            )
        print("RESULT " + json.dumps(res))
        return
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "bert"
        write_bert(model_dir, args.layers, args.hidden)
        results: dict[str, list[dict]] = {v: [] for v in variants}
        if args.profile:
            if args.steps < PROFILE_WARMUP + args.profile:
                raise SystemExit(f"--steps must be >= {PROFILE_WARMUP} + --profile ({args.profile})")
            args.repeats = 1
        for r in range(args.repeats):
            for v in variants[r % len(variants) :] + variants[: r % len(variants)]:
                cmd = [
                    sys.executable,
                    __file__,
                    "--variant",
                    v,
                    "--model-dir",
                    str(model_dir),
                    "--steps",
                    str(args.steps),
                    "--batch",
                    str(args.batch),
                    "--max-len",
                    str(args.max_len),
                    "--data",
                    args.data,
                    "--profile",
                    str(args.profile),
                    "--precision",
                    args.precision,
                ]
                env = child_env(TOKENIZERS_PARALLELISM="false")
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
                line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                if proc.returncode != 0 or not line:
                    raise SystemExit(f"variant {v} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
                results[v].append(json.loads(line[0][7:]))
    if args.profile:
        print_profile(results, args)
        return
    print(
        f"BERT L{args.layers}/H{args.hidden} from config, batch {args.batch}, max_len {args.max_len}, "
        f"{args.steps} steps, {args.repeats} runs each, {args.precision}, torch threads {torch.get_num_threads()}"
    )
    base = statistics.median(x["sentences_per_s"] for x in results["st-mnrl"])
    print(f"{'variant':<14}{'sentences/s':>12}{'peak MB':>10}{'vs st-mnrl':>12}")
    medians = {}
    for v in variants:
        sps = statistics.median(x["sentences_per_s"] for x in results[v])
        mem = statistics.median(x["peak_mb"] for x in results[v])
        medians[v] = {"sentences_per_s": sps, "peak_mb": mem, "vs_st_mnrl": sps / base}
        print(f"{v:<14}{sps:>12.1f}{mem:>10.0f}{sps / base:>11.2f}x")
    if args.json:
        args.json.write_text(json.dumps(medians, indent=2), encoding="utf-8")
    print("target: ours >= 1.2x sentence-transformers' throughput")


def print_profile(results: dict[str, list[dict]], args: argparse.Namespace) -> None:
    print(
        f"ms per step, {args.profile} profiled steps after {PROFILE_WARMUP}; BERT L{args.layers}/H{args.hidden}, "
        f"batch {args.batch}, max_len {args.max_len}, torch threads {torch.get_num_threads()}"
    )
    variants = list(results)
    phases = list(results[variants[0]][0]["phases_ms"])
    print(f"{'phase':<24}" + "".join(f"{v:>14}" for v in variants))
    for ph in phases:
        print(f"{ph:<24}" + "".join(f"{results[v][0]['phases_ms'][ph]:>14.1f}" for v in variants))
    for v in variants:
        ops = ", ".join(f"{k} {ms:.1f}" for k, ms in results[v][0]["top_ops_ms"].items())
        print(f"top ops by self time, {v} (ms/step): {ops}")


if __name__ == "__main__":
    main()
