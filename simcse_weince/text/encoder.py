"""Fast frozen text encoding: each unique sentence once, batched by length, no gradient.

Both classes implement the evaluators' :class:`~simcse_weince.evaluation.encoder.Encoder` interface: one
wraps a :class:`~simcse_weince.text.model.SimCSEModel` (with its tokenizer), the other a
``SentenceTransformer``; :func:`load_text_encoder` picks the right one for a checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from simcse_weince.core.file_errors import reading
from simcse_weince.evaluation.encoder import autocast_context, unique_in_order
from simcse_weince.text.checkpoint import (
    DAMAGED_MODEL,
    UnsupportedSentenceTransformer,
    checkpoint_folder,
    is_sentence_transformer,
    load_text_checkpoint,
)
from simcse_weince.text.model import inference_max_length

logger = logging.getLogger(__name__)


class _UniqueSentenceEncoder:
    """The frame both encoders share: settings checked once, each unique sentence encoded once without gradient
    (:meth:`_encode_unique`), the vectors returned in the input order as a float32 (N, D) array."""

    def __init__(self, device: str | torch.device, batch_size: int, show_progress_bar: bool, precision: str) -> None:
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar
        self.precision = precision
        autocast_context(device, precision)  # validates

    @torch.no_grad()
    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        uniq, inverse = unique_in_order(sentences)
        return self._encode_unique(uniq)[inverse]

    def _encode_unique(self, sentences: list[str]) -> np.ndarray:
        """(U, D) float32 vectors of ``sentences``, all different, in their order."""
        raise NotImplementedError


class SimCSEEncoder(_UniqueSentenceEncoder):
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
        precision: str = "fp32",
        normalize: bool = False,
    ) -> None:
        """``max_length`` defaults to :func:`inference_max_length`; ``precision`` ``bf16``/``fp16`` runs the
        encoder under autocast (faster on GPUs and on CPUs with bf16 units; vectors differ in the 3rd digit);
        ``normalize`` L2-normalises the output (as a SentenceTransformer ``Normalize`` module does)."""
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length if max_length is not None else inference_max_length(tokenizer, model.config)
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.normalize = normalize
        super().__init__(self.device, batch_size, show_progress_bar, precision)

    def _encode_unique(self, sentences: list[str]) -> np.ndarray:
        enc = self.tokenizer(sentences, truncation=True, max_length=self.max_length, padding=False)
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
                with autocast_context(self.device, self.precision):
                    emb = self.model.encode(**batch).float()
                if self.normalize:
                    emb = torch.nn.functional.normalize(emb, dim=-1)
                emb = emb.cpu().numpy()
                if out is None:
                    out = np.empty((len(sentences), emb.shape[1]), dtype=np.float32)
                out[idx] = emb
        finally:
            self.model.train(was_training)
        return np.zeros((0, 0), dtype=np.float32) if out is None else out  # out is None: no sentences


class SentenceTransformerEncoder(_UniqueSentenceEncoder):
    """Encode with a ``SentenceTransformer`` (its own pooling and normalisation), unique sentences once."""

    def __init__(self, model, batch_size: int = 128, show_progress_bar: bool = False, precision: str = "fp32") -> None:
        self.model = model
        super().__init__(model.device, batch_size, show_progress_bar, precision)

    def _encode_unique(self, sentences: list[str]) -> np.ndarray:
        with autocast_context(self.model.device, self.precision):
            emb = self.model.encode(
                sentences, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=self.show_progress_bar
            )
        return np.asarray(emb, dtype=np.float32)


def load_text_encoder(
    name_or_path: str,
    pooler: str | None = None,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str | None = None,
    show_progress_bar: bool = False,
    precision: str = "fp32",
) -> SimCSEEncoder | SentenceTransformerEncoder:
    """An encoder for any text checkpoint (see :func:`~simcse_weince.text.checkpoint.load_text_checkpoint`).

    Folders a :class:`SimCSEModel` reproduces go through :class:`SimCSEEncoder` (the same vectors as
    ``SentenceTransformer(path)``, without its per-batch overhead); other SentenceTransformer folders are
    encoded by sentence-transformers itself.
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        ckpt = load_text_checkpoint(name_or_path, pooler)
    except UnsupportedSentenceTransformer as why:
        from sentence_transformers import SentenceTransformer

        path = checkpoint_folder(name_or_path)
        logger.info("loading %s with sentence-transformers (%s)", path, why)
        with reading(path, "the model", DAMAGED_MODEL):
            model = SentenceTransformer(str(path), device=device).float()  # fp32 however it was stored
        return SentenceTransformerEncoder(model, batch_size, show_progress_bar, precision)
    source = "SentenceTransformer folder" if is_sentence_transformer(checkpoint_folder(name_or_path)) else "encoder"
    logger.info("loaded %s (%s: %s)", name_or_path, source, ckpt.description)
    return SimCSEEncoder(
        ckpt.model.to(device),
        ckpt.tokenizer,
        batch_size,
        max_length or ckpt.max_length,
        device,
        show_progress_bar,
        precision,
        ckpt.normalize,
    )
