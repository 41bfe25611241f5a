"""The cost of every registered loss against InfoNCE: the loss alone (forward + backward) and a full SimCSE-shaped
training step (WEINCE and an A/A control), each loss's extra work as a share of the InfoNCE step.

Prints ratios measured in one run (interleaved repeats, medians). Usage:

    .venv/bin/python bench/loss_overhead.py [--repeats 30] [--step-repeats 12] [--layers 4 --hidden 256]

The full step is: a BERT built from a config (no download) encodes 2B rows (two dropout views in one
forward), CLS pooling, the loss, backward, AdamW update. The overhead of a full step is reported two ways:
the ratio of median step times (noisy at the 1 % level on a shared CPU), and the difference of the
loss-only medians divided by the InfoNCE step median (the direct estimate of the extra work); the latter is
printed for every loss of :data:`~simcse_weince.losses.LOSSES` (target <= 1 %), each built with τ = 0.05 where it
takes a temperature (``arctanh`` takes none). A loss's own parameters (``learned_link``, ``learned_temperature``)
are in the graph the backward reaches (checked at the first call); they are not stepped.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

import torch
from transformers import BertConfig, BertModel

from simcse_weince.losses import LOSSES, ContrastiveLoss, InfoNCELoss, WeinceLoss

TEMPERATURE = 0.05


def _time(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def interleaved(fns: dict[str, Callable[[], None]], repeats: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds per call of each function, calls interleaved so drift hits all alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    order = list(fns)
    for r in range(repeats):
        # Rotate the order every repeat so no function always runs right after another.
        for k in order[r % len(order) :] + order[: r % len(order)]:
            times[k].append(_time(fns[k]))
    return {k: statistics.median(v) for k, v in times.items()}


def build_losses(beta_mode: str, device: torch.device) -> dict[str, ContrastiveLoss]:
    """Every registered loss by its name, InfoNCE and WEINCE first: τ = 0.05 where its config has a temperature,
    WEINCE with ``beta_mode``."""
    losses: dict[str, ContrastiveLoss] = {
        "infonce": InfoNCELoss(TEMPERATURE),
        "weince": WeinceLoss(TEMPERATURE, beta_mode=beta_mode),
    }
    for name, cls in LOSSES.items():
        if name not in losses:
            takes_tau = "temperature" in {f.name for f in dataclasses.fields(cls.Config)}
            losses[name] = cls(TEMPERATURE) if takes_tau else cls()
    return {name: loss.to(device) for name, loss in losses.items()}


def _reached(loss: torch.nn.Module) -> None:
    """``RuntimeError`` unless the backward just run gave every trainable parameter of ``loss`` a gradient."""
    missed = [n for n, q in loss.named_parameters() if q.requires_grad and q.grad is None]
    if missed:
        raise RuntimeError(f"{type(loss).__name__}: the backward did not reach {missed}")


def loss_only(batch: int, dim: int, repeats: int, device: torch.device, beta_mode: str) -> dict[str, float]:
    """Median seconds of forward + backward of every registered loss on the same (batch, dim) embeddings."""
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(batch, dim, generator=g).to(device).requires_grad_(True)
    p = (a.detach() + 0.5 * torch.randn(batch, dim, generator=g).to(device)).requires_grad_(True)
    losses = build_losses(beta_mode, device)

    def run(fn: torch.nn.Module) -> Callable[[], None]:
        checked = False

        def step() -> None:
            nonlocal checked
            a.grad = p.grad = None
            fn.zero_grad(set_to_none=True)  # the loss's own parameters, if any, are in the graph
            fn(a, p).backward()
            if not checked:
                _reached(fn)
                checked = True

        return step

    return interleaved({k: run(v) for k, v in losses.items()}, repeats)


def full_step(args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    cfg = BertConfig(
        vocab_size=30522,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64),
        intermediate_size=4 * args.hidden,
    )
    torch.manual_seed(0)
    model = BertModel(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5)
    ids = torch.randint(1000, 30000, (args.batch, args.max_len), device=device)
    ids2 = torch.cat([ids, ids])  # two dropout views in ONE forward of 2B rows
    mask = torch.ones_like(ids2)
    # A second InfoNCE entry is an A/A control: its ratio to the first shows the timing noise.
    losses = {
        "infonce": InfoNCELoss(TEMPERATURE),
        "weince": WeinceLoss(TEMPERATURE, beta_mode=args.beta_mode),
        "infonce_control": InfoNCELoss(TEMPERATURE),
    }

    def run(fn: torch.nn.Module) -> Callable[[], None]:
        def step() -> None:
            out = model(input_ids=ids2, attention_mask=mask).last_hidden_state[:, 0]  # (2B, H)
            loss = fn(out[: args.batch], out[args.batch :])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    return interleaved({k: run(v) for k, v in losses.items()}, args.step_repeats, warmup=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--step-repeats", type=int, default=12)
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=32)
    ap.add_argument("--beta-mode", default="ols", choices=["unit", "ols", "hill"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} beta_mode={args.beta_mode}")

    print("\nloss alone (forward + backward), D =", args.dim)
    print(f"{'B':>6} {'InfoNCE ms':>11} {'WEINCE ms':>10} {'ratio':>7}")
    per_batch = {}
    for b in args.batches:
        t = per_batch[b] = loss_only(b, args.dim, args.repeats, device, args.beta_mode)
        print(f"{b:>6} {1e3 * t['infonce']:>11.3f} {1e3 * t['weince']:>10.3f} {t['weince'] / t['infonce']:>7.3f}")
    others = [name for name in LOSSES if name != "infonce"]
    width = max(len(name) for name in others)
    print("\nevery registered loss alone, ratio of its median to InfoNCE's (the same runs)")
    print(f"{'B':>6} " + " ".join(f"{name:>{width}}" for name in others))
    for b, t in per_batch.items():
        print(f"{b:>6} " + " ".join(f"{t[name] / t['infonce']:>{width}.3f}" for name in others))

    t_loss = loss_only(args.batch, args.hidden, args.repeats, device, args.beta_mode)
    t_step = full_step(args, device)
    extra = (t_loss["weince"] - t_loss["infonce"]) / t_step["infonce"]
    print(
        f"\nfull SimCSE step: BERT L{args.layers}/H{args.hidden}, batch {args.batch} x 2 views, "
        f"max_len {args.max_len}, AdamW"
    )
    print(f"  InfoNCE step median  {1e3 * t_step['infonce']:9.2f} ms")
    print(f"  WEINCE  step median  {1e3 * t_step['weince']:9.2f} ms")
    print(f"  InfoNCE control      {1e3 * t_step['infonce_control']:9.2f} ms  (A/A noise check)")
    print(f"  ratio of step medians             {t_step['weince'] / t_step['infonce']:.4f}")
    print(f"  A/A control ratio (noise)         {t_step['infonce_control'] / t_step['infonce']:.4f}")
    print(
        f"  loss-only difference / step time  {100 * extra:+.3f} % "
        f"({1e3 * (t_loss['weince'] - t_loss['infonce']):.3f} ms extra per step)"
    )
    print("  loss-only difference / InfoNCE step time, every registered loss (target <= 1 %):")
    for name in others:
        extra = (t_loss[name] - t_loss["infonce"]) / t_step["infonce"]
        diff_ms = 1e3 * (t_loss[name] - t_loss["infonce"])
        print(f"    {name:<{width}}  {100 * extra:+.3f} % ({diff_ms:.3f} ms extra per step)")


if __name__ == "__main__":
    main()
