"""The one loader of text checkpoints: a :class:`SimCSEModel` and its tokenizer from any saved encoder.

Used by evaluation (``load_text_encoder``) and by the diagnostics, so both see the same vectors as
``SentenceTransformer(path)``. Accepted:

* a SimCSE training output folder (its exported ``model/`` subfolder is used);
* a ``SentenceTransformer`` folder whose modules a :class:`SimCSEModel` reproduces exactly — the folders
  this project exports: ``Transformer`` → [``WeightedLayerPooling`` (first + last layer)] → ``Pooling`` (cls |
  mean) → [``Dense`` + tanh after cls: the SimCSE MLP] → [``Normalize``];
* any other Hugging Face encoder (folder or Hub name) with a chosen pooler (default ``cls_before_pooler``,
  the unsupervised SimCSE inference pooler).

A SentenceTransformer folder with other modules (or that lowercases the text itself) is reported by
:class:`UnsupportedSentenceTransformer`; evaluation then encodes it with sentence-transformers itself.
"""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from simcse_weince.core.digests import folder_damage
from simcse_weince.core.file_errors import FileFault, reading
from simcse_weince.text.model import SimCSEModel, load_hf_encoder
from simcse_weince.text.poolers import validate_pooler

logger = logging.getLogger(__name__)


class UnsupportedSentenceTransformer(ValueError):
    """A SentenceTransformer folder whose modules a :class:`SimCSEModel` does not reproduce."""


@dataclass
class TextCheckpoint:
    """A loaded text encoder: the model (inference pooler as saved), tokenizer and encoding settings."""

    model: SimCSEModel
    tokenizer: Any
    max_length: int | None  # the saved max_seq_length (None: the model's own limit)
    normalize: bool  # the folder L2-normalises its output
    description: str


def checkpoint_folder(name_or_path: str) -> Path:
    """The folder to load: ``<run>/model`` for a SimCSE training output folder, else the path itself."""
    path = Path(name_or_path)
    return path / "model" if (path / "model" / "modules.json").is_file() else path


def is_sentence_transformer(path: Path) -> bool:
    return (path / "modules.json").is_file()


def inference_settings(path: str | Path) -> tuple[bool, int | None]:
    """(normalize, max_seq_length) of a SentenceTransformer folder, read from its JSON files (nothing
    loaded): whether its last module is ``Normalize``, and its saved length limit (``None`` if it has none
    or the folder is not a SentenceTransformer)."""
    path = Path(path)
    try:
        mods = json.loads((path / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, None
    normalize = bool(mods) and str(mods[-1].get("type", "")).endswith("Normalize")
    max_len = None
    # sentence-transformers keeps the limit in sentence_bert_config.json, or (6.x exports) in the tokenizer's
    # model_max_length
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        try:
            value = json.loads((path / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError):
            continue
        if isinstance(value, int) and 0 < value < 1_000_000:  # tokenizers without a limit store ~1e30
            max_len = value
            break
    return normalize, max_len


def load_text_checkpoint(name_or_path: str, pooler: str | None = None) -> TextCheckpoint:
    """Load a text encoder as a :class:`SimCSEModel` (on the CPU).

    Args:
        name_or_path: a training output folder, a SentenceTransformer folder, a HF encoder folder or Hub name.
        pooler: override the pooling of the transformer (``cls`` is refused: no saved MLP to use). ``None``
            keeps a SentenceTransformer folder's own modules, or ``cls_before_pooler`` for a plain encoder.

    Raises:
        UnsupportedSentenceTransformer: ``pooler`` is None and the folder's modules are not reproducible.
        ValueError: ``pooler`` is ``cls`` or not a pooler name.
    """
    path = checkpoint_folder(name_or_path)
    verify_model_folder(path)
    if pooler is not None:
        validate_pooler(pooler)
        if pooler == "cls":
            raise ValueError(
                "pooler 'cls' needs the trained SimCSE MLP, which a plain encoder checkpoint does not hold; "
                "use cls_before_pooler, avg or avg_first_last"
            )
    if is_sentence_transformer(path):
        with reading(path, "the model", DAMAGED_MODEL, passing=(UnsupportedSentenceTransformer,)):
            return _from_sentence_transformer(path, pooler)
    src = str(path) if path.exists() else name_or_path
    from transformers import AutoTokenizer

    pooler = pooler or "cls_before_pooler"
    with reading(src, "the model", DAMAGED_MODEL) if path.exists() else nullcontext():
        model = SimCSEModel(load_hf_encoder(src), pooler=pooler, mlp_only_train=True)
        tokenizer = AutoTokenizer.from_pretrained(src)
    return TextCheckpoint(model, tokenizer, None, False, f"AutoModel, pooler {pooler}")


DAMAGED_MODEL = (
    "expected a complete model folder: export it again (its training run, resumed with --resume_from_checkpoint "
    "last) or copy it again"
)


def verify_model_folder(path: Path) -> None:
    """Check a model folder against the digests its export recorded (``run_record.json``), when it holds them.

    Raises:
        FileFault: a file is missing, truncated or changed since the export, naming it.
    """
    damaged = folder_damage(path) if path.is_dir() else None
    if damaged:
        raise FileFault(f"model {path} is damaged ({'; '.join(damaged)}); {DAMAGED_MODEL}")


def _from_sentence_transformer(path: Path, pooler: str | None) -> TextCheckpoint:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(path), device="cpu")
    mods = list(st)
    kinds = [type(m).__name__ for m in mods]
    description = " -> ".join(kinds)
    transformer = mods[0]
    if kinds[0] != "Transformer":
        raise UnsupportedSentenceTransformer(f"{path}: first module is {kinds[0]}, not a Transformer")
    encoder, tokenizer = transformer.auto_model.float(), transformer.tokenizer  # fp32 however it was stored
    max_length = st.max_seq_length
    if pooler is not None:  # the user's pooling of the transformer, the folder's other modules ignored
        model = SimCSEModel(encoder, pooler=pooler, mlp_only_train=True)
        return TextCheckpoint(model, tokenizer, max_length, False, f"{description}, transformer pooled {pooler}")
    if getattr(transformer, "do_lower_case", False):
        raise UnsupportedSentenceTransformer(f"{path}: the Transformer module lowercases the text itself")
    pooler, mlp, normalize = _match_modules(mods[1:], kinds[1:], encoder.config.num_hidden_layers)
    model = SimCSEModel(encoder, pooler=pooler, mlp_only_train=mlp is None)
    if mlp is not None:
        model.mlp[0].load_state_dict(mlp.state_dict())
    return TextCheckpoint(model, tokenizer, max_length, normalize, description)


def _match_modules(mods: list, kinds: list[str], layers: int) -> tuple[str, torch.nn.Linear | None, bool]:
    """(pooler, MLP linear or None, normalize) for the modules after the Transformer, or raise."""
    normalize = bool(kinds) and kinds[-1] == "Normalize"
    if normalize:
        mods, kinds = mods[:-1], kinds[:-1]
    first_last = bool(kinds) and kinds[0] == "WeightedLayerPooling"
    if first_last:
        if not _is_first_last(mods[0], layers):
            raise UnsupportedSentenceTransformer("WeightedLayerPooling other than first + last layer")
        mods, kinds = mods[1:], kinds[1:]
    if not kinds or kinds[0] != "Pooling":
        raise UnsupportedSentenceTransformer(f"modules {kinds}: expected a Pooling module after the Transformer")
    pooling = mods[0]
    mode = pooling.pooling_mode
    mode = mode[0] if isinstance(mode, list | tuple) and len(mode) == 1 else mode
    if mode not in ("cls", "mean") or getattr(pooling, "include_prompt", True) is False:
        raise UnsupportedSentenceTransformer(f"Pooling mode {mode!r} (expected cls or mean, prompts included)")
    rest = kinds[1:]
    mlp = None
    if rest == ["Dense"] and mode == "cls" and not first_last:
        dense = mods[1]
        square = dense.linear.in_features == dense.linear.out_features
        if not isinstance(dense.activation_function, torch.nn.Tanh) or not square:
            raise UnsupportedSentenceTransformer("a Dense module other than the SimCSE MLP (square, tanh)")
        mlp = dense.linear
    elif rest:
        raise UnsupportedSentenceTransformer(f"unexpected modules after Pooling: {rest}")
    if first_last:
        if mode != "mean":
            raise UnsupportedSentenceTransformer("WeightedLayerPooling followed by a non-mean Pooling")
        return "avg_first_last", None, normalize
    pooler = "avg" if mode == "mean" else ("cls" if mlp is not None else "cls_before_pooler")
    return pooler, mlp, normalize


def _is_first_last(module, layers: int) -> bool:
    weights = module.layer_weights.detach().float()
    expected = torch.zeros(layers)
    expected[0] = expected[-1] = 1.0
    return module.layer_start == 1 and weights.shape == expected.shape and torch.equal(weights, expected)
