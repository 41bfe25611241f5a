"""The one interface the evaluators use, and helpers for frozen encoding.

:class:`Encoder` is ``encode(sentences) -> (N, D) float32 array``. Concrete encoders live with their models
(``simcse_weince.text.encoder``); anything with that method can be evaluated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch


class Encoder(Protocol):
    def encode(self, sentences: Sequence[str]) -> np.ndarray: ...


PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_context(device: torch.device | str, precision: str):
    """``torch.autocast`` for ``bf16``/``fp16`` inference, a no-op for ``fp32`` (the exact default)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    dtype = PRECISIONS[precision]
    device_type = torch.device(device).type
    return contextlib.nullcontext() if dtype is None else torch.autocast(device_type, dtype=dtype)


def unique_in_order(sentences: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Unique sentences and, for each input, the index of its unique copy."""
    index: dict[str, int] = {}
    inverse = np.empty(len(sentences), dtype=np.int64)
    for i, s in enumerate(sentences):
        inverse[i] = index.setdefault(s, len(index))
    return list(index), inverse
