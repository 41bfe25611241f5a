"""Checking a ``--device`` value before anything heavy loads: torch only refuses a bad one deep inside the first
``.to(device)`` (``Torch not compiled with CUDA enabled``, ``invalid device ordinal``), after the data and the
model have loaded, and with a traceback."""

from __future__ import annotations

FORMS = "cpu, cuda, cuda:N, mps or another device type torch knows (xpu, npu, hpu, ...)"


def check_device(device: str | None, where: str = "--device") -> None:
    """``device`` (None: the default, chosen later) names a device this machine has.

    Raises:
        ValueError: ``--device cuda:3: CUDA is not available on this machine (...)``, or not a device name.
    """
    if device is None:
        return
    import torch

    try:  # torch's own parser: every device type it knows (cpu:0, xpu, npu, ...), with or without an index
        parsed = torch.device(device.strip())
    except (RuntimeError, ValueError):
        raise ValueError(f"{where} {device}: not a device; expected {FORMS}") from None
    kind, index = parsed.type, parsed.index
    if kind == "cuda":
        if not torch.cuda.is_available():
            built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "built without CUDA"
            raise ValueError(
                f"{where} {device}: CUDA is not available on this machine (torch {torch.__version__}, {built}); "
                "expected cpu here, or run on a machine with a CUDA GPU"
            )
        count = torch.cuda.device_count()
        if index is not None and index >= count:
            raise ValueError(
                f"{where} {device}: this machine has {count} CUDA devices (cuda:0 to cuda:{count - 1}); expected one "
                "of them, or cuda"
            )
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{where} {device}: MPS (Apple GPU) is not available on this machine; expected cpu")
