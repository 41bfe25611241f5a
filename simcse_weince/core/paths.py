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
    guess = Path(__file__).resolve().parents[3] / "shared" / "data"
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


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as messages show it: a relative path with what it resolved to, since it is read against the
    working directory (not the config file's folder), which the relative path alone does not say."""
    if os.path.isabs(path):
        return str(path)
    return f"{path} (a relative path, resolved against the working directory: {os.path.abspath(path)})"
