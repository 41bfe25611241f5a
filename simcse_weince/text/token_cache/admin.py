"""The caches of a cache root as a user administers them (``simcse-token-cache``): listed with their size and
state, removed."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simcse_weince.text.token_cache.store import CACHE_FORMAT, is_complete

logger = logging.getLogger(__name__)


CACHE_NAME = re.compile(r"[0-9a-f]{24}")  # see cache_folder


BUILD_NAME = re.compile(r"\.([0-9a-f]{24})\..+")  # the temporary folder of a build (build_cache's mkdtemp)


@dataclass
class CacheInfo:
    """One folder of a cache root: a cache, or the leftover of an interrupted (or running) build."""

    folder: Path
    bytes: int
    complete: bool  # False: a build's temporary folder, or a cache folder without its tokens
    key: dict  # key.json ({} when missing)
    stats: dict  # stats.json ({} when missing)

    @property
    def current(self) -> bool:
        """Whether this version of the package reads it (its format is :data:`CACHE_FORMAT`)."""
        return self.complete and self.key.get("format") == CACHE_FORMAT


def folder_bytes(folder: Path) -> int:
    """The size of the files under ``folder`` (links not followed)."""
    total = 0
    for dirpath, _, names in os.walk(folder):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


def format_bytes(n: int) -> str:
    """``n`` bytes in decimal units: ``"512 B"``, ``"1.2 MB"``, ``"3.4 GB"``."""
    if n < 1000:
        return f"{n} B"
    size = float(n)
    for unit in ("kB", "MB", "GB"):
        size /= 1000
        if size < 1000:
            return f"{size:.1f} {unit}"
    return f"{size / 1000:.1f} TB"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def list_caches(root: str | Path) -> list[CacheInfo]:
    """The caches in ``root`` (and leftovers of builds), oldest first. Only folders named as a cache or as a
    build's temporary folder count: anything else in ``root`` is not listed (nor removed)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        if not p.is_dir() or p.is_symlink():
            continue
        if CACHE_NAME.fullmatch(p.name):
            found.append(CacheInfo(p, folder_bytes(p), is_complete(p), _read_json(p / "key.json"),
                                   _read_json(p / "stats.json")))  # fmt: skip
        elif BUILD_NAME.fullmatch(p.name):
            found.append(CacheInfo(p, folder_bytes(p), False, {}, {}))
    return sorted(found, key=lambda c: (c.folder.stat().st_mtime, c.folder.name))


def remove_caches(caches: Sequence[CacheInfo]) -> int:
    """Delete the folders of ``caches`` (from :func:`list_caches`); returns the bytes they held. A run that has
    a cache memory-mapped keeps reading it (the files go when it ends); one building a cache now fails."""
    for c in caches:
        shutil.rmtree(c.folder, ignore_errors=True)
    return sum(c.bytes for c in caches)


def log_cache_root(root: Path) -> None:
    """Log how many caches ``root`` holds and their size, and how to list or remove them."""
    caches = list_caches(root)
    logger.info(
        "token caches in %s: %d, %s in all (list them, or remove them with --clear: "
        "python -m simcse_weince.cli.token_cache)",
        root,
        len(caches),
        format_bytes(sum(c.bytes for c in caches)),
    )
