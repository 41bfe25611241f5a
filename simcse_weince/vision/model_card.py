"""Model card (README.md) of a SimCLR run's model folder: what it is, how it was trained, what it scores."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simcse_weince.training.ending import LOCAL_USAGE_PATH
from simcse_weince.training.model_card import RunFacts, render_card

if TYPE_CHECKING:
    from typing_extensions import Unpack  # read by type checkers only; typing.Unpack from Python 3.11 on

CARD = """---
tags:
- image-feature-extraction
- simclr
- {loss_tag}
---

# SimCLR-{loss_name} ({backbone}, {dataset})

Self-supervised image encoder trained SimCLR-style with **{loss_name}** by simcse-weince
(`python -m simcse_weince.cli.train_vision`).

| | |
|---|---|
| backbone | `{backbone}` (input {image_size} px), projection head to {projection_dim} dims |
| training data | {dataset}, {train_images:,} images |
| loss | {loss_name}: `{loss_config}` |
| training | {steps} steps, batch {batch} × {processes} process(es), lr {lr}, {precision} |
| model selection | best k-NN (k = 200) top-1 on the probe sets |

## Frozen-feature scores (backbone)

| metric | value |
|---|---|
{score_rows}

## Files

* `backbone.safetensors`: the backbone alone (features for probes and transfer);
* `model.safetensors` + `config.json`: backbone and projection head, as trained.

```python
{usage_imports}from simcse_weince.vision.model import load_simclr

model, config = load_simclr({usage_source})
features = model.features(images)  # (N, feature_dim)
```

## Citation

```bibtex
{citation}
```
"""


def render_vision_card(
    *,
    config: dict[str, Any],
    dataset: str,
    train_images: int,
    scores: dict[str, float],
    usage_path: str = LOCAL_USAGE_PATH,
    **facts: Unpack[RunFacts],
) -> str:
    """The card; ``usage_path`` is the Hub repository the folder was pushed to, or a local placeholder.
    ``facts``: the loss and the run, as both cards take them (:class:`~simcse_weince.training.model_card.RunFacts`)."""
    local = usage_path == LOCAL_USAGE_PATH
    return render_card(
        CARD,
        scores,
        facts,
        backbone=config["backbone"],
        image_size=config["image_size"],
        projection_dim=config["projection_dim"],
        dataset=dataset,
        train_images=train_images,
        usage_imports="" if local else "from huggingface_hub import snapshot_download\n",
        usage_source=f'"{usage_path}"' if local else f'snapshot_download("{usage_path}")',
    )
