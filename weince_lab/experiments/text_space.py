"""The shape of a text encoder's sentence space: anisotropy (the mean cosine of random sentence pairs) and
``simcse-diagnose``'s tail index ξ̂ and link (a, b). Used on the MLM start (:mod:`weince_lab.experiments.pretrain_mlm`)
and on
each final model of an A/B (:mod:`weince_lab.experiments.text_runs` ``--diagnose``), issue 44."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def random_pairs(n: int, pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``pairs`` random index pairs ``(i, j)`` of distinct items among ``n``, seeded.

    Returns:
        ``i`` and ``j``, each of shape ``(pairs,)``, with ``i != j`` everywhere.
    """
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, pairs)
    j = (i + rng.integers(1, n, pairs)) % n  # j != i
    return i, j


def mean_pair_cosine(emb: np.ndarray, i: np.ndarray, j: np.ndarray) -> float:
    """The mean cosine of the rows ``emb[i]`` and ``emb[j]``.

    Args:
        emb: embeddings, shape ``(N, D)`` (normalised here; a zero row counts as cosine 0).
        i: row indices, shape ``(P,)``.
        j: row indices, shape ``(P,)``.
    """
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True).clip(min=1e-12)  # (N, D)
    return float(np.mean(np.sum(emb[i] * emb[j], axis=1)))


def anisotropy(model_dir: str, pooler: str | None, sentences: list[str], pairs: int = 2000, seed: int = 0) -> float:
    """The mean cosine of ``pairs`` random pairs of distinct sentences (Ethayarajh, 2019; SimCSE §5) in the
    encoder's ``pooler`` space: near 1 for an anisotropic space, near 0 for an isotropic one."""
    from simcse_weince.text.checkpoint import load_text_checkpoint
    from simcse_weince.text.encoder import SimCSEEncoder

    ckpt = load_text_checkpoint(model_dir, pooler)
    i, j = random_pairs(len(sentences), pairs, seed)
    emb = SimCSEEncoder(ckpt.model, ckpt.tokenizer).encode(sentences)
    return mean_pair_cosine(emb, i, j)


def space_diagnostics(
    model_dir: str,
    out: Path,
    pooler: str | None,
    sentences: list[str],
    batches: int = 8,
    batch_size: int = 64,
    bootstrap: int = 50,
) -> dict:
    """Anisotropy (:func:`anisotropy`) and ``simcse-diagnose``'s tail index ξ̂ and link (a, b) of one space of
    the model (``pooler``; ``None``: the model's own inference pooler), the diagnosis written under ``out``."""
    from simcse_weince.cli import diagnose

    argv = [
        "--model",
        model_dir,
        "--out",
        str(out),
        "--batch_size",
        str(batch_size),
        "--num_batches",
        str(batches),
        "--bootstrap",
        str(bootstrap),
    ]
    diag = diagnose.run(argv + (["--pooler", pooler] if pooler else []))
    pot, link = diag["pot"], diag["link"]
    return {
        "anisotropy": anisotropy(model_dir, pooler, sentences),
        "xi": pot["xi"],
        "xi_ci": pot["xi_ci"],
        "a": link["a"],
        "a_ci": link["a_ci"],
        "b": link["b"],
        "b_ci": link["b_ci"],
        "link_identifiable": link.get("identifiable", True),
        "positive_top1": diag["positive_rank"]["top1"],
        "uniformity": diag["geometry"].get("uniformity"),
    }
