"""How many tokens a text encoder can take: the size of its position table, read from its config (no weights
loaded), so that a length setting above it is refused before any text is tokenised."""

from __future__ import annotations

from typing import Any

from simcse_weince.training.config import ConfigError

MIN_SEQ_LENGTH = 3  # [CLS], one token, [SEP]: shorter limits leave no sentence to encode

# Architectures whose position ids start after the padding index (``padding_idx + 1``, as fairseq's RoBERTa):
# their table of ``max_position_embeddings`` rows holds ``pad_token_id + 1`` fewer tokens (514 rows: 512 tokens).
OFFSET_POSITIONS = frozenset(
    {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "longformer", "data2vec-text", "xmod"}
)


def position_limit(config: Any) -> int | None:
    """The longest input (in tokens) of the model ``config`` describes: its ``max_position_embeddings``, less
    the padding offset of :data:`OFFSET_POSITIONS`; ``None`` when the config has no absolute position table
    (e.g. DeBERTa's relative positions, ``position_biased_input: false``)."""
    rows = getattr(config, "max_position_embeddings", None)
    if not isinstance(rows, int) or isinstance(rows, bool) or rows <= 0:
        return None
    if getattr(config, "position_biased_input", True) is False:
        return None
    if getattr(config, "model_type", None) in OFFSET_POSITIONS:
        rows -= (getattr(config, "pad_token_id", None) or 0) + 1
    return rows


def model_position_limit(name_or_path: str, overrides: dict | None = None) -> int | None:
    """:func:`position_limit` of the model's config (``AutoConfig``, with ``overrides`` applied as the loader
    applies them); ``None`` when the config cannot be read here (the model's loader then says why)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(name_or_path, **(overrides or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return position_limit(config)


def check_length_fits(where: str, length: int | None, model: str, limit: int | None) -> None:
    """Refuse a length setting longer than the model's position table.

    Args:
        where: the setting's source and value, e.g. ``command line: --max_seq_length 100000``.
        length: the setting's value (``None``: the model's own limit, nothing to check).
        model: the model's name, as the user gave it.
        limit: :func:`position_limit` (``None``: unknown, nothing to check).

    Raises:
        ConfigError: ``<where>: the model <model> has 512 positions; expected at most 512``.
    """
    if length is not None and limit is not None and length > limit:
        raise ConfigError(f"{where}: the model {model} has {limit} positions; expected at most {limit}")
