"""Every cited number has its file (issue 41): the claims tables of README.md and docs/results.md cite, row by row,
the results files their numbers come from, and every results file the documentation names exists.

* a row of docs/results.md's claims table names at least one file under ``experiments/results/`` or ``bench/``;
* a row of the README's claims table names one, or links a section of docs/results.md that does;
* every ``experiments/results/...`` or ``bench/...`` file README.md or docs/*.md links to exists.

A path may name a file, a glob, or a stem that an experiment's ``--out`` writes files under (``.../text_warmstart``
for ``text_warmstart.json`` and ``.md``). A path in running text that is not a link may be a command's output still
to be made (the GPU-only paper-scale table): only links and claims rows must resolve.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# a results path as the docs write it: in a link target, in backticks, or bare (up to a space, bracket or quote)
CITED = re.compile(r"(?<![\w/.-])(?:\.\./)?((?:experiments/results|bench)/[\w./*{},-]*[\w*}])")


def table_rows(text: str, heading: str) -> list[str]:
    """The body rows of the first table under the heading that starts with ``heading`` (up to the next heading)."""
    section = text.split(heading, 1)[1]
    section = re.split(r"\n#{1,3} ", section, maxsplit=1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")]
    return rows[1:]


def cited_paths(text: str) -> list[str]:
    """The results paths a text names, brace forms expanded (``a.{json,md}`` is ``a.json`` and ``a.md``)."""
    out = []
    for path in CITED.findall(text):
        braces = re.search(r"\{([^}]*)\}", path)
        if braces:
            out += [path[: braces.start()] + part + path[braces.end() :] for part in braces.group(1).split(",")]
        else:
            out.append(path)
    return out


def missing(paths: list[str], root: Path) -> list[str]:
    """The paths that match no file under ``root``: neither the file, nor a glob's match, nor a stem's ``stem.*``."""

    def found(p: str) -> bool:
        if "*" in p:
            return any(root.glob(p))
        return (root / p).exists() or any((root / p).parent.glob(Path(p).name + ".*"))

    return [p for p in paths if not found(p)]


def linked_paths(text: str) -> list[str]:
    """The results paths of a text's Markdown link targets (``[...](../experiments/results/x.json)``)."""
    return [p for target in re.findall(r"\]\(([^)\s]+)\)", text) for p in cited_paths(target.split("#")[0])]


def section_of(text: str, anchor: str) -> str:
    """The text of the docs/results.md section whose GitHub anchor is ``anchor`` (empty if none)."""
    for match in re.finditer(r"^(#{2,4}) (.+)$", text, flags=re.M):
        if github_anchor(match.group(2)) == anchor:
            rest = text[match.end() :]
            following = re.search(rf"^#{{2,{len(match.group(1))}}} ", rest, flags=re.M)
            return rest[: following.start()] if following else rest
    return ""


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


RESULTS = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
RESULTS_ROWS = table_rows(RESULTS, "## Claims")
README_ROWS = table_rows(README, "## Claims and where they are measured")


@pytest.mark.parametrize("row", RESULTS_ROWS, ids=lambda r: r.split("|")[1].strip()[:40])
def test_each_claims_row_of_the_results_page_cites_its_files(row: str) -> None:
    paths = cited_paths(row)
    assert paths, f"no file under experiments/results/ or bench/ in: {row[:120]}"
    assert missing(paths, REPO) == []


@pytest.mark.parametrize("row", README_ROWS, ids=lambda r: r.split("|")[1].strip()[:40])
def test_each_claims_row_of_the_readme_reaches_its_files(row: str) -> None:
    anchors = re.findall(r"docs/results\.md#([\w\-]+)", row)
    sections = [section_of(RESULTS, a) for a in anchors]
    paths = cited_paths(row) + [p for s in sections for p in cited_paths(s)]
    assert paths, f"neither the row nor its results section cites a file: {row[:120]}"
    assert missing(paths, REPO) == []


@pytest.mark.parametrize("page", ["README.md", *sorted(p.name for p in (REPO / "docs").glob("*.md"))])
def test_every_results_file_the_docs_name_exists(page: str) -> None:
    path = REPO / page if page == "README.md" else REPO / "docs" / page
    assert missing(linked_paths(path.read_text(encoding="utf-8")), REPO) == []


def test_the_check_fails_when_a_cited_file_is_removed(tmp_path: Path) -> None:
    """The checker on a copy: a table citing two files passes, and names the one removed afterwards."""
    (tmp_path / "experiments" / "results").mkdir(parents=True)
    for name in ("a.json", "a.md"):
        (tmp_path / "experiments" / "results" / name).write_text("{}", encoding="utf-8")
    text = "## Claims\n\n| claim | files |\n|---|---|\n| x | [a](../experiments/results/a.{json,md}) |\n"
    rows = table_rows(text, "## Claims")
    assert cited_paths(rows[0]) == ["experiments/results/a.json", "experiments/results/a.md"]
    assert missing(cited_paths(rows[0]), tmp_path) == []
    (tmp_path / "experiments" / "results" / "a.md").unlink()
    assert missing(cited_paths(rows[0]), tmp_path) == ["experiments/results/a.md"]
    assert cited_paths("| y | see docs/results.md |") == []  # a row without a results file cites nothing
    assert missing(["experiments/results/a"], tmp_path) == []  # a stem: a.json is there
    assert linked_paths("[t](../bench/README.md#x) and `--out experiments/results/b`") == ["bench/README.md"]


def test_anchors_are_read_as_github_writes_them() -> None:
    assert github_anchor("3. WEINCE against InfoNCE, paired by seed") == "3-weince-against-infonce-paired-by-seed"
    assert section_of("## A b\n\ntext `bench/x.py`\n\n## C\n", "a-b").strip() == "text `bench/x.py`"
