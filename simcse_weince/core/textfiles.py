"""Reading text files with errors that name the file, line and expected layout."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator, Sequence
from pathlib import Path


def decode_utf8(raw: bytes, path: Path, expected: str = "UTF-8 text", *, offset: int = 0, line: int = 1) -> str:
    """Decode UTF-8; on failure a ``ValueError`` names ``path:line``, the byte and ``expected``.

    ``raw`` may be a piece of the file made of whole lines (a streaming reader's chunk) starting at byte
    ``offset``, line ``line``: positions in errors are the file's. A BOM is dropped at the start of the file.
    """
    if offset == 0 and raw.startswith(codecs.BOM_UTF8):
        raw, offset = raw[len(codecs.BOM_UTF8) :], len(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad_line = line + raw[: err.start].count(b"\n")
        raise ValueError(
            f"{path}:{bad_line}: invalid UTF-8 at byte {offset + err.start} ({err.reason}); expected {expected}"
        ) from err


def read_lines(path: Path, layout_hint: str, latin1_fallback: bool = False) -> list[str]:
    """Lines of a text file (a UTF-8 BOM is dropped).

    Args:
        path: the file.
        layout_hint: what the file should look like, quoted in errors.
        latin1_fallback: decode as Latin-1 when the file is not UTF-8 (as SentEval does for its older
            releases) instead of raising.

    Raises:
        FileNotFoundError: the file is missing (names it and the expected layout).
        ValueError: not UTF-8 and no fallback (names file:line).
    """
    if not path.is_file():
        raise FileNotFoundError(f"missing file {path}; expected the SentEval layout: {layout_hint}")
    raw = path.read_bytes()
    try:
        return decode_utf8(raw, path).splitlines()
    except ValueError:
        if latin1_fallback:
            return raw.decode("latin-1").splitlines()
        raise


def json_lines(path: Path, what: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of every non-blank line of a JSON Lines file, decoded line by line.

    Raises:
        FileNotFoundError: the file is missing (names it and ``what`` it should hold).
        ValueError: a line that is not UTF-8, not JSON, or not a JSON object (names ``file:line`` and ``what``).
    """
    if not path.is_file():
        raise FileNotFoundError(f"missing file {path}; expected {what}")
    offset = 0
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            text = decode_utf8(raw, path, what, offset=offset, line=lineno)
            offset += len(raw)
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except ValueError as err:
                raise ValueError(f"{path}:{lineno}: not JSON ({err.msg}); expected {what}") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object ({what}), got {type(obj).__name__}")
            yield lineno, obj


SEPARATORS = {";": "semicolons", "\t": "tabs", ",": "commas", "|": "vertical bars"}


def delimiter_hint(header: Sequence[str] | None, splits_at: str) -> str:
    """A hint for a header error, when the header was read as one column that holds another separator (a CSV file
    written with ``;``, as spreadsheets in many locales save it, or a TSV file with commas); else ``""``.

    ``splits_at``: the separator the reader used, in words (``commas``, ``tabs``).
    """
    if header is None or len(header) != 1:
        return ""
    found = [name for sep, name in SEPARATORS.items() if sep in header[0] and name != splits_at]
    if not found:
        return ""
    return (
        f" (the header was read as one column holding {found[0]}, but this file's fields must be separated by "
        f"{splits_at}; save it so, or under the suffix of its separator: .csv for commas, .tsv for tabs)"
    )
