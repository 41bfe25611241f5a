"""``python -m simcse_weince.cli.token_cache``: lists the token caches with their sizes and total, removes them
with ``--clear``, and leaves everything else in the folder alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from simcse_weince.cli.token_cache import main, run
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import ReadOptions, open_sources
from simcse_weince.text.token_cache import prepare_rows
from simcse_weince.text.token_cache.admin import folder_bytes, format_bytes
from simcse_weince.text.token_cache.store import default_cache_root
from tests.helpers import REPO


@pytest.fixture(scope="module")
def tok(tiny_bert_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def build(root: Path | None, tmp_path: Path, tok, max_length: int) -> Path:
    f = tmp_path / "text.txt"
    f.write_text("".join(f"sentence number {i}\n" for i in range(50)), encoding="utf-8")
    stats = TextStats()
    prepare_rows(open_sources([f], ReadOptions()), tok, max_length, stats, cache_root=root)
    return Path(stats.cache_dir)


def test_list_then_clear(tok, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "caches"
    built = [build(root, tmp_path, tok, n) for n in (16, 24)]
    old = root / ("0" * 24)  # a cache of an older format, no longer read
    old.mkdir()
    (old / "tokens-00000.arrow").write_bytes(b"x" * 5000)
    (old / "stats.json").write_text(json.dumps({"rows": 7}))
    (old / "key.json").write_text(json.dumps({"format": 1, "sources": [{"path": "/x/old.txt"}], "max_length": 32}))
    leftover = root / f".{'a' * 24}.k2j3"  # an interrupted build
    leftover.mkdir()
    (leftover / "tokens-00000.arrow").write_bytes(b"y" * 300)
    (root / "notes").mkdir()  # not a cache: never listed nor removed
    (root / "notes" / "a.txt").write_text("keep me")
    (root / "README").write_text("keep me too")
    folders = [*built, old, leftover]
    total = sum(folder_bytes(p) for p in folders)

    listed = run(["--cache_dir", str(root)])
    out = capsys.readouterr().out
    assert sorted(listed["caches"]) == sorted(p.name for p in folders) and listed["total_bytes"] == total
    assert f"token caches in {root}:" in out and "notes" not in out and "README" not in out
    assert f"total: 4 cache(s), {format_bytes(total)}" in out
    line = {p.name: next(x for x in out.splitlines() if p.name in x) for p in folders}
    assert "50 sentences of text.txt" in line[built[0].name] and "max_length 16" in line[built[0].name]
    assert format_bytes(folder_bytes(built[0])) in line[built[0].name]
    assert "old format 1: no longer read" in line[old.name] and "7 sentences of old.txt" in line[old.name]
    assert "incomplete" in line[leftover.name] and "300 B" in line[leftover.name]
    assert all(p.exists() for p in folders)  # listing removes nothing

    assert main(["--cache_dir", str(root), "--clear"]) == 0
    assert f"removed 4 token cache(s), {format_bytes(total)}, from {root}" in capsys.readouterr().out
    assert sorted(p.name for p in root.iterdir()) == ["README", "notes"]
    assert main(["--cache_dir", str(root)]) == 0
    assert capsys.readouterr().out.strip() == f"no token caches in {root}"


def test_the_default_folder_is_the_training_default(tok, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    built = build(None, tmp_path, tok, 12)  # the conftest points the HF datasets cache at a temporary folder
    assert built.parent == default_cache_root()
    assert main([]) == 0
    assert built.name in capsys.readouterr().out


def test_a_missing_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--cache_dir", str(tmp_path / "nope"), "--clear"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --cache_dir") and "no such folder" in err and "\n" not in err


def test_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simcse_weince.cli.token_cache", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0 and "--clear" in done.stdout and "--cache_dir" in done.stdout
