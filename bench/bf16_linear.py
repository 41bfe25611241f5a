"""bf16 against fp32 on this CPU: one linear layer (512×384 → 1536, the shape of a MiniLM feed-forward input), timed
in the same run, and whether torch runs bf16 on bf16 units here (``simcse_weince.core.hardware``). Usage:

    .venv/bin/python bench/bf16_linear.py [--repeats 50] [--threads 1]
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python bench/bf16_linear.py   # an AVX2-only CPU

Prints the median milliseconds of each and the ratio bf16 / fp32: below 1 where bf16 units run it (AVX-512-BF16,
AMX), above 1 where bf16 is emulated; the ratio is what ``--precision bf16``'s warning is about.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from simcse_weince.core.hardware import cpu_has_native_bf16


def median_ms(layer: torch.nn.Linear, x: torch.Tensor, bf16: bool, repeats: int) -> float:
    """Median milliseconds of one forward, under bf16 autocast or not (three untimed calls first)."""
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    times = []
    with torch.no_grad(), ctx:
        for i in range(repeats + 3):
            t0 = time.perf_counter()
            layer(x)
            if i >= 3:
                times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        ap.error("--repeats and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(384, 1536), torch.randn(512, 384)
    fp32 = median_ms(layer, x, False, args.repeats)
    bf16 = median_ms(layer, x, True, args.repeats)
    native = cpu_has_native_bf16()
    print(f"torch {torch.__version__} · kernels {torch.backends.cpu.get_cpu_capability()} · threads {args.threads}")
    print(f"native bf16 (AVX-512-BF16 or AMX in use): {'yes' if native else 'no'}")
    print(f"  fp32 linear 512x384 -> 1536   {fp32:8.2f} ms")
    print(f"  bf16 linear (autocast)        {bf16:8.2f} ms   bf16 / fp32 {bf16 / fp32:.2f}x")
    return {"fp32_ms": fp32, "bf16_ms": bf16, "ratio": bf16 / fp32, "native": float(native)}


if __name__ == "__main__":
    main()
