"""The files of one hard-negative mining, named after its output ``<stem><suffix>`` (``.csv`` or ``.parquet``):

* ``<stem><suffix>``: SimCSE's triplets, columns ``sent0, sent1, hard_neg`` (anchor, positive, negative) whatever
  the input's column names, one row per negative, ready for ``text_columns: [sent0, sent1, hard_neg]``;
* ``<stem>_unmined<suffix>``: with ``keep_unmined``, the pairs no negative passed the guards for (``sent0, sent1``),
  to train with the triplets under ``allow_missing_negatives: true``; not written when there is none;
* ``<stem>_scores.png``: the histogram of the positives' and negatives' scores
  (:func:`~simcse_weince.text.mining_report.plot_scores`);
* ``<stem>_scores.json``: the counts, the quantiles of the scores, the settings, the model and the inputs.

The files are checked before anything is read or loaded: none may exist yet (an earlier run's companion beside
a new output would be read with it) unless ``overwrite``, which replaces them all and removes an earlier
``_unmined`` file this run does not write. Each file is written atomically.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from simcse_weince.core import strict_json
from simcse_weince.core.atomic import atomic_file
from simcse_weince.text.mining import MinedNegatives, MiningSettings, Pairs
from simcse_weince.text.mining_report import plot_scores, score_summary
from simcse_weince.text.row_files import ROW_FILE_SUFFIXES, check_new_file, write_rows

logger = logging.getLogger(__name__)

TRIPLET_COLUMNS = ("sent0", "sent1", "hard_neg")
PAIR_COLUMNS = TRIPLET_COLUMNS[:2]


@dataclass(frozen=True)
class MiningOutputs:
    """Where one mining's files go (see the module docstring)."""

    rows: Path
    unmined: Path
    plot: Path
    summary: Path
    keep_unmined: bool
    written: list[Path] = field(default_factory=list, compare=False)  # by this run, as each is complete

    @classmethod
    def plan(
        cls, output: str | Path, keep_unmined: bool, overwrite: bool, inputs: Sequence[str | Path] = ()
    ) -> MiningOutputs:
        """The files of ``output``, checked: a supported suffix, not an input file, none there without
        ``overwrite``.

        Raises:
            ValueError: names the file and what was expected.
        """
        rows = check_new_file(output, "--output", overwrite, ROW_FILE_SUFFIXES)
        stem = rows.with_suffix("")
        out = cls(
            rows,
            Path(f"{stem}_unmined{rows.suffix}"),
            Path(f"{stem}_scores.png"),
            Path(f"{stem}_scores.json"),
            keep_unmined,
        )
        for path in (out.unmined, out.plot, out.summary):
            check_new_file(path, f"--output {rows}: its companion", overwrite)
        given = {Path(p).resolve() for p in inputs}
        clash = [p for p in (out.rows, out.unmined, out.plot, out.summary) if p.resolve() in given]
        if clash:
            raise ValueError(f"--output {rows}: would overwrite the input file {clash[0]}; expected another name")
        return out

    def write(self, pairs: Pairs, result: MinedNegatives, settings: MiningSettings, about: dict) -> dict:
        """Write the files; returns the summary written to :attr:`summary` (``about``: the model and its
        pooler, added to it)."""
        write_rows(self.rows, TRIPLET_COLUMNS, result.rows)
        self.written.append(self.rows)
        unmined = None
        if self.keep_unmined and result.unmined:
            lone = [(pairs.anchors[i], pairs.positives[i]) for i in result.unmined]
            unmined = str(write_rows(self.unmined, PAIR_COLUMNS, lone))
            self.written.append(self.unmined)
        elif self.unmined.exists():  # an earlier run's, replaced by nothing (the plan allowed it: overwrite)
            self.unmined.unlink()
            logger.warning("removed %s, an earlier run's pairs without a negative", self.unmined)
        counts = result.counts(pairs, settings.num_negatives)
        title = f"{about.get('model', '')}: {counts['rows_written']} negatives, {len(pairs)} pairs"
        plot_scores(self.plot, result, settings, title)
        self.written.append(self.plot)
        summary = {
            **about,
            "inputs": pairs.sources,
            "columns": list(pairs.columns),
            "settings": settings.to_dict(),
            "counts": counts,
            "scores": score_summary(result),
            "files": {"rows": str(self.rows), "unmined": unmined, "plot": str(self.plot)},
            "reading": {k: v for k, v in pairs.stats.to_dict().items() if k.endswith("skipped")},
        }
        with atomic_file(self.summary) as tmp:
            tmp.write_text(strict_json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        self.written.append(self.summary)
        return summary

    def kept(self) -> str:
        """What a stop leaves, and how to go on (each file is written atomically: one there is complete)."""
        if not self.written:
            return (
                f"nothing was written ({self.rows} and its companions are written at the end); run the same command "
                "again to mine from the start"
            )
        missing = [p for p in (self.plot, self.summary) if p not in self.written]
        kept = ", ".join(str(p) for p in self.written)
        return (
            f"kept {kept} (complete); not written: {', '.join(str(p) for p in missing)}; run the same command "
            "with --overwrite to mine again"
        )
