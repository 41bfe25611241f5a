"""Evaluation speed: the project's STS-B test evaluation vs sentence-transformers' EmbeddingSimilarityEvaluator,
on the same model and pairs, plus the wall time of the full 7-task STS suite. Ratios measured in one run.

    .venv/bin/python bench/eval_speed.py [--model sentence-transformers/all-MiniLM-L6-v2] [--repeats 3]
    .venv/bin/python bench/eval_speed.py --classifiers [--mode test] [--tasks MR,CR,...] [--embeddings FILE]

``--classifiers`` times the transfer tasks' classifier phase instead: every task's sentences are encoded once
(not timed; on the GPU when there is one), then the same embeddings go through SentEval's protocol (this
project's batched PyTorch implementation, ``--classifier senteval``, on the GPU when there is one) and through
the scikit-learn protocol (``--classifier sklearn``, CPU), task by task, alternating which goes first; it prints
both times, their ratio and both accuracies. Thread counts matter on a CPU: set ``OMP_NUM_THREADS`` alike for
both (scikit-learn's solver slowed 5x on a busy 2-core machine with 2 BLAS threads).
``--embeddings FILE`` keeps the embeddings (a pickle of sentence -> vector) between runs: the first run writes
it, later runs skip the encoding (about 13 minutes of MiniLM on 2 CPU cores).

Both sides start from a loaded model (loading is not timed) on the same device; the exact (fp32) path must
agree on the Spearman correlation (printed). The project's evaluator encodes each unique sentence once,
in length-sorted batches of 128, under no_grad; the sentence-transformers evaluator encodes both sides
with its defaults (batch 16). The project's ``--precision bf16`` path (autocast) is timed too.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import time
from pathlib import Path

import torch

from simcse_weince.core.model_sources import resolve_model_path
from simcse_weince.core.paths import senteval_root

# The evaluation and the encoders are imported where they are used: a bad option is refused before they load.


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-suite", action="store_true", help="only the STS-B comparison")
    ap.add_argument("--classifiers", action="store_true", help="time the transfer classifiers instead")
    ap.add_argument("--mode", choices=("test", "fast"), default="test")
    ap.add_argument("--tasks", default="transfer")
    ap.add_argument("--json", help="--classifiers: also write the timings and results here")
    ap.add_argument("--embeddings", help="--classifiers: a pickle of the embeddings, read if present, else written")
    ap.add_argument(
        "--engines",
        default="auto",
        help="--classifiers: the SentEval classifier's engines to time, comma-separated (auto, eager, static, "
        "graph); the first is the one compared with scikit-learn",
    )
    args = ap.parse_args()
    if args.classifiers:
        time_classifiers(args)
        return

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from simcse_weince.evaluation.runner import run_evaluation
    from simcse_weince.evaluation.sts import evaluate_sts
    from simcse_weince.evaluation.sts_data import load_stsb
    from simcse_weince.text.encoder import load_text_encoder

    path = resolve_model_path(args.model)
    root = senteval_root()
    task = load_stsb(root, "test")
    sub = task.subsets[0]
    ours_enc = load_text_encoder(path, device="cpu")
    ours_bf16 = load_text_encoder(path, device="cpu", precision="bf16")
    st = SentenceTransformer(path, device="cpu")
    st_eval = EmbeddingSimilarityEvaluator(sub.sentences1, sub.sentences2, sub.scores, write_csv=False)
    print(f"model {args.model} · STS-B test {len(sub)} pairs · torch threads {torch.get_num_threads()}")

    t_ours, t_bf16, t_st = [], [], []
    for _ in range(args.repeats):  # interleaved so drift affects all alike
        t0 = time.perf_counter()
        ours = evaluate_sts(ours_enc, task)
        t_ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ours16 = evaluate_sts(ours_bf16, task)
        t_bf16.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        theirs = st_eval(st)
        t_st.append(time.perf_counter() - t0)
    mo, mb, ms = statistics.median(t_ours), statistics.median(t_bf16), statistics.median(t_st)
    print(f"  EmbeddingSimilarityEvaluator      {ms:7.2f} s   Spearman {100 * theirs['spearman_cosine']:.6f}")
    print(f"  simcse-weince evaluate_sts fp32   {mo:7.2f} s   Spearman {ours.main:.6f}   speed-up {ms / mo:5.2f}x")
    print(f"  simcse-weince evaluate_sts bf16   {mb:7.2f} s   Spearman {ours16.main:.6f}   speed-up {ms / mb:5.2f}x")
    print("  (target >= 1.5x; fp32 is compute-bound like the reference, bf16 autocast changes the 2nd decimal)")

    if not args.skip_suite:
        t0 = time.perf_counter()
        report = run_evaluation(load_text_encoder(path, device="cpu"), args.model, "sts", "test", root)
        total = time.perf_counter() - t0
        scores = " ".join(f"{k} {v:.2f}" for k, v in report.sts_scores().items())
        print(f"\nfull STS suite (7 tasks, fresh encoder cache): {total:.1f} s (target <= 90 s)\n  {scores}")


def time_classifiers(args: argparse.Namespace) -> None:
    """Classifier phase of the transfer tasks: senteval (batched PyTorch) vs sklearn on the same embeddings."""
    from simcse_weince.evaluation.senteval_classifier import ENGINES, FAST_CONFIG, TEST_CONFIG

    device = "cuda" if torch.cuda.is_available() else "cpu"  # the encoder's and the batched classifiers' device
    engines = list(dict.fromkeys(args.engines.split(",")))
    bad = [e for e in engines if e not in ENGINES or (e == "graph" and device != "cuda")]
    if bad:
        raise SystemExit(
            f"error: --engines {args.engines!r}: {bad[0]!r} is not one of {', '.join(ENGINES)} "
            "('graph' needs a CUDA device)"
        )
    from simcse_weince.evaluation.runner import CachingEncoder, load_tasks
    from simcse_weince.evaluation.transfer import evaluate_transfer
    from simcse_weince.text.encoder import load_text_encoder

    loaded = load_tasks(args.tasks, args.mode, senteval_root())
    cached = CachingEncoder(load_text_encoder(resolve_model_path(args.model), device=device))
    store = Path(args.embeddings) if args.embeddings else None
    if store is not None and store.is_file():
        saved = pickle.loads(store.read_bytes())
        if saved["model"] != args.model:
            raise SystemExit(f"error: {store} holds embeddings of {saved['model']}, not {args.model}")
        cached.cache.update(saved["cache"])
    k, max_iter, config = (5, 200, FAST_CONFIG) if args.mode == "fast" else (10, 1000, TEST_CONFIG)
    print(f"model {args.model} · mode {args.mode} · {device} · torch threads {torch.get_num_threads()}")
    extra = "".join(f"{e + ' s':>12}{'ratio':>7}" for e in engines[1:])
    print(f"{'task':<6}{'senteval s':>12}{'sklearn s':>12}{'ratio':>8}{'senteval acc':>14}{'sklearn acc':>13}{extra}")
    runs = ["sklearn", *(f"senteval/{e}" for e in engines)]
    totals = dict.fromkeys(runs, 0.0)
    rows = []
    for i, (name, task) in enumerate(loaded.transfer.items()):
        order = runs[1:] + runs[:1] if i % 2 == 0 else runs  # alternate which goes first
        for split in task.splits.values():  # encode once, outside the timing
            cached.encode(split.sentences + (split.sentences2 or []))
        if store is not None:
            store.write_bytes(pickle.dumps({"model": args.model, "cache": cached.cache}))
        res = {}
        for run in order:
            clf, _, engine = run.partition("/")
            res[run] = evaluate_transfer(
                cached, task, k=k, max_iter=max_iter, classifier=clf, config=config, device=device,
                engine=engine or "auto",
            )  # fmt: skip
            totals[run] += res[run].classifier_seconds
        se, sk = res[runs[1]], res["sklearn"]
        engine_results = {e: res[f"senteval/{e}"].to_dict() for e in engines}
        rows.append({"task": name, "senteval": se.to_dict(), "sklearn": sk.to_dict(), "engines": engine_results})
        line = "".join(
            f"{res[r].classifier_seconds:12.1f}{sk.classifier_seconds / res[r].classifier_seconds:7.2f}"
            for r in runs[2:]
        )
        print(
            f"{name:<6}{se.classifier_seconds:12.1f}{sk.classifier_seconds:12.1f}"
            f"{sk.classifier_seconds / se.classifier_seconds:8.2f}{se.test_acc:14.2f}{sk.test_acc:13.2f}{line}",
            flush=True,
        )
    se_total = totals[runs[1]]
    line = "".join(f"{totals[r]:12.1f}{totals['sklearn'] / totals[r]:7.2f}" for r in runs[2:])
    print(
        f"{'all':<6}{se_total:12.1f}{totals['sklearn']:12.1f}{totals['sklearn'] / se_total:8.2f}{'':27}{line}"
        "   (target: sklearn / senteval >= 5 in test mode)"
    )
    if args.json:
        summary = {"senteval": se_total, "sklearn": totals["sklearn"]}
        engine_totals = {e: totals[f"senteval/{e}"] for e in engines}
        out = {"device": device, "totals": summary, "engine_totals": engine_totals, "tasks": rows}
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
