"""Any text checkpoint the evaluation loads, as a ``SentenceTransformer`` encoding the same vectors.

For the sentence-transformers utilities that take a ``SentenceTransformer`` (e.g. ``mine_hard_negatives``):

* a SentenceTransformer folder, or a SimCSE training output folder (its ``model/``), is loaded as saved;
* with ``pooler`` set, its ``Transformer`` module is kept and pooled the SimCSE way instead (its other modules,
  e.g. ``Normalize``, dropped: cosine scores are the same), as the evaluation does;
* any other Hugging Face encoder (a folder or a Hub name) becomes ``Transformer`` + the modules of ``pooler``
  (default ``cls_before_pooler``, the evaluation's default for a plain encoder), built by
  :func:`~simcse_weince.text.export.pooling_modules`, the mapping the project's exports use.

The ``cls`` pooler needs a trained MLP, which only an exported SimCSE folder holds (as its ``Dense`` module): it
is refused here, as by :func:`~simcse_weince.text.checkpoint.load_text_checkpoint`.
"""

from __future__ import annotations

import logging

from simcse_weince.text.checkpoint import checkpoint_folder, is_sentence_transformer
from simcse_weince.text.export import pooling_modules
from simcse_weince.text.poolers import validate_pooler

logger = logging.getLogger(__name__)

PLAIN_ENCODER_POOLER = "cls_before_pooler"


def check_pooler(pooler: str | None) -> None:
    """A pooler a checkpoint without a trained MLP can use (``None``: the checkpoint's own).

    Raises:
        ValueError: not a pooler name, or ``cls`` (names the poolers allowed).
    """
    if pooler is None:
        return
    validate_pooler(pooler)
    if pooler == "cls":
        raise ValueError(
            "pooler 'cls' needs the trained SimCSE MLP, which only an exported SimCSE folder holds (load it without "
            "a pooler); use cls_before_pooler, avg or avg_first_last"
        )


def load_sentence_transformer(source: str, pooler: str | None = None, device: str | None = None):
    """``source`` (a checked model source: :func:`~simcse_weince.core.model_sources.check_model_source`) as a
    ``SentenceTransformer`` on ``device``, in fp32 however it was stored.

    Args:
        source: a SentenceTransformer folder, a SimCSE training output folder, a HF encoder folder or Hub name.
        pooler: ``None`` keeps a SentenceTransformer folder's own modules (``cls_before_pooler`` for a plain
            encoder); else the transformer pooled with it (``cls_before_pooler``, ``avg``, ``avg_first_last``).
        device: e.g. ``cpu``, ``cuda`` (default: sentence-transformers' choice).

    Raises:
        ValueError: a pooler :func:`check_pooler` refuses, or a SentenceTransformer folder whose first module
            is not a ``Transformer`` while ``pooler`` is set.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Transformer

    check_pooler(pooler)
    folder = checkpoint_folder(source)
    if is_sentence_transformer(folder):
        st = SentenceTransformer(str(folder), device=device)
        if pooler is None:
            logger.info("loaded %s as saved (%s)", folder, " -> ".join(type(m).__name__ for m in st))
            return st.float()
        transformer = st[0]
        if not isinstance(transformer, Transformer):
            raise ValueError(
                f"{folder}: the first module is {type(transformer).__name__}, not a Transformer, so it cannot be "
                f"pooled with {pooler}; expected a SentenceTransformer folder starting with a Transformer, or no pooler"
            )
    else:
        pooler = pooler or PLAIN_ENCODER_POOLER
        transformer = Transformer(str(folder) if folder.exists() else source)
    config = transformer.auto_model.config
    if pooler == "avg_first_last":
        config.output_hidden_states = True  # the Transformer module then outputs all_layer_embeddings
    modules = [transformer, *pooling_modules(pooler, config.hidden_size, config.num_hidden_layers)]
    logger.info("loaded %s: Transformer pooled %s", folder, pooler)
    return SentenceTransformer(modules=modules, device=device).float()
