"""What the CPU can do fast: native bf16 (AVX-512-BF16 or AMX) or not, and the warning for bf16 without it.

bf16 autocast is a speed setting. On a CPU with bf16 units (AVX-512-BF16, AMX-BF16) oneDNN runs bf16 matrix products
faster than fp32; on an AVX2-only CPU it emulates them by converting every operand, and a bf16 linear layer runs
about 6.6× slower than the fp32 one (512×384 → 1536, one thread: 88.6 ms vs 13.5 ms, measured on a 2-core AMD EPYC
with AVX2 only). torch tells which case it is in: its kernel level (``ATEN_CPU_CAPABILITY``) and oneDNN's bf16 support
(which ``ONEDNN_MAX_CPU_ISA`` limits) both have to allow the native instructions.
"""

from __future__ import annotations

import sys

import torch

__all__ = ["SLOWDOWN", "cpu_has_native_bf16", "slow_bf16_warning", "warn_if_slow_bf16"]

SLOWDOWN = 6.6  # bf16 / fp32 time of a linear layer on an AVX2-only CPU (see the module docstring)


def cpu_has_native_bf16() -> bool:
    """True when torch runs bf16 matrix products on bf16 units of this CPU: AVX-512-BF16 or AMX-BF16 present,
    torch's kernels at an AVX-512 level, and oneDNN allowed to use them."""
    caps = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    units = bool(caps.get("avx512_bf16") or caps.get("amx_bf16"))
    kernels = torch.backends.cpu.get_cpu_capability().upper().startswith("AVX512")
    onednn = bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return units and kernels and onednn


def slow_bf16_warning(precision: str, device: str | torch.device | None, what: str) -> str | None:
    """The one-line warning for ``precision`` on ``device`` (``None``: the CPU unless CUDA is available), or
    ``None`` when bf16 is not asked for, runs on an accelerator, or the CPU has bf16 units."""
    if precision != "bf16":
        return None
    try:
        kind = torch.device(device).type if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
    except RuntimeError:  # not a device name: the command's own check of the option reports it
        return None
    if kind != "cpu" or cpu_has_native_bf16():
        return None
    return (
        f"warning: {what} --precision bf16 on a CPU without native bf16 (no AVX-512-BF16 or AMX in use): expect it "
        f"to run up to about {SLOWDOWN:g}x slower than fp32, not faster; use --precision fp32 here"
    )


def warn_if_slow_bf16(precision: str, device: str | torch.device | None, what: str) -> bool:
    """Print :func:`slow_bf16_warning` on stderr when it applies; True if it did."""
    message = slow_bf16_warning(precision, device, what)
    if message:
        print(message, file=sys.stderr, flush=True)
    return message is not None
