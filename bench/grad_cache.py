"""Gradient caching: peak memory flat in the batch, and the time it costs.

    .venv/bin/python bench/grad_cache.py [--points 64:0 256:0 256:64 1024:64] [--repeats 3]

A point ``B:c`` is one SimCSE training step at batch B through ``ContrastiveTrainer.compute_loss`` (the code
the recipes run): a BERT built from a config (L4/H256 by default, dropout on), max length 32, WEINCE, the
loss's backward, an AdamW step; ``c = 0`` is the uncached step (one forward of 2B rows), ``c > 0`` the
gradient-cached step with chunks of c sentences (2c rows per forward). Each point runs in its own subprocess,
so ``ru_maxrss`` is that point's peak resident memory; the time is the median of ``--repeats`` steps after a
warm-up. Ratios: peak memory against the first point (uncached B = 64, the baseline), time per sentence
against the uncached step at the same batch (when it was measured).
Targets (issue 13): B = 1,024 cached within 1.3x of B = 64's peak; time per sentence within 1.4x of uncached.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from common import bert_config, child_env


def step_point(
    batch: int, chunk: int, length: int, layers: int, hidden: int, repeats: int, device: str = "cpu"
) -> dict:
    """One (batch, chunk) point measured in this process: median step seconds and peak memory (MB): RSS on
    the CPU, ``torch.cuda.max_memory_allocated`` on a GPU (under fp16 autocast there, as the recipes run)."""
    from transformers import BertModel

    from simcse_weince.losses import WeinceLoss
    from simcse_weince.text.model import SimCSEModel
    from simcse_weince.training.arguments import ContrastiveTrainingArguments
    from simcse_weince.training.trainer import ContrastiveTrainer

    torch.manual_seed(0)
    cfg = bert_config(layers, hidden, length)
    model = SimCSEModel(BertModel(cfg, add_pooling_layer=False), pooler="cls").train()
    with tempfile.TemporaryDirectory() as tmp:
        args = ContrastiveTrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=batch,
            gradient_cache_chunk_size=chunk or None,
            use_cpu=device == "cpu",
            precision="fp32" if device == "cpu" else "fp16",
            report_to="none",
        )
        trainer = ContrastiveTrainer(model=model, args=args, loss=WeinceLoss(0.05))
    model = trainer.model  # on the Trainer's device
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    inputs = {
        "input_ids": torch.randint(1000, 30000, (batch, length), device=args.device),
        "attention_mask": torch.ones(batch, length, dtype=torch.long, device=args.device),
    }
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        with trainer.compute_loss_context_manager():  # autocast when the arguments ask for it
            loss = trainer.compute_loss(model, inputs)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device != "cpu":
            torch.cuda.synchronize()
        if i:  # the first step is a warm-up
            times.append(time.perf_counter() - t0)
    if device == "cpu":
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    else:
        peak = torch.cuda.max_memory_allocated() / 2**20
    return {"batch": batch, "chunk": chunk, "step_s": statistics.median(times), "peak_mb": peak}


def parse_point(text: str) -> tuple[int, int]:
    batch, _, chunk = text.partition(":")
    return int(batch), int(chunk or 0)


def run_point(batch: int, chunk: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", f"{batch}:{chunk}", "--length", str(args.length),
           "--layers", str(args.layers), "--hidden", str(args.hidden), "--repeats", str(args.repeats),
           "--device", args.device]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        raise SystemExit(f"point {batch}:{chunk} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[0][7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", nargs="+", default=["64:0", "256:0", "256:64", "1024:64"], help="batch:chunk")
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="Also write the points and ratios here.")
    ap.add_argument("--device", default="cpu", help="cpu (fp32, peak RSS) or cuda (fp16 autocast, peak allocated)")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # one point, in this process
    args = ap.parse_args()
    if args.child:
        b, c = parse_point(args.child)
        print(
            "RESULT " + json.dumps(step_point(b, c, args.length, args.layers, args.hidden, args.repeats, args.device))
        )
        return
    print(
        f"SimCSE step, BERT L{args.layers}/H{args.hidden}, len {args.length}, WEINCE, AdamW; "
        f"torch threads {torch.get_num_threads()}; chunk 0 = uncached"
    )
    print(
        f"{'batch':>6}{'chunk':>6}{'step s':>9}{'ms/sent.':>10}{'peak MB':>9}{'peak / base':>13}{'time / uncached':>17}"
    )
    rows, base = [], None
    uncached: dict[int, float] = {}
    for b, c in map(parse_point, args.points):
        r = run_point(b, c, args)
        per = 1e3 * r["step_s"] / b
        base = base or r["peak_mb"]
        if c == 0:
            uncached[b] = per
        r.update(ms_per_sentence=per, peak_ratio=r["peak_mb"] / base)
        r["time_ratio"] = per / uncached[b] if b in uncached else None
        rows.append(r)
        ratio = "-" if r["time_ratio"] is None else f"{r['time_ratio']:.2f}"
        print(f"{b:>6}{c:>6}{r['step_s']:>9.2f}{per:>10.2f}{r['peak_mb']:>9.0f}{r['peak_ratio']:>13.2f}{ratio:>17}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
