"""This project against sentence-transformers' own recipe, side by side, in one invocation.

Four recipes, each run by both tools on the same model, data, batch and sequence length, every run in its own
process, in pairs that alternate which goes first (A B, B A, ...), so that a slow spell of a shared machine falls
on both sides:

* ``unsup``: unsupervised SimCSE through the README's command, ``train_unsup.py configs/quickstart.yaml --loss
  infonce --max_steps N ...`` (all-MiniLM-L6-v2, the 2B rows in ``length_groups`` forwards), against
  ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss(scale=20)`` on (s, s) pairs of the same
  sentences;
* ``sup``: supervised SimCSE on (anchor, positive, hard negative) rows of one CSV file (``configs/sup_quickstart
  .yaml`` with that file), against MNRL on the same three columns;
* ``encode``: evaluation encoding of STS-B test's sentences: the encoder ``evaluate_sts.py`` uses, against
  ``SentenceTransformer.encode``, each with its own defaults;
* ``startup``: the imports a training run needs before its first line of work: ``simcse_weince.cli.train_text``
  (what ``train_unsup.py`` imports), against ``sentence_transformers`` with its Trainer and losses, each timed in a
  fresh process (whose whole wall time, interpreter start included, is the ``process`` figure).

A training figure is the median wall time of one step (from one step's end to the next: data, forward, loss,
backward, optimizer and the Trainer's per-step hooks), over the steps after the first ``--warmup``; the
evaluation and checkpoint the Trainer runs after the last step are not steps and are reported apart, with the
whole process's wall time. Each pair gives a ratio, sentence-transformers' time over ours (> 1: ours is
faster); the table prints every pair's ratio and their median::

    .venv/bin/python bench/st_side_by_side.py                       # all three recipes, 3 pairs, 20 steps
    .venv/bin/python bench/st_side_by_side.py --recipes unsup --pairs 5
    .venv/bin/python bench/st_side_by_side.py --toy                 # a tiny BERT from a config (the test's size)
    # GPU (both trainers take the GPU by themselves): the SimCSE authors' batch size
    python bench/st_side_by_side.py --batch 512 --steps 40 --pairs 3 --json bench_gpu.json

Under ``--toy`` the model is a 2-layer BERT built from a config with all-MiniLM-L6-v2's tokenizer, both sides
read it from the same folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, child_env, write_bert

RECIPES = ("unsup", "sup", "encode", "startup")
SIDES = ("ours", "st")
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def data_root() -> Path:
    from simcse_weince.core.paths import data_root as configured

    return configured() or REPO.parent / "shared" / "data"


def sentences(n: int) -> list[str]:
    """The first ``n`` non-empty lines of the Wikipedia sample the issue's command trains on."""
    path = data_root() / "wikipedia_en_gensim_sample" / "sentences.txt"
    with path.open(encoding="utf-8") as f:
        lines = [s for s in (line.strip() for line in f) if s]
    return lines[:n]


def stsb_test_sentences() -> list[str]:
    path = data_root() / "senteval" / "downstream" / "STS" / "STSBenchmark" / "sts-test.csv"
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            out += cols[5:7]
    return out


def write_rows(folder: Path, rows: int) -> Path:
    """(anchor, positive, negative) rows of consecutive sentences, one CSV both sides read."""
    s = sentences(3 * rows)
    path = folder / "triplets.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["anchor", "positive", "negative"])
        w.writerows(zip(s[0::3], s[1::3], s[2::3], strict=True))
    return path


# ---- one side of one recipe, in its own process ---------------------------------------------------------------
class StepTimer:
    """Wall and CPU time of every training step, from one step's end to the next (the first from the loop's
    start), and the loop's own span."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.loop = [0.0, 0.0]

    def callback(self) -> Any:
        from transformers import TrainerCallback

        timer = self

        class _Timer(TrainerCallback):
            def on_train_begin(self, *args: Any, **kwargs: Any) -> None:
                timer.loop[0] = timer.last = time.perf_counter()
                timer.last_cpu = time.process_time()

            def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                now, cpu = time.perf_counter(), time.process_time()
                timer.wall.append(now - timer.last)
                timer.cpu.append(cpu - timer.last_cpu)
                timer.last, timer.last_cpu = now, cpu

            def on_train_end(self, *args: Any, **kwargs: Any) -> None:
                timer.loop[1] = time.perf_counter()

        return _Timer()

    def figures(self, warmup: int) -> dict[str, float]:
        wall, cpu = self.wall[warmup:] or self.wall, self.cpu[warmup:] or self.cpu
        loop = self.loop[1] - self.loop[0]
        return {
            "step_s": statistics.median(wall),
            "step_cpu_s": statistics.median(cpu),
            "loop_s": loop,
            "after_last_step_s": loop - sum(self.wall),  # the Trainer's final evaluation and checkpoint
            "steps": len(self.wall),
        }


def ours_argv(recipe: str, opts: argparse.Namespace, out: str) -> list[str]:
    """The README's command (unsup) or the supervised quickstart's config (sup), with the issue's overrides."""
    common = [
        "--loss", "infonce", "--max_steps", str(opts.steps), "--per_device_train_batch_size", str(opts.batch),
        "--max_seq_length", str(opts.max_len), "--eval_before_training", "false", "--eval_test_at_end", "false",
        "--save_steps", "1000", "--eval_steps", "1000", "--output_dir", out, "--overwrite_output_dir", "true",
        "--disable_tqdm", "true", *shlex.split(opts.ours_args),
    ]  # fmt: skip
    if opts.model != MINILM:
        common += ["--model_name_or_path", opts.model]
    if recipe == "unsup":
        files = str(data_root() / "wikipedia_en_gensim_sample" / "sentences.txt")
        return ["configs/quickstart.yaml", "--train_files", files, *common]
    return [
        "configs/sup_quickstart.yaml", "--train_files", opts.rows, "--text_columns", "anchor", "positive",
        "negative", "--allow_missing_negatives", "false", "--num_train_epochs", "1", *common,
    ]  # fmt: skip


def st_model(opts: argparse.Namespace) -> Any:
    from sentence_transformers import SentenceTransformer

    from simcse_weince.core.model_sources import resolve_model_path

    model = SentenceTransformer(str(resolve_model_path(opts.model)), device=opts.device)
    model.max_seq_length = opts.max_len
    return model


def st_train(recipe: str, opts: argparse.Namespace, out: str, callbacks: list) -> None:
    """sentence-transformers' recipe: MNRL (scale 20, τ = 0.05) with its own Trainer, no saving or evaluation."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Args
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    n = opts.steps * opts.batch
    if recipe == "unsup":
        s = sentences(n)
        data = {"anchor": s, "positive": s}
    else:
        with open(opts.rows, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))[:n]
        data = {k: [r[k] for r in rows] for k in ("anchor", "positive", "negative")}
    model = st_model(opts)
    args = Args(
        output_dir=out, per_device_train_batch_size=opts.batch, learning_rate=3e-5, max_steps=opts.steps,
        warmup_steps=0, save_strategy="no", eval_strategy="no", report_to="none", disable_tqdm=True,
        logging_steps=10, seed=42, dataloader_num_workers=0,
    )  # fmt: skip
    loss = MultipleNegativesRankingLoss(model, scale=20.0)
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=Dataset.from_dict(data), loss=loss, callbacks=callbacks
    )
    trainer.train()


def encode_seconds(side: str, opts: argparse.Namespace) -> dict[str, float]:
    """Wall time of encoding STS-B test's sentences (after a warm-up batch), each tool with its defaults."""
    s = stsb_test_sentences()
    if side == "ours":
        from simcse_weince.core.model_sources import resolve_model_path
        from simcse_weince.text.encoder import load_text_encoder

        encoder = load_text_encoder(resolve_model_path(opts.model), device=opts.device)
        encode = encoder.encode
    else:
        model = st_model(opts)
        model.max_seq_length = 256 if opts.model == MINILM else 512  # the model's own inference limit
        encode = model.encode
    encode(s[:64])
    t0, c0 = time.perf_counter(), time.process_time()
    encode(s)
    return {"step_s": time.perf_counter() - t0, "step_cpu_s": time.process_time() - c0, "sentences": len(s)}


def import_seconds(side: str) -> dict[str, float]:
    """Wall and CPU time of importing what the side's training run imports (this process has imported nothing
    heavy before: ``common`` and the standard library only)."""
    t0, c0 = time.perf_counter(), time.process_time()
    if side == "ours":
        import simcse_weince.cli.train_text  # noqa: F401
    else:
        import sentence_transformers  # noqa: F401
        from sentence_transformers import SentenceTransformerTrainer, losses  # noqa: F401
    return {"step_s": time.perf_counter() - t0, "step_cpu_s": time.process_time() - c0}


def child(opts: argparse.Namespace) -> dict[str, float]:
    if opts.recipe == "startup":
        return import_seconds(opts.side)
    if opts.recipe == "encode":
        return encode_seconds(opts.side, opts)
    timer = StepTimer()
    profiler = None
    if opts.profile:
        from train_throughput import StepProfiler

        profiler = StepProfiler(opts.profile)
    callbacks = [timer.callback()] + ([profiler.as_callback()] if profiler else [])
    with tempfile.TemporaryDirectory() as out:
        if opts.side == "ours":
            from simcse_weince.cli.train_text import run

            run(ours_argv(opts.recipe, opts, out), callbacks=callbacks)
        else:
            st_train(opts.recipe, opts, out, callbacks)
    return timer.figures(opts.warmup) | ({"profile": profiler.breakdown()} if profiler else {})


# ---- the parent: pairs, ratios, table ------------------------------------------------------------------------
def run_side(recipe: str, side: str, opts: argparse.Namespace, rows: Path, model: str) -> dict[str, float]:
    cmd = [
        sys.executable, __file__, "--child", side, "--recipe", recipe, "--steps", str(opts.steps), "--batch",
        str(opts.batch), "--max-len", str(opts.max_len), "--warmup", str(opts.warmup), "--rows", str(rows),
        "--model", model, *(["--device", opts.device] if opts.device else []), f"--ours-args={opts.ours_args}",
        "--profile", str(opts.profile),
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=child_env(TOKENIZERS_PARALLELISM="false"), capture_output=True,
                          text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - t0
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        raise SystemExit(f"{recipe}/{side} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return {**json.loads(line[0][len("RESULT ") :]), "process_s": wall}


def pair_ratios(results: dict[str, list[dict]], key: str) -> list[float]:
    """sentence-transformers' figure over ours, pair by pair (> 1: ours is faster)."""
    return [st[key] / ours[key] for ours, st in zip(results["ours"], results["st"], strict=True)]


def summarise(recipe: str, results: dict[str, list[dict]]) -> dict[str, Any]:
    trains = recipe in ("unsup", "sup")
    keys = ["step_s", "step_cpu_s", "process_s"] + (["after_last_step_s"] if trains else [])
    row: dict[str, Any] = {}
    for key in keys:
        row[key] = {side: statistics.median(r[key] for r in results[side]) for side in SIDES}
        if key != "after_last_step_s":
            ratios = pair_ratios(results, key)
            row[key] |= {"pair_ratios": ratios, "median_ratio": statistics.median(ratios)}
    return row


def print_header(opts: argparse.Namespace) -> None:
    import torch

    print(
        f"model {opts.model}, batch {opts.batch}, max_len {opts.max_len}, {opts.steps} steps (median over steps "
        f"{opts.warmup + 1}..{opts.steps}), {opts.pairs} pairs alternating, torch threads {torch.get_num_threads()}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"{'recipe':<8}{'figure':<24}{'ours':>10}{'ST':>10}{'ST/ours':>9}  pairs", flush=True)


def print_rows(recipe: str, row: dict[str, dict]) -> None:
    names = {"step_s": "step wall s", "step_cpu_s": "step CPU s", "process_s": "process wall s",
             "after_last_step_s": "after last step s"}  # fmt: skip
    if recipe == "encode":
        names |= {"step_s": "encode wall s", "step_cpu_s": "encode CPU s"}
    if recipe == "startup":
        names |= {"step_s": "imports wall s", "step_cpu_s": "imports CPU s"}
    for key, fig in row.items():
        ratio = f"{fig['median_ratio']:>8.3f}x" if "median_ratio" in fig else f"{'':>9}"
        pairs = " ".join(f"{r:.3f}" for r in fig.get("pair_ratios", []))
        print(f"{recipe:<8}{names[key]:<24}{fig['ours']:>10.3f}{fig['st']:>10.3f}{ratio}  {pairs}", flush=True)


def print_profiles(recipe: str, results: dict[str, list[dict]]) -> None:
    """Each side's first profiled run: ms per step by phase, then its top operators by self time."""
    for side in SIDES:
        prof = results[side][0].get("profile")
        if prof:
            phases = ", ".join(f"{k} {v:.1f}" for k, v in prof["phases_ms"].items())
            print(f"{recipe:<8}{side} profile, ms per step: {phases}")
            print(f"{'':<8}{side} top ops (self ms per step): " + ", ".join(
                f"{k} {v:.1f}" for k, v in prof["top_ops_ms"].items()))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", nargs="+", choices=RECIPES, default=list(RECIPES))
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2, help="steps left out of the median")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=32)
    ap.add_argument("--model", default=MINILM, help="a model both sides load (default: the offline MiniLM)")
    ap.add_argument("--device", help="both sides' device (default: each tool's own choice)")
    ap.add_argument("--ours-args", default="", help="more arguments of our command, e.g. '--length_groups 1'")
    ap.add_argument("--profile", type=int, default=0, help="profile N steps after 3 of each run (torch.profiler)")
    ap.add_argument("--toy", action="store_true", help="a 2-layer BERT from a config, 4 steps, 1 pair")
    ap.add_argument("--json", type=Path, help="also write the summary here")
    ap.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--recipe", choices=RECIPES, help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        opts.side = opts.child
        print("RESULT " + json.dumps(child(opts)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = opts.model
        if opts.toy:
            model = str(write_bert(Path(tmp) / "bert", layers=2, hidden=64))
            opts.steps, opts.pairs, opts.warmup = min(opts.steps, 4), 1, 1
            opts.model = model
        rows = write_rows(Path(tmp), opts.steps * opts.batch)
        print_header(opts)
        summary = {}
        for recipe in opts.recipes:  # each recipe's rows as soon as its pairs are done
            results: dict[str, list[dict]] = {side: [] for side in SIDES}
            for p in range(opts.pairs):
                for side in SIDES if p % 2 == 0 else SIDES[::-1]:
                    results[side].append(run_side(recipe, side, opts, rows, model))
            summary[recipe] = summarise(recipe, results) | {"runs": results}
            print_rows(recipe, {k: v for k, v in summary[recipe].items() if k != "runs"})
            if opts.profile:
                print_profiles(recipe, results)
            if opts.json:
                opts.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
