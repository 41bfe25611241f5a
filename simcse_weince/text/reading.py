"""What reading the training text counts, and how one line or cell of it is normalised.

A line of a text file and a cell of a column file are read alike (:func:`normalise_cell`): the line breaks of
``str.splitlines`` other than ``\\n`` inside it (:data:`BREAKS_IN_LINE`) read as spaces, whitespace and the
invisible characters of :data:`INVISIBLE` (NUL, zero-width) stripped at both ends. Blank lines and lines of
invisible characters only are skipped and counted apart (:func:`keep_sentences`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

# Read as spaces inside a line: the line breaks of str.splitlines other than \n (and a CR not before a \n)
BREAKS_IN_LINE = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
BREAK_IN_CELL = re.compile(f"[\n{BREAKS_IN_LINE}]")
INVISIBLE = "\x00\u200b\u200c\u200d\u2060\ufeff"  # NUL, zero-width space / non-joiner / joiner, word joiner, BOM
STRIP = "".join(chr(c) for c in range(0x3001) if chr(c).isspace()) + INVISIBLE  # every str.isspace() is <= U+3000


@dataclass
class TextStats:
    """What reading and tokenising the training text did, for the log and the saved run report."""

    files: list[str] = field(default_factory=list)
    text_columns: list[str] = field(default_factory=list)  # the columns read (anchor, positive, negatives); [] = lines
    sentences: int = 0  # rows: sentences of a one-column corpus, pairs or triplets of a multi-column one
    bad_rows_skipped: int = 0  # column files with skip_bad_rows: rows skipped for a bad cell or record
    blank_lines_skipped: int = 0
    invisible_lines_skipped: int = 0  # lines of NUL / zero-width characters only (and whitespace), see INVISIBLE
    unknown_sentences_skipped: int = 0  # no known token: only [UNK] (e.g. emoji) or nothing once tokenised
    unterminated_lines_dropped: int = 0
    truncated: int = 0
    rows_by_source: list[int] = field(default_factory=list)  # rows of each source (file), in order, as tokenised
    rows_by_negatives: list[int] = field(default_factory=list)  # rows holding 0, 1, ..., k hard negatives (k >= 1)
    # rows with a hard negative of the same tokens as their anchor or positive: the duplicate mask takes it out
    # of the row's candidates (mask_duplicates), so a triplet of rows_by_negatives trains as a pair
    repeated_negative_rows: int = 0
    tail_sentences_dropped: int = 0  # the last batch would have scored a sentence alone (see single_row_tail)
    cache_dir: str = ""  # the tokenised-text cache the rows come from (see simcse_weince.text.token_cache)
    cache_reused: bool = False  # True: the cache was built earlier and only memory-mapped this time
    cache_bytes: int = 0  # the size of that cache folder on disk

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def add(self, counted: TextStats, source: str) -> None:
        """Add the reading counts of one source (``counted``) and its name to these."""
        self.files.append(source)
        for name in (
            "sentences",
            "blank_lines_skipped",
            "invisible_lines_skipped",
            "bad_rows_skipped",
            "unterminated_lines_dropped",
        ):
            setattr(self, name, getattr(self, name) + getattr(counted, name))


def normalise_cell(text: str) -> str:
    """A cell as a line of a text file: line breaks inside (``\\n``, ``\\r`` and the others of
    ``str.splitlines``) read as spaces, whitespace and NUL / zero-width characters stripped at both ends."""
    if any(c in text for c in "\n" + BREAKS_IN_LINE):
        text = BREAK_IN_CELL.sub(" ", text.replace("\r\n", "\n"))  # a CRLF is one break
    return text.strip(STRIP)


def keep_sentences(lines: Iterable[str | None], counted: TextStats) -> Iterator[str]:
    """The sentences among ``lines``, stripped of whitespace and :data:`INVISIBLE` characters at both ends;
    the blank lines (or None) and those of invisible characters only are skipped and counted in ``counted``."""
    for raw in lines:
        s = raw.strip(STRIP) if raw else ""
        if s:
            counted.sentences += 1
            yield s
        elif raw and raw.strip():
            counted.invisible_lines_skipped += 1
        else:
            counted.blank_lines_skipped += 1
