"""What the benchmark scripts share: the repository, the environment of their child processes, the real
training text they read, and the BERT shape they build (random weights, nothing downloaded)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import BertConfig

REPO = Path(__file__).resolve().parents[1]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a measured child process: the repository first on ``PYTHONPATH``, the
    caller's entries kept after it (packages installed outside site-packages stay importable)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def wiki_sample() -> Path:
    """The real Wikipedia sample: under ``$SIMCSE_WEINCE_DATA`` when set, else ``../shared/data``."""
    from simcse_weince.core.paths import data_root

    root = data_root() or REPO.parent / "shared" / "data"
    return root / "wiki1m_sample" / "wiki1m_for_simcse.head1280000bytes.txt"


def bert_config(layers: int, hidden: int, length: int = 512) -> BertConfig:
    """A BERT of ``layers`` × ``hidden`` (BERT-base's proportions: 64-wide heads, 4× feed-forward)."""
    from transformers import BertConfig

    return BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        max_position_embeddings=max(512, length),
    )


def write_bert(folder: Path, layers: int, hidden: int) -> Path:
    """A BERT of ``layers`` × ``hidden`` with seeded random weights and all-MiniLM-L6-v2's (bert-base-uncased's)
    tokenizer, saved to ``folder``: a model both this project and sentence-transformers load, nothing downloaded."""
    import torch
    from transformers import AutoTokenizer, BertModel

    from simcse_weince.core.model_sources import OFFLINE_MINILM, resolve_model_path

    torch.manual_seed(0)
    BertModel(bert_config(layers, hidden)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(resolve_model_path(OFFLINE_MINILM)).save_pretrained(folder)
    return folder
