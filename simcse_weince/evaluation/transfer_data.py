"""Loaders for the seven SentEval transfer tasks (SentEval ``data/downstream`` layout).

=========  ======================================================  ================================
task       files                                                   protocol
=========  ======================================================  ================================
MR         MR/rt-polarity.{pos,neg}                                10-fold CV, inner CV for C
CR         CR/custrev.{pos,neg}                                    10-fold CV, inner CV for C
SUBJ       SUBJ/subj.{objective,subjective}                        10-fold CV, inner CV for C
MPQA       MPQA/mpqa.{pos,neg}                                     10-fold CV, inner CV for C
SST2       SST/binary/sentiment-{train,dev,test} (text TAB label)  C chosen on dev, test
TREC       TREC/train_5500.label, TREC/TREC_10.label (LABEL:sub q)  CV on train for C, fixed test
MRPC       MRPC/msr_paraphrase_{train,test}.txt                    CV on train for C, fixed test
=========  ======================================================  ================================

Files are read as UTF-8 (a BOM is dropped) and fall back to Latin-1, as SentEval does for these releases;
a malformed row raises ``ValueError`` naming ``file:line`` and what was expected. Blank lines of the
single-sentence tasks are kept as empty samples exactly as SentEval keeps them (that is how CR has 3,775 and
MPQA 10,606 samples); their number is reported as ``empty_sentences``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simcse_weince.core.textfiles import read_lines

TRANSFER_TASKS: tuple[str, ...] = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
BINARY_FILES = {
    "MR": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("CR", "custrev.pos", "custrev.neg"),
    "SUBJ": ("SUBJ", "subj.objective", "subj.subjective"),  # SentEval's order and labels: objective = 1
    "MPQA": ("MPQA", "mpqa.pos", "mpqa.neg"),
}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


@dataclass
class Split:
    sentences: list[str]
    labels: np.ndarray
    sentences2: list[str] | None = None  # second sentence of a pair (MRPC)

    def __len__(self) -> int:
        return len(self.labels)


def senteval_order(split: Split) -> np.ndarray:
    """The order SentEval feeds a split to its classifier: a stable sort by (tokens, label) — (tokens of the
    first sentence, tokens of the second, label) for pairs. Its folds and mini-batches index that order."""
    if split.sentences2 is None:
        keys = [(len(s.split()), int(y)) for s, y in zip(split.sentences, split.labels, strict=True)]
    else:
        keys = [
            (len(a.split()), len(b.split()), int(y))
            for a, b, y in zip(split.sentences, split.sentences2, split.labels, strict=True)
        ]
    return np.asarray(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


@dataclass
class TransferTask:
    """``protocol``: ``cv`` (one pool, k-fold), ``dev`` (train/dev/test) or ``test`` (train + fixed test)."""

    name: str
    protocol: str
    splits: dict[str, Split]
    num_classes: int
    empty_sentences: int = 0  # blank lines kept as empty sentences, as SentEval does (CR: 4, MPQA: 3)


def _lines(path: Path, hint: str) -> list[str]:
    return read_lines(path, hint, latin1_fallback=True)


def _tokens(s: str) -> str:
    return " ".join(s.split())


def load_binary(root: Path, name: str) -> TransferTask:
    folder, pos, neg = BINARY_FILES[name]
    hint = f"{root}/{folder}/{pos} and {neg}, one sentence per line"
    sents, labels = [], []
    for fname, label in ((pos, 1), (neg, 0)):
        path = Path(root) / folder / fname
        for line in _lines(path, hint):
            # SentEval keeps blank lines as (empty) samples; so do we, to score the same sets, and count them.
            sents.append(_tokens(line))
            labels.append(label)
    empty = sum(1 for s in sents if not s)
    return TransferTask(name, "cv", {"all": Split(sents, np.asarray(labels))}, 2, empty)


def load_sst2(root: Path) -> TransferTask:
    splits = {}
    for split in ("train", "dev", "test"):
        path = Path(root) / "SST" / "binary" / f"sentiment-{split}"
        hint = f"{path}: 'sentence<TAB>label' with label 0 or 1"
        sents, labels = [], []
        for lineno, line in enumerate(_lines(path, hint), start=1):
            if not line.strip():
                continue
            text, sep, label = line.rstrip().rpartition("\t")
            if not sep or label.strip() not in ("0", "1"):
                raise ValueError(f"{path}:{lineno}: expected 'sentence<TAB>0|1', got {line[:80]!r}")
            sents.append(_tokens(text))
            labels.append(int(label))
        splits[split] = Split(sents, np.asarray(labels))
    return TransferTask("SST2", "dev", splits, 2)


def load_trec(root: Path) -> TransferTask:
    splits = {}
    for split, fname in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        path = Path(root) / "TREC" / fname
        hint = f"{path}: 'COARSE:fine question' per line, COARSE in {TREC_CLASSES}"
        sents, labels = [], []
        for lineno, line in enumerate(_lines(path, hint), start=1):
            if not line.strip():
                continue
            target, sep, rest = line.strip().partition(":")
            question = rest.split(" ", 1)
            if not sep or target not in TREC_CLASSES or len(question) != 2:
                raise ValueError(
                    f"{path}:{lineno}: expected 'COARSE:fine question' with COARSE in {TREC_CLASSES}, got {line[:80]!r}"
                )
            sents.append(_tokens(question[1]))
            labels.append(TREC_CLASSES.index(target))
        splits[split] = Split(sents, np.asarray(labels))
    return TransferTask("TREC", "test", splits, len(TREC_CLASSES))


def load_mrpc(root: Path) -> TransferTask:
    splits = {}
    for split in ("train", "test"):
        path = Path(root) / "MRPC" / f"msr_paraphrase_{split}.txt"
        hint = f"{path}: header, then 'Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String'"
        s1, s2, labels = [], [], []
        for lineno, line in enumerate(_lines(path, hint), start=1):
            if lineno == 1 or not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 5 or cols[0] not in ("0", "1"):
                raise ValueError(f"{path}:{lineno}: expected 5 TAB-separated columns starting with 0|1 ({hint})")
            s1.append(_tokens(cols[3]))
            s2.append(_tokens(cols[4]))
            labels.append(int(cols[0]))
        splits[split] = Split(s1, np.asarray(labels), s2)
    return TransferTask("MRPC", "test", splits, 2)


def load_transfer_task(name: str, root: Path | None) -> TransferTask:
    if root is None:
        raise FileNotFoundError(
            f"no SentEval data folder configured for {name}: pass --data_dir, or set $SENTEVAL_DATA or "
            "$SIMCSE_WEINCE_DATA (SentEval's get_transfer_data.bash builds the expected data/downstream layout)"
        )
    root = Path(root)
    if name in BINARY_FILES:
        return load_binary(root, name)
    loaders = {"SST2": load_sst2, "TREC": load_trec, "MRPC": load_mrpc}
    if name not in loaders:
        raise ValueError(f"unknown transfer task {name!r}; expected one of {TRANSFER_TASKS}")
    return loaders[name](root)
