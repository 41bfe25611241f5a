"""Export a trained :class:`SimCSEModel` as a ``SentenceTransformer`` folder (with ``card`` as README.md if given).

The folder holds only what inference needs: the encoder weights and config, the tokenizer, and the
sentence-transformers modules that reproduce the inference pooler:

* ``cls_before_pooler`` -> ``Pooling("cls")``
* ``cls`` (MLP kept at inference) -> ``Pooling("cls")`` + ``Dense(tanh)`` with the trained MLP weights
* ``avg`` -> ``Pooling("mean")``
* ``avg_first_last`` -> ``WeightedLayerPooling`` (weight 1 on the first and last layer, 0 elsewhere) +
  ``Pooling("mean")``
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from simcse_weince.core.file_modes import give_usual_modes
from simcse_weince.text.model import SimCSEModel, inference_max_length

logger = logging.getLogger(__name__)


def pooling_modules(pooler: str, hidden: int, layers: int, mlp: torch.nn.Linear | None = None) -> list:
    """The sentence-transformers modules after the ``Transformer`` that reproduce a SimCSE inference ``pooler``
    (see the module docstring): ``hidden`` is the encoder's width, ``layers`` its number of transformer layers,
    ``mlp`` the trained MLP's linear layer (kept after ``cls`` only). ``avg_first_last`` needs the Transformer
    to output its hidden states (``config.output_hidden_states``)."""
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, WeightedLayerPooling

    if pooler in ("cls", "cls_before_pooler"):
        modules: list = [Pooling(hidden, pooling_mode="cls")]
    elif pooler == "avg":
        modules = [Pooling(hidden, pooling_mode="mean")]
    else:
        weights = torch.zeros(layers, dtype=torch.float)
        weights[0] = weights[-1] = 1.0  # layers 1 and L of hidden_states[1:]
        modules = [
            WeightedLayerPooling(
                hidden,
                num_hidden_layers=layers,
                layer_start=1,
                layer_weights=torch.nn.Parameter(weights, requires_grad=False),
            ),
            Pooling(hidden, pooling_mode="mean"),
        ]
    if pooler == "cls" and mlp is not None:
        modules.append(
            Dense(
                hidden,
                hidden,
                activation_function=torch.nn.Tanh(),
                init_weight=mlp.weight.detach().clone(),
                init_bias=mlp.bias.detach().clone(),
            )
        )
    return modules


def sentence_transformer_modules(model: SimCSEModel, folder: str, max_seq_length: int | None) -> list:
    """``Transformer(folder)`` and the :func:`pooling_modules` of the model's inference pooler."""
    from sentence_transformers.sentence_transformer.modules import Transformer

    pooler = model.inference_pooler
    config_kwargs = {"output_hidden_states": True} if pooler == "avg_first_last" else None
    transformer = Transformer(folder, max_seq_length=max_seq_length, config_kwargs=config_kwargs)
    cfg = model.encoder.config
    mlp = model.mlp[0] if model.mlp is not None else None
    return [transformer, *pooling_modules(pooler, cfg.hidden_size, cfg.num_hidden_layers, mlp)]


def export_sentence_transformer(
    model: SimCSEModel,
    tokenizer,
    folder: str | Path,
    max_seq_length: int | None = None,
    card: str | None = None,
    normalize: bool = False,
) -> Path:
    """Write ``folder`` so that ``SentenceTransformer(folder)`` gives the model's inference embeddings.

    ``max_seq_length`` defaults to :func:`~simcse_weince.text.model.inference_max_length`, the limit the
    project's own evaluators use, so both encode the same tokens; ``normalize`` appends a ``Normalize``
    module (kept from a base model that had one: cosine scores are unchanged, dot products are not).
    """
    from sentence_transformers import SentenceTransformer

    if max_seq_length is None:
        max_seq_length = inference_max_length(tokenizer, model.encoder.config)

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if model.inference_pooler == "avg_first_last":
        model.encoder.config.output_hidden_states = True
    model.encoder.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    modules = sentence_transformer_modules(model, str(folder), max_seq_length)
    if normalize:
        from sentence_transformers.base.modules.normalize import Normalize

        modules.append(Normalize())
    st = SentenceTransformer(modules=modules, device="cpu")
    st.save(str(folder), create_model_card=False)  # the run renders its own card (training/ending.py)
    if card is not None:
        (folder / "README.md").write_text(card, encoding="utf-8")
    give_usual_modes(folder)  # the weights are written through a 0600 temporary file; others may read the model
    logger.info("saved SentenceTransformer folder %s (pooler %s)", folder, model.inference_pooler)
    return folder
