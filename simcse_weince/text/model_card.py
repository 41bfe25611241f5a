"""Model card (README.md) of an exported SimCSE model: what it is, how it was trained, what it scores."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simcse_weince.training.model_card import RunFacts, render_card

if TYPE_CHECKING:
    from typing_extensions import Unpack  # read by type checkers only; typing.Unpack from Python 3.11 on

CARD = """---
library_name: sentence-transformers
pipeline_tag: sentence-similarity
tags:
- sentence-transformers
- sentence-similarity
- simcse
- {loss_tag}
base_model: {base_model}
---

# {title}

{mode} SimCSE sentence encoder trained with **{loss_name}** by
simcse-weince (`train_unsup.py`).

| | |
|---|---|
| base model | {base_desc} |
| training data | {data_desc} |
| loss | {loss_name}: `{loss_config}` |
| training | {steps} steps, batch {batch} × {processes} process(es), lr {lr}, max_seq_length {max_len}, {precision} |
| pooling | training `{pooler}`; inference `{inference_pooler}` (this folder) |
| inference | {inference_desc} |
| model selection | {selection}, evaluated every {eval_steps} steps |

## Scores (× 100: cosine Spearman for STS)

| split | score |
|---|---|
{score_rows}

{note}

## Usage

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{usage_path}")
embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])
```

## Citation

```bibtex
{citation}
```
"""


def render_model_card(
    *,
    base_model: str,
    from_config: bool,
    data_desc: str,
    max_len: int,
    pooler: str,
    inference_pooler: str,
    eval_steps: Any,
    scores: dict[str, float],
    usage_path: str,
    note: str = "",
    inference_desc: str = "",
    supervised: bool = False,
    selection: str = "best stsb_spearman on STS-B dev",
    **facts: Unpack[RunFacts],
) -> str:
    """The card's text. ``supervised``: trained on pairs (and hard negatives), SimCSE's supervised mode; else on
    single sentences with dropout views (``data_desc`` says which rows and how many). ``selection`` says what
    picked the checkpoint (the metric and the validation). ``facts``: the loss and the run, as both cards take
    them (:class:`~simcse_weince.training.model_card.RunFacts`)."""
    base_desc = (
        f"`{base_model}` architecture, randomly initialised from its config" if from_config else f"`{base_model}`"
    )
    return render_card(
        CARD,
        scores,
        facts,
        title=f"SimCSE-{facts['loss_name']} ({base_model.rstrip('/').split('/')[-1]})",
        base_model=base_model,
        base_desc=base_desc,
        data_desc=data_desc,
        max_len=max_len,
        pooler=pooler,
        inference_pooler=inference_pooler,
        eval_steps=eval_steps,
        selection=selection,
        note=note,
        usage_path=usage_path,
        inference_desc=inference_desc,
        mode="Supervised" if supervised else "Unsupervised",
    )


def inference_description(normalize: bool, base_max_len: int | None, limit: int) -> str:
    """What the exported folder does at inference and where that comes from: ``base_max_len`` is the base
    SentenceTransformer's own length limit (``None`` for a plain encoder, whose ``limit`` is the model's)."""
    if base_max_len is not None:
        desc = f"max_seq_length {base_max_len} (as the base model)"
    else:
        desc = f"max_seq_length {limit} (the model's limit)"
    return desc + ("; L2-normalised output (the base model's Normalize module)" if normalize else "")


def score_label(key: str, max_pairs: int | None, validation: dict | None = None) -> str:
    """``stsb_dev`` -> ``STS-B dev``, or ``STS-B dev (first 100 pairs)`` for a subset score; ``validation`` -> the
    user's validation and its metric (``retrieval folder X, retrieval_ndcg@10``), cut to ``max_pairs`` when its
    dev set is scored on pairs (the record's ``pairs``, :attr:`~simcse_weince.evaluation.family.DevSet.pairs`)."""
    if key == "validation":
        validation = validation or {}
        label = f"{validation.get('label', 'validation')}, {validation.get('metric', '')}"
        return label if max_pairs is None or not validation.get("pairs") else f"{label} (first {max_pairs} pairs)"
    label = "STS-B " + key.split("_")[1]
    return label if max_pairs is None else f"{label} (first {max_pairs} pairs)"
