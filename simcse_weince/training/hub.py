"""Upload a finished model folder to the Hugging Face Hub."""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)


class HubPushError(RuntimeError):
    """The upload failed; the local folder is untouched and complete."""


def push_folder(folder: str | Path, repo_id: str, private: bool = False, token: str | None = None) -> str:
    """Create ``repo_id`` if needed and upload exactly ``folder`` to it; returns the commit URL.

    Raises:
        ValueError: no ``repo_id``.
        HubPushError: the Hub could not be reached or refused the upload (message says how to retry).
    """
    from huggingface_hub import HfApi

    folder = Path(folder)
    if not repo_id:
        raise ValueError("pushing to the Hub needs --hub_model_id (e.g. your-name/simcse-weince-bert-base)")
    try:
        api = HfApi(token=token)
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        info = api.upload_folder(folder_path=str(folder), repo_id=repo_id, commit_message="Upload SimCSE model")
    except Exception as err:  # the Hub client raises many types (offline mode, HTTP, connection, auth)
        raise HubPushError(
            f"could not push {folder} to the Hub repository {repo_id!r}: {type(err).__name__}: {err}. "
            f"Nothing was lost: the local folder {folder} is complete; upload it later with "
            f"`hf upload {repo_id} {folder}`."
        ) from err
    return str(getattr(info, "commit_url", info))
