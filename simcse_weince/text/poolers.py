"""Sentence poolers of SimCSE, as pure functions of the encoder outputs.

* ``cls``: the [CLS] vector, followed by the SimCSE MLP (Linear + tanh) — the MLP lives in the model;
* ``cls_before_pooler``: the [CLS] vector of the last layer, no MLP;
* ``avg``: mean of the last layer over non-padding tokens;
* ``avg_first_last``: mean over non-padding tokens of (first transformer layer + last layer) / 2
  (``hidden_states[1]`` and ``hidden_states[-1]``; ``hidden_states[0]`` is the embedding layer).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

Pooler = Literal["cls", "cls_before_pooler", "avg", "avg_first_last"]
POOLERS: tuple[str, ...] = get_args(Pooler)


def validate_pooler(pooler: str) -> None:
    if pooler not in POOLERS:
        raise ValueError(f"pooler must be one of {POOLERS}, got {pooler!r}")


def needs_hidden_states(pooler: str) -> bool:
    return pooler == "avg_first_last"


def masked_mean(tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(N, L, H), (N, L) -> (N, H): mean over positions where the mask is 1."""
    mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
    return (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)


def pool(
    pooler: str,
    last_hidden: torch.Tensor,
    attention_mask: torch.Tensor,
    hidden_states: tuple[torch.Tensor, ...] | None = None,
) -> torch.Tensor:
    """Pool token states (N, L, H) into sentence vectors (N, H); ``cls`` returns the vector before its MLP."""
    validate_pooler(pooler)
    if pooler in ("cls", "cls_before_pooler"):
        return last_hidden[:, 0]
    if pooler == "avg":
        return masked_mean(last_hidden, attention_mask)
    if hidden_states is None or len(hidden_states) < 2:
        raise ValueError("avg_first_last needs the encoder's hidden_states (output_hidden_states=True)")
    return masked_mean((hidden_states[1] + hidden_states[-1]) / 2.0, attention_mask)
