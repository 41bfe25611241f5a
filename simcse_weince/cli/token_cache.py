"""``python -m simcse_weince.cli.token_cache`` / ``simcse-token-cache``: list the tokenised training-text caches
with their sizes, or remove them (``--clear``).

Training tokenises its text files once into a cache folder (:mod:`simcse_weince.text.token_cache`) and never
deletes one; a new folder is built whenever the files, the tokenizer or ``max_seq_length`` change. Only folders
named as caches (or as the temporary folder of a build) are listed and removed; nothing else in the folder is
touched.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from simcse_weince.cli.errors import command_main
from simcse_weince.core.paths import resolve_data_path
from simcse_weince.text.token_cache.admin import CacheInfo, format_bytes, list_caches, remove_caches
from simcse_weince.text.token_cache.store import default_cache_root


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="simcse-token-cache",
        description="List the tokenised training-text caches with their sizes and total, or remove them.",
        allow_abbrev=False,
    )
    p.add_argument(
        "--cache_dir",
        default=None,
        help="folder of the caches, as data_cache_dir in a training config (default: <HF datasets cache>/"
        "simcse_weince_tokens, i.e. $HF_DATASETS_CACHE or ~/.cache/huggingface/datasets)",
    )
    p.add_argument(
        "--clear",
        action="store_true",
        help="remove every cache in the folder (a run building one now would fail; a run reading one keeps it "
        "until it ends)",
    )
    return p


def describe(c: CacheInfo) -> str:
    """One line per cache: name, size, date, sentences, files, tokenizer, max_length, state."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.folder.stat().st_mtime))
    head = f"  {c.folder.name:<32} {format_bytes(c.bytes):>9}  {when}"
    if not c.complete:
        return f"{head}  incomplete (an interrupted build, or one running now)"
    files = [Path(s.get("path") or s.get("hub") or "?").name for s in c.key.get("sources", [])]
    shown = ", ".join(files[:2]) + (f" (+{len(files) - 2})" if len(files) > 2 else "")
    state = "" if c.current else f"  old format {c.key.get('format', '?')}: no longer read"
    rows = c.stats.get("rows", c.stats.get("sentences"))
    rows = f"{rows:,}" if isinstance(rows, int) else "?"
    tok = c.key.get("tokenizer_name") or "?"
    return f"{head}  {rows} sentences of {shown}; {tok}, max_length {c.key.get('max_length', '?')}{state}"


def run(argv: Sequence[str]) -> dict:
    """List (or, with ``--clear``, remove) the caches; returns ``{"cache_dir", "caches", "total_bytes",
    "removed"}``."""
    args = build_parser().parse_args(list(argv))
    if args.cache_dir:
        root = Path(resolve_data_path(args.cache_dir))
        if not root.is_dir():
            raise FileNotFoundError(f"--cache_dir {root}: no such folder; expected a folder of token caches")
    else:
        root = default_cache_root()
    caches = list_caches(root)
    total = sum(c.bytes for c in caches)
    if not caches:
        print(f"no token caches in {root}")
    elif args.clear:
        remove_caches(caches)
        print(f"removed {len(caches)} token cache(s), {format_bytes(total)}, from {root}")
    else:
        print(f"token caches in {root}:")
        print("\n".join(describe(c) for c in caches))
        print(f"total: {len(caches)} cache(s), {format_bytes(total)} (remove them with --clear)")
    return {
        "cache_dir": str(root),
        "caches": [c.folder.name for c in caches],
        "total_bytes": total,
        "removed": bool(args.clear and caches),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return command_main(run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
