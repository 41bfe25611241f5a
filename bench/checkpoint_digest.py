"""What a checkpoint's digests cost: the digest pass over a bert-base checkpoint vs the save that writes it, and a
training file's content digest vs tokenising it.

A bert-base (BERT's default config, 110M parameters, random weights: no download) is saved as the Trainer saves a
checkpoint: ``model.safetensors`` (``save_pretrained``), ``optimizer.pt`` (AdamW's state after one step: two
moments per weight) and ``scheduler.pt``; then :func:`~simcse_weince.core.digests.folder_digests` reads the folder back
(from the page cache, as right after a save). Each is the median of ``--repeats`` runs; the ratio is digest ÷ save.
The second line times a text file's digest (:func:`~simcse_weince.core.digests.read_digest`) against tokenising its
lines with a fast tokenizer (the offline all-MiniLM-L6-v2's), both once per repeat.

    .venv/bin/python bench/checkpoint_digest.py            # ~1 min here
    .venv/bin/python bench/checkpoint_digest.py --tiny     # a 2-layer model: the script end to end in seconds
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from simcse_weince.core.digests import folder_digests, read_digest
from simcse_weince.core.model_sources import offline_minilm_path
from simcse_weince.core.paths import data_root


def checkpoint_like(model: torch.nn.Module) -> dict:
    """An AdamW state after one step (the optimizer.pt a Trainer writes)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    return opt.state_dict()


def save(model: torch.nn.Module, optimizer_state: dict, folder: Path) -> float:
    t0 = time.perf_counter()
    model.save_pretrained(folder)
    torch.save(optimizer_state, folder / "optimizer.pt")
    torch.save({"last_epoch": 1}, folder / "scheduler.pt")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tiny", action="store_true", help="a 2-layer, 64-wide model (the script's test)")
    p.add_argument("--text", type=Path, default=None, help="a text file (default: the 1M-Wikipedia sample)")
    args = p.parse_args(argv)
    config = BertConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=2) if (
        args.tiny
    ) else BertConfig()  # fmt: skip
    torch.manual_seed(0)
    model = BertModel(config)
    state = checkpoint_like(model)
    saves, digests, size = [], [], 0
    root = Path(tempfile.mkdtemp(prefix="digest-bench-"))
    try:
        for i in range(args.repeats):
            folder = root / f"checkpoint-{i}"
            saves.append(save(model, state, folder))
            t0 = time.perf_counter()
            found = folder_digests(folder)
            digests.append(time.perf_counter() - t0)
            size = sum(int(v["bytes"]) for v in found.values())
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    s, d = statistics.median(saves), statistics.median(digests)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"checkpoint: {params:.1f}M parameters, {size / 1e9:.2f} GB in {len(found)} files")
    print(f"save {s:.3f} s, digest pass {d:.3f} s ({size / d / 1e9:.2f} GB/s): digest / save = {d / s:.3f}")

    text = args.text or data_root() / "wiki1m_sample" / "wiki1m_for_simcse.head1280000bytes.txt"
    tokenizer = AutoTokenizer.from_pretrained(offline_minilm_path() or "sentence-transformers/all-MiniLM-L6-v2")
    lines = text.read_text(encoding="utf-8").splitlines()
    hashing, tokenising = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        read_digest(text)  # read now, not remembered
        hashing.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tokenizer(lines, truncation=True, max_length=32)
        tokenising.append(time.perf_counter() - t0)
    h, t = statistics.median(hashing), statistics.median(tokenising)
    print(
        f"training file {text.name} ({text.stat().st_size / 1e6:.1f} MB, {len(lines)} lines): digest {h * 1e3:.1f} ms, "
        f"tokenising {t:.3f} s: digest / tokenising = {h / t:.4f}"
    )


if __name__ == "__main__":
    main()
