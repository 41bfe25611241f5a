"""How the lab writes a report: its tables built as rows of cells first and rendered by one Markdown writer
(:func:`table`), and the report's Markdown and its summary (JSON) written side by side (:func:`write`). The sweeps,
E1–E3, the decision rule and the experiment drivers all write through here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a Markdown table: ``| a | b |``, the rule ``|---|---|``, then one line per row, each cell
    written with ``str`` (an empty one as ``| |``; a cell holding ``|`` must escape it).

    Raises:
        ValueError: a row whose number of cells is not the header's.
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a table row of {len(row)} cells under a header of {len(header)}: {list(row)!r}")
        lines.append("|" + "|".join(f" {cell} " if str(cell) else " " for cell in row) + "|")
    return lines


def write(prefix: str | Path, markdown: str, summary: dict, indent: int = 2) -> tuple[Path, Path]:
    """Write ``<prefix>.json`` (``summary``, every non-finite number written as ``null``:
    :mod:`simcse_weince.core.strict_json`) and ``<prefix>.md`` (``markdown`` as given), each atomically (a report
    rewritten as a run goes is never read half-written); the two paths. The folder is made if missing."""
    # here, not above: a driver runs without torch (which the library's package brings) until it reports
    from simcse_weince.core.atomic import write_text_atomic
    from simcse_weince.core.strict_json import dumps

    js, md = Path(f"{prefix}.json"), Path(f"{prefix}.md")
    write_text_atomic(js, dumps(summary, indent=indent))
    write_text_atomic(md, markdown)
    return md, js
