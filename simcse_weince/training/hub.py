"""The Hugging Face Hub around a training run: an access check before anything loads, the checkpoint the
Trainer pushed for resuming elsewhere, and the final upload of the exported model folder.

During training the Trainer itself pushes (``push_to_hub`` with ``hub_strategy``: ``end``, ``every_save``,
``checkpoint`` — which keeps a ``last-checkpoint`` folder in the repository — or ``all_checkpoints``). Our
calls go through ``huggingface_hub.HfApi`` methods, and the Trainer's through them or (transformers before
5.10.1) through huggingface_hub's module-level ``create_repo`` / ``upload_folder``: the boundary the tests replace
with a local recorder.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

LAST_CHECKPOINT = "last-checkpoint"  # where hub_strategy "checkpoint" keeps the newest checkpoint


class HubAccessError(ConnectionError):
    """The Hub repository cannot be written (no token, no network, no permission)."""


class HubPushError(RuntimeError):
    """An upload failed; the local folder is untouched and complete."""


def repo_name(hub_model_id: str | None, output_dir: str) -> str:
    """The repository the Trainer pushes to: ``hub_model_id``, else the output folder's name."""
    return hub_model_id or Path(output_dir).absolute().name


REPO_ID_FORM = (
    "name or namespace/name: letters, digits, '-', '_' and '.', no '--' or '..', not starting or ending with '-' "
    "or '.', at most 96 characters"
)


def check_repo_id(repo_id: str, setting: str = "hub_model_id") -> None:
    """Whether ``repo_id`` has the form of a Hub repository id (``huggingface_hub``'s own check), said before any
    token or network check would report a bad id as something else.

    Raises:
        ValueError: names ``setting``, the id and the expected form.
    """
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise ValueError(f"{setting} {repo_id!r} is not a Hub repository id; expected {REPO_ID_FORM}") from err


def resolve_token(token: str | None) -> str | None:
    """The explicit token, else the one ``huggingface_hub`` finds (``HF_TOKEN``, ``hf auth login``)."""
    from huggingface_hub import get_token

    return token or get_token()


def check_hub_access(repo_id: str, token: str | None, private: bool | None = None) -> str:
    """Create ``repo_id`` if needed (as the Trainer will) and return its full id; fail fast otherwise.

    Raises:
        HubAccessError: no token, no network (or ``HF_HUB_OFFLINE``), or the repository cannot be written;
            the message says how to train without pushing.
    """
    from huggingface_hub import HfApi

    how = (
        "train without pushing (drop --push_to_hub) or pass --hub_push_optional true to train and keep everything local"
    )
    token = resolve_token(token)
    if not token:
        raise HubAccessError(
            f"--push_to_hub: no Hugging Face token for {repo_id!r} (log in with `hf auth login`, set HF_TOKEN, or "
            f"pass --hub_token); or {how}"
        )
    try:
        url = HfApi(token=token).create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    except Exception as err:  # the Hub client raises many types (offline mode, HTTP, connection, auth)
        raise HubAccessError(
            f"--push_to_hub: cannot create or write the Hub repository {repo_id!r} "
            f"({type(err).__name__}: {' '.join(str(err).split())[:300]}); {how}"
        ) from err
    return getattr(url, "repo_id", repo_id)


def download_last_checkpoint(repo_id: str, output_dir: str | Path, token: str | None, revision: str | None) -> Path:
    """Fetch the ``last-checkpoint`` folder the Trainer pushed (``hub_strategy: checkpoint``) into
    ``output_dir``, for ``resume_from_checkpoint`` as the Trainer documents it.

    Raises:
        HubAccessError: the download failed or the repository holds no ``last-checkpoint``.
    """
    from huggingface_hub import HfApi

    target = Path(output_dir)
    shutil.rmtree(target / LAST_CHECKPOINT, ignore_errors=True)  # no file of an earlier download may survive
    try:
        HfApi(token=resolve_token(token)).snapshot_download(
            repo_id=repo_id, allow_patterns=[f"{LAST_CHECKPOINT}/*"], local_dir=str(target), revision=revision
        )
    except Exception as err:
        raise HubAccessError(
            f"--resume_from_checkpoint hub: cannot download {LAST_CHECKPOINT}/ of {repo_id!r} "
            f"({type(err).__name__}: {' '.join(str(err).split())[:300]})"
        ) from err
    folder = target / LAST_CHECKPOINT
    if not (folder / "trainer_state.json").is_file():
        raise HubAccessError(
            f"--resume_from_checkpoint hub: {repo_id!r} holds no complete {LAST_CHECKPOINT}/ (it is pushed with "
            "--hub_strategy checkpoint)"
        )
    return folder


def push_folder(
    folder: str | Path,
    repo_id: str,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str = "End of training",
    allow_patterns: list[str] | None = None,
    ignore_patterns: Sequence[str] = (),
) -> str:
    """Upload exactly ``folder`` (or its files matching ``allow_patterns``, less those matching ``ignore_patterns``)
    to the root of ``repo_id`` (created if needed); returns the commit URL.

    Raises:
        HubPushError: the Hub could not be reached or refused the upload (message says how to retry).
    """
    from huggingface_hub import HfApi

    folder = Path(folder)
    try:
        api = HfApi(token=resolve_token(token))
        api.create_repo(repo_id, exist_ok=True, repo_type="model")
        info = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            commit_message=commit_message,
            revision=revision,
            allow_patterns=allow_patterns,
            ignore_patterns=list(ignore_patterns) or None,
        )
    except Exception as err:  # the Hub client raises many types (offline mode, HTTP, connection, auth)
        raise HubPushError(
            f"could not push {folder} to the Hub repository {repo_id!r}: {type(err).__name__}: {err}. "
            f"Nothing was lost: the local folder {folder} is complete; upload it later with "
            f"`hf upload {repo_id} {folder}`."
        ) from err
    return str(getattr(info, "commit_url", info))


def with_ignored(given: str | list[str] | None, extra: Sequence[str]) -> list[str]:
    """An upload's ``ignore_patterns`` (``None``, one pattern or a list) and ``extra`` (their union, as a list)."""
    return ([given] if isinstance(given, str) else list(given or [])) + [p for p in extra if p != given]


class _IgnoringApi:
    """An ``HfApi`` whose ``upload_folder`` also skips ``patterns`` (every other attribute is the API's own)."""

    def __init__(self, api: Any, patterns: Sequence[str]) -> None:
        self._api, self._patterns = api, tuple(patterns)

    def upload_folder(self, *args: Any, ignore_patterns: str | list[str] | None = None, **kwargs: Any) -> Any:
        return self._api.upload_folder(*args, ignore_patterns=with_ignored(ignore_patterns, self._patterns), **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


@contextmanager
def trainer_uploads_ignoring(patterns: Sequence[str]) -> Iterator[None]:
    """Within the block, every upload of the Trainer (its checkpoint pushes upload all of ``output_dir``, with
    ignore patterns of its own only for ``_*`` and the checkpoint folders) also skips ``patterns``: the run's
    local files (its lock and the holder's pid and host name) never reach a repository.

    The Trainer's upload function is looked up in its module at each call (``hf_api()`` from transformers 5.10.1,
    ``upload_folder`` before): it is wrapped for the block's duration, on the calling thread's push, and restored
    after.
    """
    import transformers.trainer as hf_trainer

    saved: dict[str, Any] = {}
    if hasattr(hf_trainer, "hf_api"):
        real_api = hf_trainer.hf_api
        saved["hf_api"] = real_api
        hf_trainer.hf_api = lambda: _IgnoringApi(real_api(), patterns)
    if hasattr(hf_trainer, "upload_folder"):
        real_upload = hf_trainer.upload_folder
        saved["upload_folder"] = real_upload

        def upload_folder(*args: Any, ignore_patterns: str | list[str] | None = None, **kwargs: Any) -> Any:
            return real_upload(*args, ignore_patterns=with_ignored(ignore_patterns, patterns), **kwargs)

        hf_trainer.upload_folder = upload_folder
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(hf_trainer, name, value)
