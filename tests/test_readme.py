"""The README stays a five-minute read: at most 1,500 words, the two set-up commands first, and a claims table of
five summary rows whose details live in docs/results.md."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def claims_rows(text: str) -> list[str]:
    section = text.split("## Claims and where they are measured", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")]
    return rows[1:]  # past the header (the rule is dropped above)


def test_readme_is_at_most_1500_words() -> None:
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= 1500, f"README.md has {words} words; move details into docs/"


def test_claims_table_is_a_seven_row_summary_pointing_at_the_results_page() -> None:
    text = README.read_text(encoding="utf-8")
    rows = claims_rows(text)
    assert len(rows) == 7, rows
    assert all("docs/results.md" in row or "bench/README.md" in row for row in rows)


def test_claims_rows_are_counted_from_the_table_only() -> None:
    """The helper the test above relies on: a section with a header, its rule and two rows gives the two rows."""
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n"
    text = f"## Claims and where they are measured\n\n{table}\nprose\n\n## Next\n| x |\n"
    assert claims_rows(text) == ["| 1 | 2 |", "| 3 | 4 |"]
