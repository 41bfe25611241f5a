"""Collect similarity scores from a frozen encoder in the loss's layout and in the loss's space.

Text: two dropout views of each sentence (the model in train mode, no gradient) — the unsupervised SimCSE
positives — through the model's training path (its head, when the saved model has one), scored in the
SimCSE B×B layout. Vision: two SimCLR augmentations of each image through backbone + projection head (the
loss's space), scored in the NT-Xent 2N layout. Each batch yields a :class:`ScoreBatch` (scores, winner =
positive column, excluded entries) and the embeddings themselves for the per-anchor statistics.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from simcse_weince.diagnostics.link import ScoreBatch
from simcse_weince.losses.layout import score_matrix


@dataclass
class EmbeddedBatch:
    anchors: torch.Tensor
    positives: torch.Tensor
    layout: str

    def score_batch(self) -> ScoreBatch:
        lay = score_matrix(self.anchors, self.positives, self.layout)
        return ScoreBatch(lay.scores.detach(), lay.positive_index, lay.self_mask)


def negative_scores(batch: ScoreBatch) -> np.ndarray:
    """All negative scores of a batch (positives and excluded entries removed)."""
    keep = torch.ones_like(batch.scores, dtype=torch.bool)
    keep.scatter_(1, batch.winner[:, None], False)
    if batch.excluded is not None:
        keep &= ~batch.excluded
    return batch.scores[keep].double().cpu().numpy()


def positive_ranks(batch: ScoreBatch) -> np.ndarray:
    """Rank of each anchor's positive among its candidates (1 = the positive scores highest)."""
    s = batch.scores.clone()
    if batch.excluded is not None:
        s = s.masked_fill(batch.excluded, float("-inf"))
    pos = s.gather(1, batch.winner[:, None])
    return ((s > pos).sum(dim=1) + 1).cpu().numpy()


@torch.no_grad()
def text_batches(
    model,
    tokenizer,
    sentences: Sequence[str],
    batch_size: int,
    num_batches: int,
    seed: int = 0,
    max_length: int = 32,
    show_progress_bar: bool = True,
) -> Iterator[EmbeddedBatch]:
    """Shuffled batches of ``batch_size`` sentences, each encoded twice with dropout in one forward."""
    order = np.random.default_rng(seed).permutation(len(sentences))
    n = min(num_batches, len(order) // batch_size)
    if n < 1:
        raise ValueError(f"{len(sentences)} sentences are fewer than one batch of {batch_size}")
    model.train()  # dropout on: the two views
    torch.manual_seed(seed)
    for i in tqdm(range(n), desc="scoring text batches", disable=not show_progress_bar):
        idx = order[i * batch_size : (i + 1) * batch_size]
        enc = tokenizer(
            [sentences[j] for j in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
        yield EmbeddedBatch(out["anchors"].float(), out["positives"].float(), "simcse")
    model.eval()


@torch.no_grad()
def text_pair_batches(
    model,
    tokenizer,
    pairs: Sequence[tuple[str, str]],
    batch_size: int,
    num_batches: int,
    seed: int = 0,
    show_progress_bar: bool = True,
) -> Iterator[EmbeddedBatch]:
    """Batches of real paraphrase pairs (anchor = first sentence, positive = second), frozen encoder (eval
    mode, inference pooler), SimCSE layout: the other pairs' second sentences are the negatives."""
    from simcse_weince.text.encoder import SimCSEEncoder

    order = np.random.default_rng(seed).permutation(len(pairs))
    n = min(num_batches, len(order) // batch_size)
    if n < 1:
        raise ValueError(f"{len(pairs)} pairs are fewer than one batch of {batch_size}")
    enc = SimCSEEncoder(model, tokenizer)
    for i in tqdm(range(n), desc="scoring pair batches", disable=not show_progress_bar):
        idx = order[i * batch_size : (i + 1) * batch_size]
        a = torch.from_numpy(enc.encode([pairs[j][0] for j in idx]))
        p = torch.from_numpy(enc.encode([pairs[j][1] for j in idx]))
        yield EmbeddedBatch(a, p, "simcse")


@torch.no_grad()
def vision_batches(
    model, dataset, batch_size: int, num_batches: int, seed: int = 0, show_progress_bar: bool = True
) -> Iterator[EmbeddedBatch]:
    """Batches of two augmented views (``dataset`` yields (2, C, H, W)), embedded by backbone + head."""
    from torch.utils.data import DataLoader

    from simcse_weince.vision.data import collate

    model.eval()  # frozen: BatchNorm running statistics
    g = torch.Generator().manual_seed(seed)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=g, drop_last=True, collate_fn=collate)
    if len(loader) < 1:
        raise ValueError(f"{len(dataset)} images are fewer than one batch of {batch_size}")
    for i, batch in enumerate(
        tqdm(loader, desc="scoring image batches", total=min(num_batches, len(loader)), disable=not show_progress_bar)
    ):
        if i >= num_batches:
            break
        out = model(batch["pixel_values"])
        yield EmbeddedBatch(out["anchors"].float(), out["positives"].float(), "ntxent")
