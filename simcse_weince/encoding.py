"""Fast frozen encoding: each unique sentence once, batched by length, no gradient.

:class:`Encoder` is the one interface the evaluators use: ``encode(sentences) -> (N, D) float32 array``.
Implementations wrap a :class:`~simcse_weince.modeling.SimCSEModel` (with its tokenizer) or a
``SentenceTransformer``; :func:`load_encoder_from_path` picks the right one for a checkpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)


class Encoder(Protocol):
    def encode(self, sentences: Sequence[str]) -> np.ndarray: ...


def unique_in_order(sentences: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Unique sentences and, for each input, the index of its unique copy."""
    index: dict[str, int] = {}
    inverse = np.empty(len(sentences), dtype=np.int64)
    for i, s in enumerate(sentences):
        inverse[i] = index.setdefault(s, len(index))
    return list(index), inverse


def inference_max_length(tokenizer, config) -> int:
    """Longest input at inference: the tokenizer's and the position table's limit, at most 512 tokens.

    Training truncates to ``max_seq_length`` (32 in the recipe), but evaluation, like SimCSE's, encodes whole
    sentences; the exported SentenceTransformer uses the same limit so that both give the same vectors.
    """
    limits = [512, getattr(tokenizer, "model_max_length", 512), getattr(config, "max_position_embeddings", 512)]
    return int(min(limits))


class SimCSEEncoder:
    """Encode with a :class:`SimCSEModel` (inference pooler), a tokenizer and dynamic padding.

    Sentences are deduplicated, tokenised once, sorted by token length and encoded in batches of
    ``batch_size`` so that padding is minimal; the result comes back in the input order.
    """

    def __init__(
        self,
        model,
        tokenizer,
        batch_size: int = 128,
        max_length: int | None = None,
        device: str | torch.device | None = None,
        show_progress_bar: bool = False,
    ) -> None:
        """``max_length`` defaults to :func:`inference_max_length`."""
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length if max_length is not None else inference_max_length(tokenizer, model.config)
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.show_progress_bar = show_progress_bar

    @torch.no_grad()
    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        uniq, inverse = unique_in_order(sentences)
        enc = self.tokenizer(uniq, truncation=True, max_length=self.max_length, padding=False)
        ids = enc["input_ids"]
        order = np.argsort([len(x) for x in ids], kind="stable")
        was_training = self.model.training
        self.model.eval()
        out: np.ndarray | None = None
        try:
            starts = range(0, len(order), self.batch_size)
            for start in tqdm(starts, desc="encoding", disable=not self.show_progress_bar, leave=False):
                idx = order[start : start + self.batch_size]
                feats = {k: [enc[k][i] for i in idx] for k in enc}
                batch = self.tokenizer.pad(feats, return_tensors="pt")
                batch = {k: v.to(self.device) for k, v in batch.items()}
                emb = self.model.encode(**batch).float().cpu().numpy()
                if out is None:
                    out = np.empty((len(uniq), emb.shape[1]), dtype=np.float32)
                out[idx] = emb
        finally:
            self.model.train(was_training)
        if out is None:
            return np.zeros((len(sentences), 0), dtype=np.float32)
        return out[inverse]


class SentenceTransformerEncoder:
    """Encode with a ``SentenceTransformer`` (its own pooling and normalisation), unique sentences once."""

    def __init__(self, model, batch_size: int = 128, show_progress_bar: bool = False) -> None:
        self.model = model
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        uniq, inverse = unique_in_order(sentences)
        emb = self.model.encode(
            uniq, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=self.show_progress_bar
        )
        return np.asarray(emb, dtype=np.float32)[inverse]


def load_encoder_from_path(
    name_or_path: str,
    pooler: str | None = None,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str | None = None,
    show_progress_bar: bool = False,
) -> Encoder:
    """An :class:`Encoder` for any checkpoint.

    * a SimCSE training output folder (its exported ``model/`` subfolder is used);
    * a ``SentenceTransformer`` folder (``modules.json``): loaded with ``SentenceTransformer`` unless
      ``pooler`` asks for a different pooling of its transformer;
    * any other Hugging Face encoder (folder or Hub name): ``AutoModel`` with ``pooler`` (default
      ``cls_before_pooler``, the unsupervised SimCSE inference pooler).
    """
    from transformers import AutoTokenizer

    from simcse_weince.modeling import SimCSEModel, load_encoder

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    path = Path(name_or_path)
    if (path / "model" / "modules.json").is_file():  # a SimCSE training output folder
        path = path / "model"
    if (path / "modules.json").is_file() and pooler is None:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(path), device=device)
        logger.info("loaded %s as a SentenceTransformer (%s)", path, _describe_modules(path))
        return SentenceTransformerEncoder(model, batch_size, show_progress_bar)
    pooler = pooler or "cls_before_pooler"
    if pooler == "cls":
        raise ValueError(
            "pooler 'cls' needs the trained SimCSE MLP, which a plain encoder checkpoint does not hold; "
            "use cls_before_pooler, avg or avg_first_last"
        )
    encoder = load_encoder(str(path) if path.exists() else name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(str(path) if path.exists() else name_or_path)
    model = SimCSEModel(encoder, pooler=pooler, mlp_only_train=True).to(device)
    logger.info("loaded %s with AutoModel and pooler %s", name_or_path, pooler)
    return SimCSEEncoder(model, tokenizer, batch_size, max_length, device, show_progress_bar)


def _describe_modules(path: Path) -> str:
    try:
        mods = json.loads((path / "modules.json").read_text())
        return " -> ".join(m["type"].rsplit(".", 1)[-1] for m in mods)
    except (OSError, ValueError, KeyError):
        return "unknown modules"
