"""Fast frozen encoding: each unique sentence once, batched by length, no gradient.

:class:`Encoder` is the one interface the evaluators use: ``encode(sentences) -> (N, D) float32 array``.
Implementations wrap a :class:`~simcse_weince.modeling.SimCSEModel` (with its tokenizer) or a
``SentenceTransformer``; :func:`load_encoder_from_path` picks the right one for a checkpoint.
"""

from __future__ import annotations

import contextlib
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


PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_context(device: torch.device | str, precision: str):
    """``torch.autocast`` for ``bf16``/``fp16`` inference, a no-op for ``fp32`` (the exact default)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    dtype = PRECISIONS[precision]
    device_type = torch.device(device).type
    return contextlib.nullcontext() if dtype is None else torch.autocast(device_type, dtype=dtype)


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
        precision: str = "fp32",
        normalize: bool = False,
    ) -> None:
        """``max_length`` defaults to :func:`inference_max_length`; ``precision`` ``bf16``/``fp16`` runs the
        encoder under autocast (faster on GPUs and on CPUs with bf16 units; vectors differ in the 3rd digit);
        ``normalize`` L2-normalises the output (as a SentenceTransformer ``Normalize`` module does)."""
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length if max_length is not None else inference_max_length(tokenizer, model.config)
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.show_progress_bar = show_progress_bar
        self.precision = precision
        self.normalize = normalize
        autocast_context(self.device, precision)  # validates

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
                with autocast_context(self.device, self.precision):
                    emb = self.model.encode(**batch).float()
                if self.normalize:
                    emb = torch.nn.functional.normalize(emb, dim=-1)
                emb = emb.cpu().numpy()
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

    def __init__(self, model, batch_size: int = 128, show_progress_bar: bool = False, precision: str = "fp32") -> None:
        self.model = model
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar
        self.precision = precision
        autocast_context(model.device, precision)  # validates

    @torch.no_grad()
    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        uniq, inverse = unique_in_order(sentences)
        with autocast_context(self.model.device, self.precision):
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
    precision: str = "fp32",
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
    plain = plain_sentence_transformer(path) if pooler is None else None
    if plain is not None:
        # Transformer + Pooling(cls | mean) [+ Normalize]: the same vectors through the project's own encoder,
        # which skips sentence-transformers' per-batch overhead (about 1.2x faster on CPU).
        st_pooler, normalize, st_max = plain
        model = SimCSEModel(load_encoder(str(path)), pooler=st_pooler).to(device)
        tok = AutoTokenizer.from_pretrained(str(path))
        logger.info("loaded %s (%s) through the plain-encoder path", path, _describe_modules(path))
        return SimCSEEncoder(model, tok, batch_size, max_length or st_max, device, show_progress_bar, precision,
                             normalize)  # fmt: skip
    if (path / "modules.json").is_file() and pooler is None:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(path), device=device)
        logger.info("loaded %s as a SentenceTransformer (%s)", path, _describe_modules(path))
        return SentenceTransformerEncoder(model, batch_size, show_progress_bar, precision)
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
    return SimCSEEncoder(model, tokenizer, batch_size, max_length, device, show_progress_bar, precision)


def plain_sentence_transformer(path: Path) -> tuple[str, bool, int | None] | None:
    """(pooler, normalize, max_seq_length) if ``path`` is a SentenceTransformer folder made of a Transformer,
    a CLS or mean Pooling and optionally Normalize — nothing else — else ``None``."""
    try:
        mods = json.loads((path / "modules.json").read_text())
    except (OSError, ValueError):
        return None
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in mods]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) or mods[0].get("path"):
        return None
    try:
        pool_cfg = json.loads((path / mods[1]["path"] / "config.json").read_text())
    except (OSError, ValueError, KeyError):
        return None
    mode = pool_cfg.get("pooling_mode")
    if mode is None:  # the older boolean keys: exactly one of them may be on
        enabled = [k for k, v in pool_cfg.items() if k.startswith("pooling_mode_") and v is True]
        legacy = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean"}
        mode = legacy.get(enabled[0]) if len(enabled) == 1 else None
    if mode not in ("cls", "mean") or pool_cfg.get("include_prompt") is False:
        return None
    try:
        st_cfg = json.loads((path / "sentence_bert_config.json").read_text())
    except (OSError, ValueError):
        st_cfg = {}
    if st_cfg.get("do_lower_case"):  # sentence-transformers lowercases the text itself: leave it to it
        return None
    max_len = st_cfg.get("max_seq_length")
    return ("cls_before_pooler" if mode == "cls" else "avg"), kinds[-1] == "Normalize", max_len


def _describe_modules(path: Path) -> str:
    try:
        mods = json.loads((path / "modules.json").read_text())
        return " -> ".join(m["type"].rsplit(".", 1)[-1] for m in mods)
    except (OSError, ValueError, KeyError):
        return "unknown modules"
