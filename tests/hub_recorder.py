"""A stand-in for the Hugging Face Hub at its API boundary: the ``HfApi`` methods that the Trainer and this
project call (``create_repo``, ``upload_folder``, ``snapshot_download``) are replaced by a recorder that keeps
every repository as a local folder and every call in order, so tests can assert what would be uploaded,
when, and with which card — without a network."""

from __future__ import annotations

import fnmatch
import shutil
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

USER = "recorder-user"


@dataclass
class Commit:
    repo_id: str
    message: str
    path_in_repo: str
    files: list[str]  # paths in the repository, sorted
    card: str | None  # README.md as uploaded, if it was


def _matches(path: str, patterns: list[str] | str | None) -> bool:
    if patterns is None:
        return False
    patterns = [patterns] if isinstance(patterns, str) else patterns
    return any(fnmatch.fnmatch(path, p + "*" if p.endswith("/") else p) for p in patterns)


@dataclass
class HubRecorder:
    root: Path
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, repo_id)
    commits: list[Commit] = field(default_factory=list)

    def full_id(self, repo_id: str) -> str:
        return repo_id if "/" in repo_id else f"{USER}/{repo_id}"

    def repo(self, repo_id: str) -> Path:
        return self.root / self.full_id(repo_id).replace("/", "__")

    # ---- the HfApi methods (bound to an HfApi instance: first argument is that instance) ----------------
    def create_repo(self, api: Any, repo_id: str, **kwargs: Any) -> SimpleNamespace:
        self.calls.append(("create_repo", self.full_id(repo_id)))
        self.repo(repo_id).mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(repo_id=self.full_id(repo_id), url=f"https://hub.invalid/{self.full_id(repo_id)}")

    def upload_folder(
        self,
        api: Any,
        *,
        repo_id: str,
        folder_path: str | Path,
        path_in_repo: str | None = None,
        commit_message: str | None = None,
        allow_patterns: list[str] | str | None = None,
        ignore_patterns: list[str] | str | None = None,
        run_as_future: bool = False,
        **kwargs: Any,
    ):
        self.calls.append(("upload_folder", self.full_id(repo_id)))
        src, prefix = Path(folder_path), (path_in_repo or "").strip("/")
        target = self.repo(repo_id) / prefix
        files = []
        for f in sorted(p for p in src.rglob("*") if p.is_file()):
            rel = f.relative_to(src).as_posix()
            if (allow_patterns is not None and not _matches(rel, allow_patterns)) or _matches(rel, ignore_patterns):
                continue
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target / rel)
            files.append(f"{prefix}/{rel}" if prefix else rel)
        card = (
            (src / "README.md").read_text(encoding="utf-8") if "README.md" in [f.name for f in src.iterdir()] else None
        )
        self.commits.append(Commit(self.full_id(repo_id), commit_message or "", prefix, files, card))
        info = SimpleNamespace(commit_url=f"https://hub.invalid/{self.full_id(repo_id)}/commit/{len(self.commits)}")
        if run_as_future:
            future: Future = Future()
            future.set_result(info)
            return future
        return info

    def snapshot_download(self, api: Any, *, repo_id: str, allow_patterns=None, local_dir=None, **kwargs: Any) -> str:
        self.calls.append(("snapshot_download", self.full_id(repo_id)))
        src, dst = self.repo(repo_id), Path(local_dir)
        if not src.is_dir():
            raise FileNotFoundError(f"no repository {repo_id} in the recorder")
        for f in (p for p in src.rglob("*") if p.is_file()):
            rel = f.relative_to(src).as_posix()
            if allow_patterns is None or _matches(rel, allow_patterns):
                (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dst / rel)
        return str(dst)


def install(monkeypatch: Any, root: Path) -> HubRecorder:
    """Replace the HfApi methods with a recorder storing repositories under ``root``."""
    from huggingface_hub import HfApi

    recorder = HubRecorder(root)
    for name in ("create_repo", "upload_folder", "snapshot_download"):
        method = getattr(recorder, name)
        monkeypatch.setattr(HfApi, name, lambda api, *a, _m=method, **k: _m(api, *a, **k))
    monkeypatch.setenv("HF_TOKEN", "hf_recorder_token")
    return recorder
