"""One writer of Markdown tables: every report (model cards, evaluation and training summaries, the lab's sweeps and
drivers) builds its rows as cells first and renders them here, so that a table's layout is decided in one place."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a Markdown table: ``| a | b |``, the rule ``|---|---|``, then one line per row, each cell
    written with ``str`` (a cell holding ``|`` must escape it).

    Raises:
        ValueError: a row whose number of cells is not the header's.
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a table row of {len(row)} cells under a header of {len(header)}: {list(row)!r}")
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return lines
