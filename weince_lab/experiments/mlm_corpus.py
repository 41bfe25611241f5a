"""The text of the MLM start (issue 44): one corpus, one sentence per line, for the masked-language-model
pretraining and the unsupervised SimCSE run that follows it, with no sentence that any evaluation scores.

    .venv/bin/python -m weince_lab.experiments.mlm_corpus --out outputs/mlm_corpus

Sources (``../shared/data``, or ``$SIMCSE_WEINCE_DATA``), in this order:

* the Wikipedia sentences: ``wiki1m_sample`` (its truncated last line dropped) and
  ``wikipedia_en_gensim_sample/sentences.txt``;
* the training splits that no evaluation of this project scores: STS-B train, SICK train, SST-2 train, TREC
  train, MRPC train (both sentences of a pair), read with the SentEval readers of :mod:`simcse_weince.evaluation`.

Left out whole: STS12–16, STS-B dev/test, SICK trial/test, SST-2 dev/test, TREC test, MRPC test, and the
transfer tasks scored by cross-validation over all their data: MR, CR, SUBJ, MPQA (:data:`EVALUATION_SPLITS`).
Every sentence of those splits is also removed from the corpus wherever it appears (STS-B train is drawn from
STS12–16, SICK reuses sentences across its splits, SST-2 and MR share Rotten Tomatoes snippets): two sentences
are the same when their :func:`match_key` is — their letters and digits, Unicode-normalised (NFKC) and case-folded,
so that case, whitespace, punctuation and quote style are ignored (the SentEval files are tokenised, ``it 's``,
```` ``quoted'' ````, the Wikipedia text is not; SICK's train and test copies of a sentence differ by a final
period). Repeated sentences (the same key) are kept once (the first).

``--match case_and_whitespace`` keeps the key the stored MLM runs were built with (case and whitespace ignored
only: corpus digest ``b66eae011566ee371ccf6eb68fbbb4d6``, 103,057 sentences), which let evaluation sentences through
in another punctuation (``experiments/results/mlm_corpus_keys/``: the two keys' manifests).

Writes ``corpus.txt`` and ``manifest.json`` (sources, counts, the exclusions, the corpus's digest).
"""

from __future__ import annotations

import argparse
import json
import logging
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path

from simcse_weince.core.digests import file_digest
from simcse_weince.core.paths import data_root, senteval_root
from simcse_weince.evaluation.sts_data import STS_YEARS, STSTask, load_sickr, load_sts_year, load_stsb
from simcse_weince.evaluation.transfer_data import load_binary, load_mrpc, load_sst2, load_trec
from simcse_weince.text.sources.lines import iter_sentences

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.txt"
MANIFEST_FILE = "manifest.json"
DEFAULT_OUT = "outputs/mlm_corpus"
WIKI_FILES = ("wiki1m_sample/wiki1m_for_simcse.head1280000bytes.txt", "wikipedia_en_gensim_sample/sentences.txt")


def match_key(sentence: str) -> str:
    """What two sentences must share to count as the same: their letters and digits (``str.isalnum``), in order,
    after NFKC normalisation and case folding. Case, whitespace, punctuation and quote style do not count: ``it 's``,
    ``It's`` and ``“it’s”`` have one key; a sentence of punctuation only has the empty key."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", sentence).casefold() if ch.isalnum())


def case_and_whitespace_key(sentence: str) -> str:
    """The earlier, looser key (the stored MLM runs' corpus): the text lower-cased, all whitespace removed."""
    return "".join(sentence.lower().split())


MATCHES: dict[str, Callable[[str], str]] = {"strict": match_key, "case_and_whitespace": case_and_whitespace_key}
MATCH_WORDS = {
    "strict": "a sentence is dropped when its letters and digits (NFKC, case-folded; case, whitespace, punctuation "
    "and quote style ignored) equal a sentence's of an excluded split; repeated sentences (same key) are kept once",
    "case_and_whitespace": "a sentence is dropped when, lower-cased with all whitespace removed, it equals a sentence "
    "of an excluded split; repeated sentences (same key) are kept once",
}


def _pairs(task: STSTask) -> list[str]:
    return [s for sub in task.subsets for s in sub.sentences1 + sub.sentences2]


def training_sources(data: Path, senteval: Path) -> dict[str, Callable[[], Iterable[str]]]:
    """Source name -> a reader of its sentences, in corpus order."""
    return {
        "wiki1m_sample": lambda: iter_sentences(data / WIKI_FILES[0], drop_unterminated_last_line=True),
        "wikipedia_en_gensim_sample": lambda: iter_sentences(data / WIKI_FILES[1]),
        "STS-B train": lambda: _pairs(load_stsb(senteval, "train")),
        "SICK train": lambda: _pairs(load_sickr(senteval, "train")),
        "SST-2 train": lambda: load_sst2(senteval).splits["train"].sentences,
        "TREC train": lambda: load_trec(senteval).splits["train"].sentences,
        "MRPC train": lambda: _mrpc(senteval, "train"),
    }


def _mrpc(senteval: Path, split: str) -> list[str]:
    s = load_mrpc(senteval).splits[split]
    return list(s.sentences) + list(s.sentences2 or [])


def evaluation_splits(senteval: Path) -> dict[str, Callable[[], Iterable[str]]]:
    """Every split an evaluation of this project scores (STS, SentEval transfer): name -> its sentences."""
    out: dict[str, Callable[[], Iterable[str]]] = {
        y: (lambda y=y: _pairs(load_sts_year(senteval, y))) for y in STS_YEARS
    }
    out["STS-B dev"] = lambda: _pairs(load_stsb(senteval, "dev"))
    out["STS-B test"] = lambda: _pairs(load_stsb(senteval, "test"))
    out["SICK trial"] = lambda: _pairs(load_sickr(senteval, "dev"))
    out["SICK test"] = lambda: _pairs(load_sickr(senteval, "test"))
    out["SST-2 dev"] = lambda: load_sst2(senteval).splits["dev"].sentences
    out["SST-2 test"] = lambda: load_sst2(senteval).splits["test"].sentences
    out["TREC test"] = lambda: load_trec(senteval).splits["test"].sentences
    out["MRPC test"] = lambda: _mrpc(senteval, "test")
    for name in ("MR", "CR", "SUBJ", "MPQA"):  # cross-validated over all their data: every sentence is scored
        out[name] = lambda name=name: load_binary(senteval, name).splits["all"].sentences
    return out


EVALUATION_SPLITS = (
    *STS_YEARS,
    "STS-B dev",
    "STS-B test",
    "SICK trial",
    "SICK test",
    "SST-2 dev",
    "SST-2 test",
    "TREC test",
    "MRPC test",
    "MR",
    "CR",
    "SUBJ",
    "MPQA",
)


def evaluation_keys(senteval: Path, key: Callable[[str], str] = match_key) -> tuple[set[str], dict[str, int]]:
    """The ``key`` (:func:`match_key`) of every sentence of every evaluation split, and the sentences per split."""
    keys: set[str] = set()
    sizes = {}
    for name, read in evaluation_splits(senteval).items():
        sentences = [s for s in read() if s.strip()]  # CR and MPQA keep blank lines as empty samples
        sizes[name] = len(sentences)
        keys.update(key(s) for s in sentences)
    return keys, sizes


def build_corpus(out: Path, data: Path | None = None, senteval: Path | None = None, match: str = "strict") -> dict:
    """Write ``out/corpus.txt`` and ``out/manifest.json``; the manifest. ``match`` names the key of :data:`MATCHES`.

    Raises:
        FileNotFoundError: no shared data folder, or a source file missing (named by its reader).
    """
    data = Path(data) if data else data_root()
    if data is None:
        raise FileNotFoundError("no shared data folder: set $SIMCSE_WEINCE_DATA to the folder holding senteval/, ...")
    senteval = Path(senteval) if senteval else senteval_root() or data / "senteval" / "downstream"
    key_of = MATCHES[match]
    excluded, eval_sizes = evaluation_keys(senteval, key_of)
    seen: set[str] = set()
    counts = {}
    out.mkdir(parents=True, exist_ok=True)
    partial = out / f"{CORPUS_FILE}.tmp"
    with partial.open("w", encoding="utf-8") as f:
        for name, read in training_sources(data, senteval).items():
            c = {"read": 0, "kept": 0, "in_an_evaluation_split": 0, "repeated": 0}
            for raw in read():
                s = " ".join(raw.split())  # one line per sentence, single spaces
                if not s:
                    continue
                c["read"] += 1
                key = key_of(s)
                if key in excluded:
                    c["in_an_evaluation_split"] += 1
                elif key in seen:
                    c["repeated"] += 1
                else:
                    seen.add(key)
                    f.write(s + "\n")
                    c["kept"] += 1
            counts[name] = c
            logger.info("%s: %s", name, c)
    partial.replace(out / CORPUS_FILE)
    manifest = {
        "corpus": CORPUS_FILE,
        "sentences": len(seen),
        "digest": file_digest(out / CORPUS_FILE),
        "sources": counts,
        "source_files": {
            "wiki1m_sample": WIKI_FILES[0] + " (truncated last line dropped)",
            "wikipedia_en_gensim_sample": WIKI_FILES[1],
            "STS-B train": "senteval/downstream/STS/STSBenchmark/sts-train.csv (both sentences)",
            "SICK train": "senteval/downstream/SICK/SICK_train.txt (both sentences)",
            "SST-2 train": "senteval/downstream/SST/binary/sentiment-train",
            "TREC train": "senteval/downstream/TREC/train_5500.label",
            "MRPC train": "senteval/downstream/MRPC/msr_paraphrase_train.txt (both sentences)",
        },
        "excluded_splits": eval_sizes,
        "match": MATCH_WORDS[match],
        "match_key": match,
        "data_root": str(data),
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"folder for {CORPUS_FILE} and {MANIFEST_FILE}")
    ap.add_argument(
        "--data_dir", default=None, help="the shared data folder (default: $SIMCSE_WEINCE_DATA, ../shared/data)"
    )
    ap.add_argument(
        "--match",
        choices=sorted(MATCHES),
        default="strict",
        help="when two sentences are the same (default strict: letters and digits only; case_and_whitespace: the "
        "key of the stored MLM runs' corpus)",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    data = Path(args.data_dir) if args.data_dir else None
    senteval = data / "senteval" / "downstream" if data else None
    m = build_corpus(Path(args.out), data, senteval, args.match)
    print(f"{m['sentences']:,} sentences in {Path(args.out) / CORPUS_FILE}; manifest {Path(args.out) / MANIFEST_FILE}")
    for name, c in m["sources"].items():
        print(f"  {name}: {c}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
