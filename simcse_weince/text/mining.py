"""Hard negatives for supervised SimCSE, mined from (anchor, positive) pairs by a sentence encoder.

The mining is sentence-transformers' ``mine_hard_negatives`` (one miner, not a second one here): each distinct
anchor ``a`` is scored against the corpus of distinct positives ``C`` with the encoder's similarity ``s`` (cosine
for most models), its own positives are left out, and its negatives are taken among its candidates ranked
``range_min .. range_max - 1`` that pass the guards against false negatives:

    s(a, n) <= s(a, p) - absolute_margin            (a negative clearly below the positive)
    s(a, n) <= s(a, p) - |s(a, p)| * relative_margin
    min_score <= s(a, n) <= max_score

where ``s(a, p)`` is the lowest score of the anchor's positives (an anchor with several positives is held to its
hardest one). ``sampling_strategy`` ``top`` keeps the ``num_negatives`` highest-scoring candidates that pass,
``random`` draws them among those that pass (Python's ``random``, seeded by ``seed``).

The rows come back in the order of the pairs read, one row ``(anchor, positive, negative)`` per negative (the
triplet layout: with ``num_negatives > 1`` a pair gives up to that many rows); a pair whose candidates all fail
the guards gives no row and is listed in :attr:`MinedNegatives.unmined`, never dropped silently. A pair read
twice gives its rows twice. Negatives come from the positives' column only.

The pairs are read by the training reader (:func:`~simcse_weince.text.sources.open_sources`): column
files of every format it reads, or a Hub dataset, with the same checks and one-line errors naming ``file:line``.
"""

from __future__ import annotations

import importlib.util
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from simcse_weince.core import checks, memory
from simcse_weince.text.columns import ReadOptions
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import open_sources
from simcse_weince.text.token_cache.store import PART_BYTES, PART_ROWS

logger = logging.getLogger(__name__)

SAMPLING_STRATEGIES = ("top", "random")
DEFAULT_COLUMNS = ("sent0", "sent1")  # SimCSE's anchor and positive


_AT_LEAST_ONE = checks.integer_at_least(1)
_SCORE_GUARDS = ("absolute_margin", "relative_margin", "max_score", "min_score")  # finite when set; None: off


@dataclass(frozen=True)
class MiningSettings:
    """The miner's settings (the arguments of ``mine_hard_negatives`` of the same names), checked when made.

    Attributes:
        num_negatives: negatives per anchor at most (>= 1).
        range_min: the candidates ranked above it (0-based) are skipped (>= 0).
        range_max: the candidates ranked from it on are not considered (None: sentence-transformers' default,
            ``range_min + num_negatives + positives``, ten times the negatives with a margin or a max score).
        absolute_margin, relative_margin: the margins below the positive's score (finite, >= 0; None: off).
        max_score, min_score: the bounds on a negative's score (finite; None: off).
        sampling_strategy: ``top`` or ``random``.
        batch_size: sentences per encoding batch (>= 1).
        use_faiss: search with a FAISS flat index (the ``faiss`` package) instead of exact matrix products.
        seed: the seed of ``random`` sampling.
    """

    num_negatives: int = field(default=1, metadata=checks.setting(_AT_LEAST_ONE, "Negatives per anchor at most."))
    range_min: int = field(
        default=0, metadata=checks.setting(checks.integer_at_least(0), "Candidates ranked above it are skipped.")
    )
    range_max: int | None = field(
        default=None,
        metadata=checks.setting(
            checks.optional(_AT_LEAST_ONE, "None (the miner's default)"), "Candidates ranked from it on are not used."
        ),
    )
    absolute_margin: float | None = None
    relative_margin: float | None = None
    max_score: float | None = None
    min_score: float | None = None
    sampling_strategy: str = field(
        default="top", metadata=checks.setting(checks.one_of(SAMPLING_STRATEGIES), "top or random.")
    )
    batch_size: int = field(default=32, metadata=checks.setting(_AT_LEAST_ONE, "Sentences per encoding batch."))
    use_faiss: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raises ValueError naming the setting, its value and what was expected (:mod:`simcse_weince.core.checks`)."""
        checks.check_fields(self)
        for name in _SCORE_GUARDS:  # the wording "<name> must be a finite number", not "None or ...": pinned
            value = getattr(self, name)
            if value is None:
                continue
            checks.finite(name, value)
            if name.endswith("_margin") and value < 0:
                checks.fail(name, ">= 0 (a negative margin would keep negatives scored above the positive)", value)
        if self.range_max is not None:
            if self.range_min >= self.range_max:
                raise ValueError(
                    f"range_min ({self.range_min}) must be smaller than range_max ({self.range_max}): the candidates "
                    "ranked range_min .. range_max - 1 are considered"
                )
            if self.num_negatives > self.range_max - self.range_min:
                raise ValueError(
                    f"num_negatives {self.num_negatives} does not fit in the {self.range_max - self.range_min} "
                    f"candidates ranked range_min={self.range_min} .. range_max={self.range_max} - 1; expected "
                    "num_negatives <= range_max - range_min"
                )
        if self.min_score is not None and self.max_score is not None and self.min_score > self.max_score:
            raise ValueError(f"min_score ({self.min_score}) must not exceed max_score ({self.max_score})")
        if self.use_faiss and not faiss_installed():
            raise ValueError(
                "use_faiss needs the faiss package (pip install faiss-cpu, or faiss-gpu); it is not installed"
            )

    def miner_kwargs(self) -> dict:
        """The keyword arguments of ``mine_hard_negatives`` these settings stand for (``seed`` excepted)."""
        kwargs = asdict(self)
        del kwargs["seed"]
        return kwargs

    def to_dict(self) -> dict:
        return asdict(self)


def faiss_installed() -> bool:
    """Whether the ``faiss`` package (faiss-cpu or faiss-gpu) can be imported, without importing it."""
    return importlib.util.find_spec("faiss") is not None


def anchor_positive_columns(values: Sequence[str] | None) -> tuple[str, str]:
    """The (anchor, positive) column names from ``values``: names, each possibly comma-joined (``["a,b"]``,
    ``["a", "b"]``); ``None`` is SimCSE's ``sent0``, ``sent1``.

    Raises:
        ValueError: other than two names, or a blank one.
    """
    if values is None:
        return DEFAULT_COLUMNS
    names = [n.strip() for v in values for n in str(v).split(",")]
    if len(names) != 2 or not all(names):
        raise ValueError(
            f"--columns: expected two column names, the anchor's and the positive's (e.g. sent0,sent1), got "
            f"{','.join(values)!r}"
        )
    return names[0], names[1]


@dataclass
class Pairs:
    """The (anchor, positive) pairs read, in order, with where they came from and what reading counted."""

    anchors: list[str]
    positives: list[str]
    columns: tuple[str, str]
    sources: list[str]
    stats: TextStats = field(default_factory=TextStats)

    def __len__(self) -> int:
        return len(self.anchors)


def read_pairs(
    files: Sequence[str] | None,
    columns: tuple[str, str] = DEFAULT_COLUMNS,
    hub_dataset: str | None = None,
    hub_data_file: str | None = None,
    skip_bad_rows: bool = False,
) -> Pairs:
    """Every (anchor, positive) row of the local ``files`` (else of the Hub dataset), read by the training reader
    with ``text_columns = columns``: each source scanned (its errors and counts), then read part by part.

    Raises:
        FileNotFoundError, IsADirectoryError, ValueError: one line naming the file (and line or row) and what was
            expected: a missing file, a missing column, a bad row (unless ``skip_bad_rows``), no rows.
    """
    options = ReadOptions.of(list(columns), skip_bad_rows=skip_bad_rows)
    sources = open_sources(files, options, hub_dataset=hub_dataset, hub_data_file=hub_data_file)
    stats = TextStats(text_columns=list(columns))
    anchors: list[str] = []
    positives: list[str] = []
    for source in sources:
        for part in source.scan(stats, PART_BYTES, PART_ROWS):
            a, p = source.read(part, stats)
            anchors += a
            positives += p
    if not anchors:  # a Hub dataset counts while reading; a file without rows already failed its scan
        raise ValueError(f"{', '.join(s.where for s in sources)}: no rows; expected pairs in {', '.join(columns)}")
    return Pairs(anchors, positives, columns, [s.where for s in sources], stats)


@dataclass
class MinedNegatives:
    """The mined rows, in the order of the pairs, and the scores behind them.

    Attributes:
        rows: ``(anchor, positive, negative)``, one per negative.
        row_pair: (R,) the index of each row's pair in the pairs read.
        negative_scores: (R,) ``s(anchor, negative)`` of each row.
        positive_scores: (P,) ``s(anchor, positive)`` of every pair read.
        unmined: the indices of the pairs without a negative, in order.
        mined_triplets: the distinct triplets the miner returned (``rows`` repeats those of a pair read twice).
    """

    rows: list[tuple[str, str, str]]
    row_pair: np.ndarray
    negative_scores: np.ndarray
    positive_scores: np.ndarray
    unmined: list[int]
    mined_triplets: int

    def counts(self, pairs: Pairs, num_negatives: int) -> dict[str, int]:
        """What the mining did: pairs read, distinct anchors, triplets mined, rows, pairs without a negative (and
        with fewer than ``num_negatives``), negatives that are their anchor's own text."""
        per_pair = np.bincount(self.row_pair, minlength=len(pairs)) if len(pairs) else np.zeros(0, dtype=int)
        return {
            "pairs_read": len(pairs),
            "anchors": len(set(pairs.anchors)),
            "negatives_mined": self.mined_triplets,
            "rows_written": len(self.rows),
            "pairs_without_negative": len(self.unmined),
            "pairs_with_fewer_negatives": int(((per_pair > 0) & (per_pair < num_negatives)).sum()),
            "negatives_equal_to_anchor": sum(a == n for a, _, n in self.rows),
        }


# Bytes per cell of the miner's (anchors, range_max + positives) tables: float32 scores and int64 indices, each
# copied by the padding and the final top-k, and the boolean masks of the guards.
_TABLE_BYTES = 3 * (4 + 8) + 4
# Bytes per (anchor, candidate) of one query chunk's full similarity block (float32, with its top-k copy).
_BLOCK_BYTES = 8
_QUERY_CHUNK = 16384  # mine_hard_negatives' faiss_batch_size: the anchors scored at once
# Bytes per sentence of one encoding batch (token states of every layer kept for a long sentence, float32), and
# per sentence kept encoded (up to 1024 float32 dimensions, the texts and their tokens).
_ENCODING_BYTES = 4 << 20
_EMBEDDING_BYTES = 8 << 10


@dataclass(frozen=True)
class MiningPlan:
    """What the miner is asked for on these pairs: the settings fitted to the candidates that exist.

    Attributes:
        candidates: the most candidates one anchor has (the distinct positives that are not its own).
        miner_kwargs: the arguments of ``mine_hard_negatives`` (``range_max`` at most ``candidates``).
        note: a line to show when a setting given was changed (``None``: none was).
        memory: the estimated bytes of the mining's largest tables.
    """

    candidates: int
    miner_kwargs: dict
    note: str | None
    memory: float


def plan_mining(pairs: Pairs, settings: MiningSettings, on_host: bool = True) -> MiningPlan:
    """The settings fitted to the candidates of ``pairs``, checked before any model loads. ``on_host``: the model
    encodes and scores in this machine's memory (the CPU); on an accelerator the encoding batches and the
    similarity blocks are in its memory, and only the tables and the kept embeddings count here.

    An anchor's candidates are the distinct positives other than its own, so ``range_max`` beyond the most
    candidates an anchor has only pads the miner's tables (with a billion, 800 GB of them): it is lowered to that
    count (said in :attr:`MiningPlan.note` when given larger), and ``num_negatives`` to what the window holds. The
    memory the tables, the similarity blocks and the encoding batches need is then checked against what is
    available.

    Raises:
        ValueError: no anchor has a candidate (one pair, identical pairs, one anchor: nothing can be mined),
            ``range_min`` skips every candidate, or the setting needs more memory than is available; each names
            the file or the flag and the way out.
    """
    where = ", ".join(pairs.sources)
    own: dict[str, set[str]] = {}
    for a, p in zip(pairs.anchors, pairs.positives, strict=True):
        own.setdefault(a, set()).add(p)
    corpus = len(set(pairs.positives))
    most = max(corpus - len(theirs) for theirs in own.values())
    if most == 0:
        n, have = len(pairs), "has" if len(pairs) == 1 else "have"
        raise ValueError(
            f"{where}: no hard negative can be mined: its {n} pair{'s' * (n != 1)} {have} {corpus} distinct "
            f"positive{'s' * (corpus != 1)}, all of them positives of every anchor, so no anchor has a candidate "
            "(fewer than 2 distinct candidates: the negatives are the other pairs' positives); give pairs with "
            "different anchors and positives"
        )
    if settings.range_min >= most:
        raise ValueError(
            f"--range_min {settings.range_min} skips every candidate: the anchors of {where} have at most {most} "
            f"(the distinct positives not their own); expected --range_min < {most}"
        )
    kwargs, note = settings.miner_kwargs(), None
    max_positives = max(len(theirs) for theirs in own.values())
    guarded = any(getattr(settings, n) is not None for n in ("absolute_margin", "relative_margin", "max_score"))
    derived = settings.range_min + settings.num_negatives * (10 if guarded else 1) + max_positives  # the miner's
    wanted = settings.range_max if settings.range_max is not None else derived
    if wanted > most:
        kwargs["range_max"] = most
        kwargs["num_negatives"] = min(settings.num_negatives, most - settings.range_min)
        if settings.range_max is not None:
            note = (
                f"--range_max {settings.range_max} is more than the {most} candidates an anchor of {where} has "
                f"(the distinct positives not its own): using {most}"
            )
            if kwargs["num_negatives"] < settings.num_negatives:
                note += f", and --num_negatives {kwargs['num_negatives']} (what that window holds)"
    width = (kwargs["range_max"] if kwargs["range_max"] is not None else derived) + max_positives
    queries, sentences = len(own), len(own) + corpus
    table = float(queries) * width * _TABLE_BYTES
    # the exact search scores a query chunk against the whole corpus at once; faiss searches with k instead
    scored = 0.0 if settings.use_faiss or not on_host else float(min(queries, _QUERY_CHUNK)) * corpus * _BLOCK_BYTES
    block = scored + float(sentences) * _EMBEDDING_BYTES
    needs = {
        "--range_max" if settings.range_max is not None else "--num_negatives": (
            settings.range_max if settings.range_max is not None else settings.num_negatives,
            table,
        ),
        "--pairs": (where, block),
        "--batch_size": (
            settings.batch_size,
            float(min(settings.batch_size, sentences)) * _ENCODING_BYTES if on_host else 0.0,
        ),
    }
    total = memory.check_memory(needs, f"mining {len(pairs):,} pairs")
    return MiningPlan(most, kwargs, note, total)


def pair_scores(model, anchors: Sequence[str], positives: Sequence[str], batch_size: int) -> np.ndarray:
    """(P,) ``s(anchor, positive)`` of each pair, encoded and scored as ``mine_hard_negatives`` does (anchors as
    queries, positives as documents, normalised, ``model.similarity_pairwise``)."""
    if not anchors:
        return np.zeros(0, dtype=np.float32)
    kw = {"batch_size": batch_size, "normalize_embeddings": True, "convert_to_tensor": True}
    q = model.encode_query(list(anchors), **kw)
    d = model.encode_document(list(positives), **kw)
    return model.similarity_pairwise(q, d).float().cpu().numpy()


def mine_negatives(
    pairs: Pairs, model, settings: MiningSettings, verbose: bool = True, plan: MiningPlan | None = None
) -> MinedNegatives:
    """Mine ``settings.num_negatives`` negatives per pair with ``model`` (a ``SentenceTransformer``) through
    ``sentence_transformers.util.mine_hard_negatives`` (triplet output with scores), then lay the triplets out
    in the order of the pairs (see the module docstring). ``verbose``: the miner prints its score table and what
    each guard skipped. ``plan``: :func:`plan_mining`'s (made here when not given).

    Raises:
        ImportError: ``use_faiss`` without the ``faiss`` package.
        ValueError: see :func:`plan_mining`.
    """
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    plan = plan_mining(pairs, settings) if plan is None else plan
    random.seed(settings.seed)  # the miner's random sampling draws from Python's random
    data = Dataset.from_dict({"anchor": pairs.anchors, "positive": pairs.positives})
    mined = mine_hard_negatives(data, model, anchor_column_name="anchor", positive_column_name="positive",
                                output_format="triplet", output_scores=True, verbose=verbose,
                                **plan.miner_kwargs)  # fmt: skip
    found: dict[tuple[str, str], list[tuple[str, float]]] = {}
    positive_of: dict[tuple[str, str], float] = {}
    for a, p, n, (sp, sn) in zip(mined["anchor"], mined["positive"], mined["negative"], mined["scores"], strict=True):
        found.setdefault((a, p), []).append((n, sn))
        positive_of[(a, p)] = sp
    rows, row_pair, negative_scores, unmined = [], [], [], []
    positive_scores = np.full(len(pairs), np.nan, dtype=np.float32)
    for i, key in enumerate(zip(pairs.anchors, pairs.positives, strict=True)):
        if key not in found:
            unmined.append(i)
            continue
        positive_scores[i] = positive_of[key]
        for n, sn in found[key]:
            rows.append((*key, n))
            row_pair.append(i)
            negative_scores.append(sn)
    lone = [pairs.anchors[i] for i in unmined], [pairs.positives[i] for i in unmined]
    positive_scores[unmined] = pair_scores(model, *lone, settings.batch_size)
    return MinedNegatives(rows, np.asarray(row_pair, dtype=np.int64), np.asarray(negative_scores, dtype=np.float32),
                          positive_scores, unmined, len(mined))  # fmt: skip
