"""Retrieval search: time and memory of the evaluation's exact chunked top-k, against the one-matrix search it
replaces and against faiss's exact flat index, at 10k, 100k and 1M corpus rows.

Synthetic unit vectors (seeded Gaussian, 384-d as all-MiniLM-L6-v2; the search does not care what made them),
1,000 queries, top 100 per query. Each (method, corpus size) runs in its own process so that its peak memory is
its own: the figure is the peak resident memory above what the process held once its vectors were made (the
corpus alone is N × 384 × 4 bytes: 15 MB, 154 MB, 1.5 GB). Methods:

* ``exact``: :func:`simcse_weince.evaluation.search.exact_top_k` (blocks of at most 2^24 scores, ties by id);
* ``matrix``: the whole ``(queries × N)`` score matrix, then ``torch.topk`` (memory grows with Q × N);
* ``faiss``: ``faiss.IndexFlatIP`` (exact; only when faiss is installed).

Prints one table: seconds and extra MB per method and size, then the ratios exact/matrix and faiss/exact, and how
exact's time grows with N (ratio to 10k). Usage::

    .venv/bin/python bench/retrieval_search.py [--sizes 10000 100000 1000000] [--queries 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import child_env

DIM = 384
K = 100


def rss_mb() -> float:
    """The process's resident memory now (MB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unit_vectors(n: int, seed: int):
    """``(n, DIM)`` float32 unit rows, made in place (no second copy)."""
    import torch

    x = torch.empty(n, DIM)
    x.normal_(generator=torch.Generator().manual_seed(seed))
    return x.div_(x.norm(dim=1, keepdim=True))


def child(method: str, n: int, queries: int, repeats: int) -> dict:
    """Time one method on one corpus size; peak memory above the vectors' (run in its own process)."""
    import torch

    from simcse_weince.evaluation.search import exact_top_k, faiss_top_k

    if method == "faiss":
        import faiss  # noqa: F401  (imported before the baseline: its libraries are not the search's memory)
    corpus, q = unit_vectors(n, 0), unit_vectors(queries, 1)
    qn, cn = q.numpy(), corpus.numpy()
    runs = {
        "exact": lambda: exact_top_k(q, corpus, K)[1],
        "matrix": lambda: torch.topk(q @ corpus.T, K, dim=1).indices,
        "faiss": lambda: faiss_top_k(qn, cn, K)[1],
    }
    run = runs[method]
    base = rss_mb()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return {"seconds": statistics.median(times), "extra_mb": max(0.0, peak_mb() - base)}


def measure(method: str, n: int, queries: int, repeats: int) -> dict:
    cmd = [sys.executable, __file__, "--child", method, str(n), "--queries", str(queries), "--repeats", str(repeats)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3, help="runs per cell (median); 1 at the largest size")
    p.add_argument("--child", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.queries, args.repeats)))
        return
    methods = ["exact", "matrix"] + (["faiss"] if importlib.util.find_spec("faiss") else [])
    import torch

    print(f"retrieval search: {args.queries} queries, top {K}, {DIM}-d, {torch.get_num_threads()} threads, "
          f"methods {', '.join(methods)}")  # fmt: skip
    rows = {}
    for n in args.sizes:
        reps = 1 if n >= 1_000_000 else args.repeats
        rows[n] = {m: measure(m, n, args.queries, reps) for m in methods}
        cells = "  ".join(f"{m} {r['seconds']:.2f} s / {r['extra_mb']:.0f} MB" for m, r in rows[n].items())
        print(f"N = {n:>9,}: {cells}", flush=True)
    print()
    head = "| corpus rows | exact s | matrix s | exact ÷ matrix (time) | exact MB | matrix MB | exact ÷ matrix (memory)"
    head += " | faiss s | faiss ÷ exact (time) | faiss MB |" if "faiss" in methods else " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for n, r in rows.items():
        e, m = r["exact"], r["matrix"]
        mem_ratio = e["extra_mb"] / max(m["extra_mb"], 1e-9)
        cells = [f"{n:,}", f"{e['seconds']:.2f}", f"{m['seconds']:.2f}", f"{e['seconds'] / m['seconds']:.2f}",
                 f"{e['extra_mb']:.0f}", f"{m['extra_mb']:.0f}", f"{mem_ratio:.3f}"]  # fmt: skip
        if "faiss" in r:
            f = r["faiss"]
            cells += [f"{f['seconds']:.2f}", f"{f['seconds'] / e['seconds']:.2f}", f"{f['extra_mb']:.0f}"]
        print("| " + " | ".join(cells) + " |")
    first = rows[args.sizes[0]]["exact"]["seconds"]
    growth = ", ".join(f"{n:,}: {rows[n]['exact']['seconds'] / first:.1f}×" for n in args.sizes)
    print(f"\nexact search time relative to {args.sizes[0]:,} rows: {growth}")


if __name__ == "__main__":
    main()
