"""The text side of the geometry report: STS-B sentences and gold paraphrase pairs, and the alignment /
uniformity of an encoder on them (Wang & Isola, 2020)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from simcse_weince.diagnostics.geometry import alignment, uniformity


def stsb_sentences_and_pairs(data_dir: Path | None) -> tuple[list[str], list[tuple[str, str]]]:
    """The unique STS-B dev + test sentences, and the pairs with gold score >= 4 (paraphrases)."""
    from simcse_weince.evaluation.sts_data import load_sts_task

    pairs, sentences = [], []
    for split in ("dev", "test"):
        sub = load_sts_task("STSBenchmark", data_dir, split).subsets[0]
        sentences += sub.sentences1 + sub.sentences2
        pairs += [(a, b) for a, b, s in zip(sub.sentences1, sub.sentences2, sub.scores, strict=True) if s >= 4.0]
    return list(dict.fromkeys(sentences)), pairs


def text_geometry(model, tokenizer, sentences, pairs, seed: int) -> dict[str, float]:
    """Uniformity of up to 2,000 sentences (seeded draw) and alignment of the pairs, in the model's space."""
    from simcse_weince.text.encoder import SimCSEEncoder

    enc = SimCSEEncoder(model, tokenizer)
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(sentences), min(2000, len(sentences)), replace=False)
    out = {
        "uniformity": uniformity(torch.from_numpy(enc.encode([sentences[i] for i in pick]))),
        "uniformity_sentences": len(pick),
    }
    if pairs:
        a = torch.from_numpy(enc.encode([p[0] for p in pairs]))
        b = torch.from_numpy(enc.encode([p[1] for p in pairs]))
        out.update(alignment=alignment(a, b), alignment_pairs=len(pairs), alignment_positives="STS-B pairs, gold >= 4")
    return out
