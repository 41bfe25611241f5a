"""How cost grows with the work: SimCSE step time and peak memory vs batch size and sequence length, and the
time and memory of preparing the training text at 1M and 10M lines (synthetic: real words of the Wikipedia
sample in random order, since the real wiki1m file is not available offline).

    .venv/bin/python bench/scaling.py [--batches 64 128 256 512] [--lengths 32 64 128]
                                      [--lines 1000000] [--big-lines 10000000] [--tmp DIR] [--data-only]

Each (batch, length) point runs in its own subprocess (its own peak memory): a BERT built from a config
(L4/H256 by default) encodes 2B rows, WEINCE loss, backward, AdamW step; the median of ``--repeats`` steps
after a warm-up is reported, with time per sentence relative to the first point.

Training text, each path in its own subprocess: the in-memory path before the token cache (Python lists,
``Dataset.from_dict``) at ``--lines``; then the token cache built, reused, and read by a process that may not
build it (as every process but the main one), which reads every row once; then the cache alone at
``--big-lines`` (the in-memory path would need ~11 GB per million lines). Peak RSS, time, and both as ratios
to the in-memory path. Needs ~1.5 GB of disk in the temp folder per 10M lines of text, as much again for the
cache.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import bert_config, child_env, wiki_sample

WIDTHS = (12, 7, 9, 8, 9, 7, 11, 11)  # columns of the training-text table after the label
WIKI = wiki_sample()


def step_point(batch: int, length: int, layers: int, hidden: int, repeats: int) -> dict:
    from transformers import BertModel

    from simcse_weince.losses import WeinceLoss

    torch.manual_seed(0)
    cfg = bert_config(layers, hidden, length)
    model = BertModel(cfg, add_pooling_layer=False).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    loss_fn = WeinceLoss(0.05)
    ids = torch.randint(1000, 30000, (batch, length))
    ids2, mask = torch.cat([ids, ids]), torch.ones(2 * batch, length, dtype=torch.long)
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        z = model(input_ids=ids2, attention_mask=mask).last_hidden_state[:, 0]
        loss_fn(z[:batch], z[batch:]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:  # the first step is a warm-up
            times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"batch": batch, "length": length, "step_s": statistics.median(times), "peak_mb": peak}


def write_synthetic(path: Path, lines: int, seed: int = 0) -> float:
    """``lines`` lines of 5–39 real words of the Wikipedia sample in random order; returns the size in MB."""
    from simcse_weince.text.sources.lines import iter_sentences

    words = np.array(" ".join(iter_sentences(WIKI, drop_unterminated_last_line=True)).split())  # quietly
    rng = np.random.default_rng(seed)
    with path.open("w", encoding="utf-8") as f:
        for start in range(0, lines, 100_000):  # in blocks: memory stays flat for 10M lines
            lengths = rng.integers(5, 40, size=min(100_000, lines - start))
            picks = words[rng.integers(0, len(words), size=int(lengths.sum()))]
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            f.write("".join(" ".join(picks[a:b]) + "\n" for a, b in itertools.pairwise(bounds)))
    return path.stat().st_size / 2**20


def memory_gb() -> dict:
    """This process's resident memory now and at its peak, and the split of the current one, in GB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) / 2**20  # kB -> GB
    return fields


def data_point(mode: str, path: str, cache_root: str) -> dict:
    """One data path in this (child) process: time and memory over the memory after the imports.

    ``inmemory``: the path before the token cache (``read_sentences`` + one tokenizer call over the whole
    list + ``Dataset.from_dict``). ``cached``: ``prepare_rows``, building the cache or memory-mapping it.
    ``reader``: a process that may not build (``build=False``), as every process but the main one, which
    then reads every row once (an epoch's worth of ``__getitem__`` in batches).
    """
    import datasets
    from transformers import AutoTokenizer

    from simcse_weince.core.model_sources import OFFLINE_MINILM, resolve_model_path
    from simcse_weince.text.data import SimCSECollator
    from simcse_weince.text.reading import TextStats
    from simcse_weince.text.sources import ReadOptions, open_sources
    from simcse_weince.text.sources.lines import read_sentences
    from simcse_weince.text.token_cache import prepare_rows

    tok = AutoTokenizer.from_pretrained(resolve_model_path(OFFLINE_MINILM))
    base = memory_gb()
    stats = TextStats()
    t0 = time.perf_counter()
    if mode == "inmemory":
        ids = tok(read_sentences(path, stats=stats), truncation=True, max_length=32)["input_ids"]
        ds = datasets.Dataset.from_dict({"input_ids": ids})
    else:
        sources = open_sources([path], ReadOptions())
        ds = prepare_rows(sources, tok, 32, stats, cache_root=cache_root, build=mode != "reader")
    seconds = time.perf_counter() - t0
    opened = memory_gb()
    if mode == "reader":
        collate = SimCSECollator(tok)
        for start in range(0, len(ds), 1024):
            batch = ds[start : start + 1024]
            collate([{"input_ids": x, "sentence_key": k} for x, k in zip(*batch.values(), strict=True)])
    end = memory_gb()
    return {
        "mode": mode,
        "rows": len(ds),
        "seconds": seconds,
        "base": base,
        "opened": opened,
        "end": end,
        "reused": stats.cache_reused,
        "truncated": stats.truncated,
    }


def run_data_point(mode: str, path: Path, cache_root: Path) -> dict:
    env = child_env(HF_HUB_OFFLINE="1")
    cmd = [sys.executable, __file__, "--data-point", mode, str(path), str(cache_root)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        raise SystemExit(f"data point {mode} {path.name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[0][7:])


def data_scaling(lines: int, big_lines: int, tmp_root: str | None) -> None:
    """The training-text table: the in-memory path against the token cache (build, reuse, a reader), at
    ``lines`` and (cache only: the in-memory path needs ~11 GB per million lines) at ``big_lines``. Either may
    be 0 (skipped); without ``lines`` the ratios are against the first cache row."""
    print(
        "\nTraining text: synthetic lines (real words of the Wikipedia sample), MiniLM tokenizer, max_len 32, "
        f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', '(unset: the Rust threads)')}; "
        f"each row its own process"
    )
    head = ("path", "lines", "MB", "time s", "s / 1M", "peak GB", "+ GB", "rel. time", "rel. peak")
    print(f"{head[0]:<30}" + "".join(f"{h:>{w}}" for h, w in zip(head[1:], WIDTHS, strict=True)))
    sizes = ([lines] if lines else []) + ([big_lines] if big_lines else [])
    before = None
    with tempfile.TemporaryDirectory(dir=tmp_root) as tmp:
        for n in sizes:
            text = Path(tmp) / f"synthetic_{n}.txt"
            mb = write_synthetic(text, n)
            cache = Path(tmp) / f"cache_{n}"
            modes = (["inmemory"] if n == lines else []) + ["cached", "cached", "reader"]
            for mode in modes:
                r = run_data_point(mode, text, cache)
                label = {"inmemory": "in-memory (before)", "reader": "other process (maps + 1 pass)"}.get(
                    mode, "cache reused" if r["reused"] else "cache built"
                )
                peak, grown = r["end"]["VmHWM"], r["end"]["VmHWM"] - r["base"]["VmRSS"]
                before = before or (r["seconds"] / n, peak)
                print(  # widths: WIDTHS
                    f"{label:<30}{r['rows']:>12,}{mb:>7.0f}{r['seconds']:>9.1f}{1e6 * r['seconds'] / n:>8.1f}"
                    f"{peak:>9.2f}{grown:>7.2f}{r['seconds'] / n / before[0]:>11.3f}{peak / before[1]:>11.3f}"
                )
                if mode == "reader":
                    e, o, b = r["end"], r["opened"], r["base"]
                    print(
                        f"{'':<30}after imports {b['VmRSS']:.2f} GB; + {o['VmRSS'] - b['VmRSS']:.3f} GB once "
                        f"mapped; after the pass + {e['RssAnon'] - b['RssAnon']:.3f} GB private, "
                        f"+ {e['RssFile'] - b['RssFile']:.3f} GB mapped file pages (shared page cache)"
                    )
    print(
        "peak GB: the process's peak RSS (imports included); + GB: peak minus its RSS after the imports; rel.: "
        "per line, against the in-memory path"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lines", type=int, default=1_000_000, help="training-text lines, both paths (0: skip)")
    ap.add_argument("--big-lines", type=int, default=10_000_000, help="lines for the cache alone (0: skip)")
    ap.add_argument("--tmp", help="folder for the synthetic files and caches (default: the system's temp)")
    ap.add_argument("--data-only", action="store_true", help="only the training-text table")
    ap.add_argument("--point", type=int, nargs=2, help=argparse.SUPPRESS)  # child mode: batch length
    ap.add_argument("--data-point", nargs=3, help=argparse.SUPPRESS)  # child mode: mode file cache_root
    args = ap.parse_args()
    if args.point:
        print("RESULT " + json.dumps(step_point(*args.point, args.layers, args.hidden, args.repeats)))
        return
    if args.data_point:
        print("RESULT " + json.dumps(data_point(*args.data_point)))
        return
    if not args.data_only:
        step_scaling(args)
    data_scaling(args.lines, args.big_lines, args.tmp)


def step_scaling(args: argparse.Namespace) -> None:
    points = [(b, args.lengths[0]) for b in args.batches] + [(args.batches[0], n) for n in args.lengths[1:]]
    print(f"SimCSE step, BERT L{args.layers}/H{args.hidden}, WEINCE, AdamW; torch threads {torch.get_num_threads()}")
    print(f"{'batch':>6}{'len':>5}{'step s':>9}{'ms/sentence':>13}{'rel.':>7}{'peak MB':>9}")
    base = None
    for b, n in points:
        cmd = [
            sys.executable,
            __file__,
            "--point",
            str(b),
            str(n),
            "--layers",
            str(args.layers),
            "--hidden",
            str(args.hidden),
            "--repeats",
            str(args.repeats),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            raise SystemExit(f"point {b}x{n} failed:\n{proc.stderr[-3000:]}")
        r = json.loads(line[0][7:])
        per = 1e3 * r["step_s"] / b
        base = base or per
        print(f"{b:>6}{n:>5}{r['step_s']:>9.2f}{per:>13.2f}{per / base:>7.2f}{r['peak_mb']:>9.0f}")


if __name__ == "__main__":
    main()
