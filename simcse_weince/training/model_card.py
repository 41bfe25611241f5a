"""What the text and the vision model cards share: the run's facts, the loss section and the score table.

Each card (``text/model_card.py``, ``vision/model_card.py``) keeps its own template and its own fields; both are
rendered by :func:`render_card`, so the loss, the training run and the scores read the same on either card.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

NOT_EVALUATED = "| (not evaluated) | |"


class RunFacts(TypedDict):
    """What both cards say about the training run (the keys of :func:`~simcse_weince.training.run.card_facts`)."""

    loss_name: str  # display name: WEINCE, InfoNCE
    loss_config: dict[str, Any]  # the loss's get_config_dict()
    citation: str  # the loss's BibTeX
    steps: int
    batch: int  # per process
    processes: int
    lr: float
    precision: str


def loss_section(loss_name: str, loss_config: Mapping[str, Any], citation: str) -> dict[str, str]:
    """The card's fields about the loss: ``loss_tag`` (front matter), ``loss_name``, ``loss_config`` (sorted JSON)
    and ``citation`` (stripped BibTeX), from the loss's display name, config dict and citation."""
    return {
        "loss_tag": loss_name.lower(),
        "loss_name": loss_name,
        "loss_config": json.dumps(loss_config, sort_keys=True),
        "citation": citation.strip(),
    }


def score_rows(scores: Mapping[str, float]) -> str:
    """The score table's rows, ``| name | 81.23 |`` (two decimals), or one row saying nothing was evaluated."""
    return "\n".join(f"| {k} | {v:.2f} |" for k, v in scores.items()) or NOT_EVALUATED


def render_card(template: str, scores: Mapping[str, float], facts: RunFacts, **fields: Any) -> str:
    """``template`` filled with the loss section, the run's steps, batch, processes, lr and precision, the score
    rows (``{score_rows}``) and the card's own ``fields``."""
    return template.format(
        **loss_section(facts["loss_name"], facts["loss_config"], facts["citation"]),
        steps=facts["steps"],
        batch=facts["batch"],
        processes=facts["processes"],
        lr=facts["lr"],
        precision=facts["precision"],
        score_rows=score_rows(scores),
        **fields,
    )
