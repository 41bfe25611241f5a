"""Retrieval tasks: a folder in the BEIR layout, or one of the offline tasks constructed here from SentEval's files.

BEIR layout (what BEIR, MTEB and NanoBEIR downloads use)::

    corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."}   one JSON object per line (title optional)
    queries.jsonl       {"_id": "q1", "text": "..."}
    qrels/<split>.tsv   query-id TAB corpus-id TAB score                 (a header line is allowed)

A document is encoded as ``title + " " + text`` (just ``text`` without a title). A qrel with a score > 0 marks
the document relevant to the query (a pair listed more than once is relevant if any of its rows is; repeats are
counted); rows with score <= 0 are read and counted but mark nothing (the metrics are
the binary ones of sentence-transformers' ``InformationRetrievalEvaluator``). Queries without a relevant
document are not evaluated, as there. Every line is checked before anything is encoded: a line that is not a
JSON object, a missing or non-text ``_id``/``text``, a duplicate id, a qrel naming an unknown query or document,
an empty corpus: one ``ValueError`` naming ``file:line``.

The offline tasks (:data:`BUILTIN_TASKS`) are constructed by this project from SentEval's files, not published
benchmarks; each report says so. One rule builds all three from a file of sentence pairs with a judgement:

* queries: the distinct first sentences of the pairs judged positive (the two sentences differing);
* corpus: the distinct second sentences of *all* the file's pairs (the others are distractors), without any
  sentence that is also a query, so that no query can find itself;
* qrels: query -> the second sentence of each of its positive pairs (score 1); a query whose every positive was
  removed from the corpus is dropped (counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from simcse_weince.core.textfiles import json_lines, read_lines
from simcse_weince.evaluation.sts_data import SICK_FILES, load_stsb, normalise_sentence

QRELS_HINT = "TAB-separated query-id, corpus-id, score (BEIR's qrels/<split>.tsv)"


@dataclass
class RetrievalTask:
    """Queries, a corpus and the relevant documents of each query.

    Attributes:
        name: the task's name in reports.
        queries: evaluated query id -> text, in file order (each has at least one relevant document).
        corpus: document id -> the text encoded, in file order.
        relevant: query id -> ids of its relevant documents.
        source: where it was read from (the qrels file), or the files it was constructed from.
        split: the qrels split.
        construction: for a task constructed here, the rule (reports label it as not a published benchmark).
        counts: what reading skipped: queries without a relevant document, qrels with score <= 0, repeated qrels.
    """

    name: str
    queries: dict[str, str]
    corpus: dict[str, str]
    relevant: dict[str, set[str]]
    source: str
    split: str
    construction: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


def _text_field(obj: dict, key: str, path: Path, lineno: int, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if key == "_id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        got = "no such field" if key not in obj else f"{type(value).__name__} {value!r}"[:80]
        raise ValueError(f"{path}:{lineno}: expected a text {key!r}, got {got}")
    return value


def read_id_texts(path: Path, what: str, with_title: bool) -> dict[str, str]:
    """``_id`` -> text of a corpus or queries file (documents: ``title + " " + text``)."""
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for lineno, obj in json_lines(path, what):
        key = _text_field(obj, "_id", path, lineno)
        text = _text_field(obj, "text", path, lineno)
        if with_title:
            title = _text_field(obj, "title", path, lineno, required=False)
            text = f"{title} {text}".strip() if title else text
        if key in out:
            raise ValueError(
                f"{path}:{lineno}: duplicate _id {key!r} (first at line {first[key]}); expected unique ids"
            )
        out[key] = text
        first[key] = lineno
    if not out:
        raise ValueError(f"{path}: no entries; expected {what}")
    return out


QRELS_HEADER_NAMES = ({"query-id", "qid", "query"}, {"corpus-id", "doc-id", "docid", "cid", "corpus", "doc"},
                      {"score", "relevance", "label", "rel"})  # fmt: skip


def is_qrels_header(cols: list[str]) -> bool:
    """Whether a qrels line is a header by its names (BEIR's ``query-id, corpus-id, score`` and their usual
    variants, any case, ``_`` for ``-``): a first row whose score is text but whose ids are not names is a bad
    row, not a header to skip."""
    names = [c.strip().lower().replace("_", "-") for c in cols[:3]]
    return all(name in allowed for name, allowed in zip(names, QRELS_HEADER_NAMES, strict=True))


def read_qrels(
    path: Path, queries: dict[str, str], corpus: dict[str, str], counts: dict[str, int]
) -> dict[str, set[str]]:
    """Query id -> relevant document ids (score > 0) of a qrels TSV; a first line that is a header by its names
    (:func:`is_qrels_header`) is skipped, any other line without a numeric score refused."""
    relevant: dict[str, set[str]] = {}
    seen: set[tuple[str, str]] = set()
    counts.setdefault("qrels_not_relevant", 0)
    counts.setdefault("qrels_repeated", 0)
    for lineno, line in enumerate(read_lines(path, QRELS_HINT), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 3:
            raise ValueError(f"{path}:{lineno}: expected {QRELS_HINT}, got {len(cols)} column(s): {line[:80]!r}")
        qid, cid, raw_score = cols[0].strip(), cols[1].strip(), cols[2].strip()
        try:
            score = float(raw_score)
        except ValueError:
            if lineno == 1 and is_qrels_header(cols):  # BEIR's query-id TAB corpus-id TAB score
                continue
            header = " or a header line naming query-id, corpus-id, score" if lineno == 1 else ""
            raise ValueError(
                f"{path}:{lineno}: expected a numeric score in column 3{header}, got {raw_score!r}"
            ) from None
        if not math.isfinite(score):
            raise ValueError(f"{path}:{lineno}: expected a finite score in column 3, got {raw_score!r}")
        if qid not in queries:
            raise ValueError(f"{path}:{lineno}: query-id {qid!r} is not in queries.jsonl")
        if cid not in corpus:
            raise ValueError(f"{path}:{lineno}: corpus-id {cid!r} is not in corpus.jsonl")
        if (qid, cid) in seen:  # a pair listed again: relevant if any of its rows is (BEIR keeps the last row)
            counts["qrels_repeated"] += 1
        seen.add((qid, cid))
        if score > 0:
            relevant.setdefault(qid, set()).add(cid)
        else:
            counts["qrels_not_relevant"] += 1
    return relevant


def beir_paths(path: str | Path, split: str) -> tuple[Path, Path]:
    """(the folder, its qrels file) of ``path``: a BEIR folder (its ``qrels/<split>.tsv``) or a qrels file
    (``<folder>/qrels/<name>.tsv``, its split chosen by name)."""
    path = Path(path)
    if path.is_file():
        folder = path.parent.parent if path.parent.name == "qrels" else path.parent
        return folder, path
    if not path.is_dir():
        raise FileNotFoundError(
            f"no such retrieval folder {path}; expected a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) "
            "or a qrels file"
        )
    qrels = path / "qrels" / f"{split}.tsv"
    if not qrels.is_file():
        found = sorted(p.name for p in (path / "qrels").glob("*.tsv")) if (path / "qrels").is_dir() else []
        have = f"it has {', '.join(found)}" if found else "it has no qrels/*.tsv"
        raise FileNotFoundError(f"missing file {qrels} (the {split} split); {have}; name the qrels file to use one")
    return path, qrels


def load_beir_folder(path: str | Path, split: str = "test", name: str | None = None) -> RetrievalTask:
    """A BEIR-layout retrieval task (see the module's docstring); ``path`` may also name a qrels file."""
    folder, qrels_path = beir_paths(path, split)
    corpus = read_id_texts(folder / "corpus.jsonl", "one JSON object per line with '_id', 'text' (and 'title')", True)
    queries = read_id_texts(folder / "queries.jsonl", "one JSON object per line with '_id' and 'text'", False)
    counts: dict[str, int] = {}
    relevant = read_qrels(qrels_path, queries, corpus, counts)
    if not relevant:
        raise ValueError(f"{qrels_path}: no qrel with a score > 0; expected {QRELS_HINT}")
    evaluated = {q: t for q, t in queries.items() if q in relevant}
    counts["queries_without_relevant"] = len(queries) - len(evaluated)
    return RetrievalTask(
        name or folder.name, evaluated, corpus, relevant, str(qrels_path), qrels_path.stem, counts=counts
    )


# ---- the offline tasks constructed from SentEval's files ----------------------------------------------------

RULE = (
    "queries: the distinct first sentences of the {positive} pairs; corpus: the distinct second sentences of all "
    "{n_pairs} pairs of {file}, less any that is also a query; qrels: each query's {positive} second sentences"
)


def pairs_task(name: str, pairs: list[tuple[str, str, bool]], file: Path, split: str, positive: str) -> RetrievalTask:
    """A retrieval task from (first, second, is positive) sentence pairs, by the module's rule."""
    query_ids: dict[str, str] = {}
    for a, b, pos in pairs:
        if pos and a != b:
            query_ids.setdefault(a, f"q{len(query_ids):05d}")
    doc_ids: dict[str, str] = {}
    for _, b, _ in pairs:
        if b not in query_ids:
            doc_ids.setdefault(b, f"d{len(doc_ids):05d}")
    relevant: dict[str, set[str]] = {}
    lost = 0
    for a, b, pos in pairs:
        if pos and a != b:
            if b in doc_ids:
                relevant.setdefault(query_ids[a], set()).add(doc_ids[b])
            else:
                lost += 1
    queries = {qid: text for text, qid in query_ids.items() if qid in relevant}
    corpus = {did: text for text, did in doc_ids.items()}
    rule = RULE.format(positive=positive, n_pairs=len(pairs), file=file.name)
    counts = {"positives_removed_with_the_query_texts": lost, "queries_without_relevant": len(query_ids) - len(queries)}
    return RetrievalTask(name, queries, corpus, relevant, str(file), split, construction=rule, counts=counts)


def _stsb(root: Path, mode: str) -> RetrievalTask:
    split = "dev" if mode == "dev" else "test"
    sub = load_stsb(root, split).subsets[0]
    pairs = [(a, b, s >= 4.0) for a, b, s in zip(sub.sentences1, sub.sentences2, sub.scores, strict=True)]
    return pairs_task("STSB-paraphrase", pairs, root / "STS" / "STSBenchmark" / f"sts-{split}.csv", split, "gold >= 4")


def _table_pairs(path: Path, hint: str, cols: tuple[int, int, int], is_positive) -> list[tuple[str, str, bool]]:
    """(first, second, positive) of a TAB-separated file with a header line."""
    out = []
    for lineno, line in enumerate(read_lines(path, hint), start=1):
        if lineno == 1 or not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) <= max(cols):
            raise ValueError(f"{path}:{lineno}: expected at least {max(cols) + 1} TAB-separated columns ({hint})")
        out.append(
            (
                normalise_sentence(fields[cols[0]]),
                normalise_sentence(fields[cols[1]]),
                is_positive(fields[cols[2]].strip()),
            )
        )
    return out


def _mrpc(root: Path, mode: str) -> RetrievalTask:
    split = "train" if mode == "dev" else "test"  # MRPC has no dev split
    path = root / "MRPC" / f"msr_paraphrase_{split}.txt"
    hint = "header line, then TAB-separated Quality, #1 ID, #2 ID, #1 String, #2 String"
    pairs = _table_pairs(path, hint, (3, 4, 0), lambda q: q == "1")
    return pairs_task("MRPC-paraphrase", pairs, path, split, "Quality = 1 (paraphrase)")


def _sick(root: Path, mode: str) -> RetrievalTask:
    split = "dev" if mode == "dev" else "test"
    path = root / "SICK" / SICK_FILES[split]
    hint = "header line, then TAB-separated pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment"
    pairs = _table_pairs(path, hint, (1, 2, 4), lambda label: label == "ENTAILMENT")
    return pairs_task("SICK-entailment", pairs, path, split, "ENTAILMENT")


BUILTIN_TASKS = {"STSB-paraphrase": _stsb, "MRPC-paraphrase": _mrpc, "SICK-entailment": _sick}


def load_builtin_task(name: str, root: Path | None, mode: str) -> RetrievalTask:
    """One of :data:`BUILTIN_TASKS`, constructed from the SentEval folder ``root`` (test splits; in ``dev`` mode
    STS-B dev, SICK trial, MRPC train)."""
    if root is None:
        raise FileNotFoundError(
            f"{name} is constructed from SentEval's files; no SentEval folder is configured (--data_dir or "
            "$SENTEVAL_DATA)"
        )
    return BUILTIN_TASKS[name](Path(root), mode)
