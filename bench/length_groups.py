"""Length groups: padded token positions and the training step's time for ``length_groups`` 1, 2, 4, 8.

A training batch of B sentences × 2 dropout views is padded to its longest text. ``length_groups: g`` encodes it
in g forwards of texts of similar length, each padded to its own longest (``simcse_weince.text.model``). Two
figures per g, each against g = 1 in the same run:

* **token positions** a batch holds (rows × padded width, summed over the groups): the mean over ``--draws``
  batches drawn at random from the quickstart's training text, tokenised as the README's command does
  (all-MiniLM-L6-v2's tokenizer, ``max_seq_length``); no model runs;
* **step time**: the library's ``SimCSEModel`` in training mode (dropout on) — forward of the 2B rows, InfoNCE
  (τ = 0.05), backward, AdamW — on ``--batches`` real batches; every batch is run once for each g in turn (round
  robin, so a slow spell of a shared machine falls on every g), and the figure is the median over batches of
  (time at g = 1) / (time at g), > 1: faster.

    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python bench/length_groups.py   # 4 min
    .venv/bin/python bench/length_groups.py --toy      # make test-bench's size (a 2-layer BERT, 3 batches)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import REPO, write_bert

from simcse_weince.core.model_sources import OFFLINE_MINILM, resolve_model_path

QUICKSTART = REPO / "configs" / "quickstart.yaml"


def training_lines() -> list[str]:
    """The quickstart's training sentences: its ``train_files``, read as training reads them (its
    ``drop_unterminated_last_line`` files without their cut-off last line)."""
    import yaml

    from simcse_weince.core.paths import resolve_data_path
    from simcse_weince.text.sources import is_cut_file
    from simcse_weince.text.sources.lines import read_sentences

    config = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    lines: list[str] = []
    for name in config["train_files"]:
        path = resolve_data_path(name)
        lines += read_sentences(path, is_cut_file(path, config.get("drop_unterminated_last_line")))
    return lines


def positions(lengths: list[int], groups: int) -> int:
    """Token positions of one batch of texts of these lengths in ``groups`` length groups (right padding)."""
    import torch

    from simcse_weince.text.model import length_groups

    width = max(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return sum(len(rows) * w for rows, w in length_groups(mask, groups))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=32)
    ap.add_argument("--draws", type=int, default=1000, help="random batches for the token positions")
    ap.add_argument("--batches", type=int, default=24, help="timed batches (each run once per g)")
    ap.add_argument("--model", default=OFFLINE_MINILM)
    ap.add_argument("--toy", action="store_true", help="a 2-layer BERT from a config, 3 timed batches")
    opts = ap.parse_args()
    if opts.groups[0] != 1:
        raise SystemExit("--groups: the first must be 1 (the reference of the ratios)")

    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from simcse_weince.losses import make_loss
    from simcse_weince.text.model import SimCSEModel, load_hf_encoder

    with tempfile.TemporaryDirectory() as tmp:
        model_path = resolve_model_path(opts.model)
        if opts.toy:
            model_path = str(write_bert(Path(tmp) / "bert", layers=2, hidden=64))
            opts.batches, opts.draws = 3, 50
        tok = AutoTokenizer.from_pretrained(model_path)
        lines = training_lines()
        lengths = np.array([len(x) for x in tok(lines, truncation=True, max_length=opts.max_len)["input_ids"]])
        rng = np.random.default_rng(0)
        draws = [rng.choice(len(lines), opts.batch, replace=False) for _ in range(opts.draws)]
        per_g = {g: statistics.fmean(positions(list(lengths[d]) * 2, g) for d in draws) for g in opts.groups}

        torch.manual_seed(0)
        model = SimCSEModel(load_hf_encoder(model_path), "avg").train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-12)  # the update's work, not its effect
        loss_fn = make_loss("infonce", temperature=0.05)
        times: dict[int, list[float]] = {g: [] for g in opts.groups}
        for i in range(opts.batches + 1):  # the first batch warms up and is not counted
            batch = tok([lines[j] for j in rng.choice(len(lines), opts.batch, replace=False)], truncation=True,
                        max_length=opts.max_len, padding=True, return_tensors="pt")  # fmt: skip
            for g in opts.groups:
                model.length_groups = g
                t0 = time.perf_counter()
                out = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
                loss_fn(out["anchors"], out["positives"]).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if i:
                    times[g].append(time.perf_counter() - t0)

    print(f"{opts.model if not opts.toy else 'toy BERT'}, batch {opts.batch} × 2 views, max_len {opts.max_len}, "
          f"{opts.draws} drawn batches, {opts.batches} timed batches, torch threads {torch.get_num_threads()}, "
          f"CPU capability {torch.backends.cpu.get_cpu_capability()}")  # fmt: skip
    print(f"{'length_groups':<15}{'positions':>10}{'vs 1':>7}{'step s':>9}{'speed vs 1':>12}")
    for g in opts.groups:
        ratio = statistics.median(a / b for a, b in zip(times[1], times[g], strict=True))
        print(f"{g:<15}{per_g[g]:>10.1f}{per_g[g] / per_g[1]:>7.3f}{statistics.median(times[g]):>9.3f}"
              f"{ratio:>11.3f}x")  # fmt: skip


if __name__ == "__main__":
    main()
