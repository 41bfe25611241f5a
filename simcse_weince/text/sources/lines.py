"""Text files: one sentence per line.

Lines end at ``\\n`` (or ``\\r\\n``) and nowhere else. The other characters that Python's ``str.splitlines``
breaks at (a carriage return not followed by ``\\n``, ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028,
U+2029) are read as spaces inside the line, with a warning naming the first one of each file. A line is stripped
of whitespace and of NUL / zero-width characters at both ends; blank lines and lines of invisible characters only
are skipped and counted apart (:func:`~simcse_weince.text.reading.keep_sentences`). A file that is not valid
UTF-8 stops with an error naming the file and line; a file without sentences is an error. A file cut off
mid-line (no final newline, e.g. a byte-range sample) can drop that last line on request. Files are read as a
stream (:func:`iter_sentences`), in chunks, so memory stays flat in the file's size.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterator
from pathlib import Path

from simcse_weince.core.textfiles import decode_utf8
from simcse_weince.text.columns import ReadOptions
from simcse_weince.text.reading import BREAKS_IN_LINE, TextStats, keep_sentences
from simcse_weince.text.sources.base import FileSource, Part
from simcse_weince.text.sources.names import check_lines_name

logger = logging.getLogger(__name__)
LAYOUT = "UTF-8 text, one sentence per line"
CHUNK_BYTES = 1 << 22  # read size of the streaming reader: flat memory whatever the file size
BREAK_IN_LINE = re.compile(f"[{BREAKS_IN_LINE}]")
BREAK_NAMES = {"\r": "carriage return without a line feed", "\v": "vertical tab", "\f": "form feed"}


class TextLines(FileSource):
    """A text file, one sentence per line: every file not named as a column format."""

    format = "text"
    by_column = False
    suffixes = ()
    layout = "a text file, one sentence per line"

    def scan(self, stats: TextStats, part_bytes: int, part_rows: int) -> list[Part]:
        for _ in iter_sentences(self.path, self.drop, stats):
            pass
        return [Part(start, stop) for start, stop in line_ranges(self.path, part_bytes)]

    def read(self, part: Part, counted: TextStats) -> list[list[str]]:
        return [list(iter_range_sentences(self.path, part.start, part.stop, self.drop))]


def check_text_file(path: str | Path) -> Path:
    """``path`` as a ``Path`` once it is known to be a plain (not gzip-compressed) file not named as a column
    format.

    Raises:
        IsADirectoryError: a directory.
        FileNotFoundError: no such file.
        ValueError: gzip-compressed, or named as a column format.
    """
    check_lines_name(path)
    return TextLines.open(path, False, ReadOptions()).path


def iter_sentences(
    path: str | Path,
    drop_unterminated_last_line: bool = False,
    stats: TextStats | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[str]:
    """Yield the sentences of a UTF-8 text file, one per line (see the module's description), stripped; blank
    lines and lines of invisible characters only skipped.

    The file is read in chunks of about ``chunk_bytes`` cut after a newline, so memory stays flat in the
    file size. With ``stats`` the skipped lines, a dropped last line, the file and its sentences are counted
    there and the dropped line and the first line break read as a space are logged; without it the file is
    only read.

    Raises:
        FileNotFoundError, IsADirectoryError: see :func:`check_text_file`.
        ValueError: a column format's name, gzip, invalid UTF-8 (names ``file:line`` and the byte) or no
            sentence in the file (at the end of the iteration).
    """
    path = check_text_file(path)
    counted = TextStats()
    yield from _read_lines(path, 0, path.stat().st_size, drop_unterminated_last_line, chunk_bytes, counted, stats)
    if not counted.sentences:
        raise ValueError(
            f"{path}: no sentences: the file is empty, blank or invisible ({counted.blank_lines_skipped} blank "
            f"lines, {counted.invisible_lines_skipped} of NUL / zero-width characters only); expected UTF-8 text, "
            "one sentence per line"
        )
    if stats is not None:
        stats.add(counted, str(path))


def read_sentences(
    path: str | Path, drop_unterminated_last_line: bool = False, stats: TextStats | None = None
) -> list[str]:
    """Sentences of a UTF-8 text file, one per line, blank lines skipped (counted in ``stats``).

    Holds every sentence in memory: the training pipeline streams the file instead (:func:`iter_sentences`).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: invalid UTF-8 (names file:line) or no sentence in the file.
    """
    return list(iter_sentences(path, drop_unterminated_last_line, stats if stats is not None else TextStats()))


def iter_range_sentences(
    path: str | Path, start: int, stop: int, drop_unterminated_last_line: bool = False
) -> Iterator[str]:
    """The sentences of bytes ``[start, stop)`` of a file already read by :func:`iter_sentences` (so valid),
    as that would yield them; ``start`` and ``stop`` are line starts from :func:`line_ranges`. Silent: no
    counts, no log, and a range may hold no sentence."""
    yield from _read_lines(Path(path), start, stop, drop_unterminated_last_line, CHUNK_BYTES, TextStats(), None)


def line_ranges(path: str | Path, target_bytes: int) -> list[tuple[int, int]]:
    """``[start, stop)`` byte ranges covering the file, each about ``target_bytes`` long, cut after a newline."""
    size = Path(path).stat().st_size
    cuts = [0]
    with Path(path).open("rb") as f:
        while cuts[-1] + target_bytes < size:
            f.seek(cuts[-1] + target_bytes)
            f.readline()  # to the end of the line the target falls in
            if f.tell() >= size:
                break
            cuts.append(f.tell())
    return list(itertools.pairwise([*cuts, size]))


def _read_lines(
    path: Path, start: int, stop: int, drop_last: bool, chunk_bytes: int, counted: TextStats, log: TextStats | None
) -> Iterator[str]:
    """The sentences of bytes ``[start, stop)`` (:func:`keep_sentences` of its lines), counted in ``counted``;
    the dropped last line and the file's first line break read as a space are logged when ``log`` is given.
    Line numbers in errors count from ``start``."""
    offset, line, rest, warned = start, 1, b"", log is None
    with path.open("rb") as f:
        f.seek(start)
        while True:
            block = f.read(min(chunk_bytes, stop - f.tell()))
            buf = rest + block
            cut = len(buf) if not block else buf.rfind(b"\n") + 1  # at the end: whatever is left
            if not block and buf and drop_last:  # an unterminated last line (rest never holds a newline)
                if log is not None:
                    logger.warning(
                        "%s:%d: dropping the unterminated last line (a cut-off file): %r", path, line, buf[:60]
                    )
                counted.unterminated_lines_dropped += 1
                return
            chunk, rest = buf[:cut], buf[cut:]
            text = decode_utf8(chunk, path, LAYOUT, offset=offset, line=line)
            if "\r" in text:  # CRLF line ends: the CR goes (a character test is much faster than a regex)
                text = text.replace("\r\n", "\n")
            if any(c in text for c in BREAKS_IN_LINE):  # rare: the chunk is rewritten only then
                if not warned:
                    found = BREAK_IN_LINE.search(text)
                    char = found.group()
                    name = BREAK_NAMES.get(char, f"U+{ord(char):04X}")
                    at = line + text.count("\n", 0, found.start())
                    logger.warning(
                        "%s:%d: a %s is read as a space inside the line (lines end at \\n or \\r\\n only); "
                        "the file may hold more",
                        path,
                        at,
                        name,
                    )
                    warned = True
                text = BREAK_IN_LINE.sub(" ", text)
            lines = text.split("\n")
            if not lines[-1]:  # the empty piece after the chunk's final newline (or an empty chunk)
                lines.pop()
            yield from keep_sentences(lines, counted)
            offset, line = offset + len(chunk), line + chunk.count(b"\n")
            if not block:
                return
