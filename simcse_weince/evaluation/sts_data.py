"""Loaders for the STS benchmarks in the SentEval folder layout, and from the Hugging Face Hub.

SentEval layout (``data/downstream``)::

    STS/STS12-en-test/STS.input.<subset>.txt   sentence1 TAB sentence2      (one pair per line)
    STS/STS12-en-test/STS.gs.<subset>.txt      gold score, or empty (pair not scored)
    STS/STSBenchmark/sts-{train,dev,test}.csv  genre TAB file TAB year TAB id TAB score TAB s1 TAB s2 [TAB ...]
    SICK/SICK_{train,trial,test_annotated}.txt pair_ID TAB sentence_A TAB sentence_B TAB relatedness TAB ...

Pairs with an empty gold line are skipped (and counted); any other malformed row raises ``ValueError``
naming ``file:line`` and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simcse_weince.core.file_errors import refuse_folder
from simcse_weince.core.textfiles import delimiter_hint, json_lines, read_lines

STS_YEARS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


@dataclass
class STSSubset:
    """Scored sentence pairs of one subset; ``skipped`` counts pairs without a gold score."""

    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: list[float]
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.scores)


@dataclass
class STSTask:
    name: str
    subsets: list[STSSubset] = field(default_factory=list)

    @property
    def num_pairs(self) -> int:
        return sum(len(s) for s in self.subsets)

    @property
    def skipped(self) -> int:
        return sum(s.skipped for s in self.subsets)

    def first_pairs(self, n: int | None) -> STSTask:
        """The task cut to the first ``n`` pairs of its first subset (``None``: the whole task), for quick
        scores during training (``eval_max_pairs``)."""
        if n is None:
            return self
        sub = self.subsets[0]
        return STSTask(self.name, [STSSubset(sub.name, sub.sentences1[:n], sub.sentences2[:n], sub.scores[:n])])


def normalise_sentence(sentence: str) -> str:
    """Whitespace runs as single spaces: SentEval splits on whitespace and the SimCSE batcher joins with spaces."""
    return " ".join(sentence.split())


def _score(value: str, path: Path, lineno: int, what: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{path}:{lineno}: expected a numeric {what}, got {value!r}") from None


def load_sts_year(root: Path, year: str) -> STSTask:
    """STS12–16 from ``root/STS/<year>-en-test``, one :class:`STSSubset` per SentEval subset."""
    if year not in STS_YEARS:
        raise ValueError(f"unknown STS year {year!r}; expected one of {sorted(STS_YEARS)}")
    folder = Path(root) / "STS" / f"{year}-en-test"
    hint = f"{folder}/STS.input.<subset>.txt and STS.gs.<subset>.txt for subsets {', '.join(STS_YEARS[year])}"
    if not folder.is_dir():
        raise FileNotFoundError(f"missing task folder {folder}; expected {hint}")
    task = STSTask(year)
    for subset in STS_YEARS[year]:
        inp_path, gs_path = folder / f"STS.input.{subset}.txt", folder / f"STS.gs.{subset}.txt"
        inputs, golds = read_lines(inp_path, hint), read_lines(gs_path, hint)
        if len(inputs) != len(golds):
            raise ValueError(
                f"{inp_path} has {len(inputs)} lines but {gs_path} has {len(golds)}; expected one gold line per pair"
            )
        s1, s2, sc, skipped = [], [], [], 0
        for lineno, (pair, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
            if gold.strip() == "":
                skipped += 1
                continue
            cols = pair.split("\t")
            if len(cols) < 2:
                raise ValueError(f"{inp_path}:{lineno}: expected 'sentence1<TAB>sentence2', got {pair[:80]!r}")
            s1.append(normalise_sentence(cols[0]))
            s2.append(normalise_sentence(cols[1]))
            sc.append(_score(gold.strip(), gs_path, lineno, "gold score"))
        task.subsets.append(STSSubset(subset, s1, s2, sc, skipped))
    return task


def _pair_table(path: Path, hint: str, columns: tuple[int, int, int], header: bool) -> STSSubset:
    """Sentence pairs from a TAB-separated table: ``columns`` = (sentence 1, sentence 2, score) indices."""
    i1, i2, isc = columns
    need = max(columns) + 1
    s1, s2, sc = [], [], []
    for lineno, line in enumerate(read_lines(path, hint), start=1):
        if (header and lineno == 1) or not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < need:
            raise ValueError(
                f"{path}:{lineno}: expected at least {need} TAB-separated columns ({hint}), got {len(cols)}"
            )
        s1.append(normalise_sentence(cols[i1]))
        s2.append(normalise_sentence(cols[i2]))
        sc.append(_score(cols[isc], path, lineno, f"score in column {isc + 1}"))
    return STSSubset(path.stem, s1, s2, sc)


def load_stsb(root: Path, split: str) -> STSTask:
    """STS Benchmark ``split`` (train/dev/test) from ``root/STS/STSBenchmark/sts-<split>.csv``."""
    if split not in ("train", "dev", "test"):
        raise ValueError(f"STS-B split must be train, dev or test, got {split!r}")
    path = Path(root) / "STS" / "STSBenchmark" / f"sts-{split}.csv"
    hint = "TAB-separated genre, file, year, id, score, sentence1, sentence2"
    sub = _pair_table(path, hint, (5, 6, 4), header=False)
    sub.name = split
    return STSTask("STSBenchmark", [sub])


def load_sickr(root: Path, split: str) -> STSTask:
    """SICK relatedness ``split`` (train/dev/test) from ``root/SICK``."""
    if split not in SICK_FILES:
        raise ValueError(f"SICK split must be one of {sorted(SICK_FILES)}, got {split!r}")
    path = Path(root) / "SICK" / SICK_FILES[split]
    hint = "header line, then TAB-separated pair_ID, sentence_A, sentence_B, relatedness_score, ..."
    sub = _pair_table(path, hint, (1, 2, 3), header=True)
    sub.name = split
    return STSTask("SICKRelatedness", [sub])


# Hub copies (MTEB) of the STS test sets, for users without the SentEval files. They carry no subset
# column, so a year is one subset there: "all" is the same pooled correlation, "mean"/"wmean" are not
# available per subset.
HUB_STS = {
    "STS12": "mteb/sts12-sts",
    "STS13": "mteb/sts13-sts",
    "STS14": "mteb/sts14-sts",
    "STS15": "mteb/sts15-sts",
    "STS16": "mteb/sts16-sts",
    "STSBenchmark": "mteb/stsbenchmark-sts",
    "SICKRelatedness": "mteb/sickr-sts",
}
HUB_SPLITS = {"dev": "validation", "train": "train", "test": "test"}


def load_sts_hub(name: str, split: str = "test") -> STSTask:
    """An STS task from its Hugging Face Hub copy (``HUB_STS``); needs network access or a local HF cache."""
    from datasets import load_dataset

    if name not in HUB_STS:
        raise ValueError(f"no Hub copy known for {name!r}; expected one of {sorted(HUB_STS)}")
    ds = load_dataset(HUB_STS[name], split=HUB_SPLITS.get(split, split))
    missing = {"sentence1", "sentence2", "score"} - set(ds.column_names)
    if missing:
        raise ValueError(f"Hub dataset {HUB_STS[name]} lacks columns {sorted(missing)}; has {ds.column_names}")
    sub = STSSubset(
        split,
        [normalise_sentence(s) for s in ds["sentence1"]],
        [normalise_sentence(s) for s in ds["sentence2"]],
        [float(x) for x in ds["score"]],
    )
    return STSTask(name, [sub])


def load_sts_task(name: str, root: Path | None, split: str = "test") -> STSTask:
    """Load STS12–16, ``STSBenchmark`` or ``SICKRelatedness`` from a SentEval folder, or from the Hub when
    ``root`` is ``None``."""
    if root is None:  # no local SentEval folder configured: the Hub copy
        return load_sts_hub(name, split)
    if name in STS_YEARS:
        return load_sts_year(root, name)
    if name == "STSBenchmark":
        return load_stsb(root, split)
    if name == "SICKRelatedness":
        return load_sickr(root, split)
    raise ValueError(f"unknown STS task {name!r}; expected one of {[*STS_YEARS, 'STSBenchmark', 'SICKRelatedness']}")


STS_FILE_COLUMNS = ("sentence1", "sentence2", "score")
STS_FILE_SUFFIXES = (".csv", ".tsv", ".jsonl")


def _sts_rows(path: Path) -> list[tuple[int, dict]]:
    """(line, row) of a CSV/TSV file with a header line, or of a JSON Lines file."""
    import csv

    if path.suffix.lower() == ".jsonl":
        return list(json_lines(path, f"a JSON object with {', '.join(STS_FILE_COLUMNS)}"))
    text = "\n".join(read_lines(path, f"a header line naming {', '.join(STS_FILE_COLUMNS)}, then one pair per line"))
    tsv = path.suffix.lower() == ".tsv"  # TAB-separated, no quoting (sentences keep their quotes)
    style = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if tsv else {"dialect": "excel", "strict": True}
    reader = csv.DictReader(text.splitlines(), **style)
    try:
        missing = [c for c in STS_FILE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            hint = delimiter_hint(reader.fieldnames, "tabs" if tsv else "commas")
            raise ValueError(
                f"{path}:1: the header lacks {', '.join(missing)}; expected columns {', '.join(STS_FILE_COLUMNS)}"
                + hint
            )
        return [(reader.line_num, row) for row in reader]
    except csv.Error as err:
        raise ValueError(f"{path}:{reader.line_num}: {err}; expected {'TSV' if tsv else 'CSV'} rows") from None


def load_sts_file(path: str | Path) -> STSTask:
    """An STS task from a user's file of scored sentence pairs: CSV (quoted as Excel writes it) or TSV (no
    quoting) with a header naming ``sentence1``,
    ``sentence2`` and ``score`` (other columns ignored), or JSON Lines objects with those keys. One subset, named
    after the file; the scores may be on any scale (Spearman is rank-based)."""
    import math

    path = Path(path)
    refuse_folder(path, "STS file", f"a file ({', '.join(STS_FILE_SUFFIXES)})")
    if path.suffix.lower() not in STS_FILE_SUFFIXES:
        raise ValueError(
            f"{path}: unsupported suffix {path.suffix or '(none)'!r}; expected {', '.join(STS_FILE_SUFFIXES)}"
        )
    s1, s2, sc = [], [], []
    for lineno, row in _sts_rows(path):
        for key in ("sentence1", "sentence2"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise ValueError(f"{path}:{lineno}: expected a non-empty text {key!r}, got {row.get(key)!r}")
        value = row.get("score")
        try:
            score = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError(f"{path}:{lineno}: expected a numeric score, got {value!r}") from None
        if not math.isfinite(score):
            raise ValueError(f"{path}:{lineno}: expected a finite score, got {value!r}")
        s1.append(normalise_sentence(row["sentence1"]))
        s2.append(normalise_sentence(row["sentence2"]))
        sc.append(score)
    if len(sc) < 2:
        raise ValueError(f"{path}: {len(sc)} scored pair(s); expected at least 2 for a correlation")
    return STSTask(path.stem, [STSSubset(path.stem, s1, s2, sc)])
