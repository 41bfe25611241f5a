"""``simcse-mine`` end to end on SICK pairs from the shared data: the triplets it writes (columns, order, counts),
the guards against false negatives checked against scores computed here without sentence-transformers (mean-pooled
token states of the same weights), the files read back by the training reader, and the one-line errors before the
model loads."""

from __future__ import annotations

import json
import os
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import torch
from packaging.version import Version

from simcse_weince.cli import mine as mine_cli
from simcse_weince.text.columns import ReadOptions
from simcse_weince.text.reading import TextStats
from simcse_weince.text.row_files import write_rows
from simcse_weince.text.sources import open_sources

TOL = 1e-5  # the miner's float32 scores against ours (other batches, other padding)
TRIPLETS = ("sent0", "sent1", "hard_neg")


@pytest.fixture(scope="module")
def sick_pairs(shared_data: Path) -> list[tuple[str, str]]:
    """The first 60 entailment pairs of SICK's training split (58 anchors: two have two positives)."""
    rows = []
    with (shared_data / "senteval" / "downstream" / "SICK" / "SICK_train.txt").open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            cols = line.rstrip("\n").split("\t")
            if i and cols[4] == "ENTAILMENT" and (cols[1], cols[2]) not in rows:
                rows.append((cols[1], cols[2]))
    return rows[:60]


@pytest.fixture(scope="module")
def pairs_csv(sick_pairs, tmp_path_factory) -> Path:
    return write_rows(tmp_path_factory.mktemp("pairs") / "pairs.csv", ("sent0", "sent1"), sick_pairs)


def mean_pooled(folder: Path, sentences: list[str]) -> np.ndarray:
    """(N, H) L2-normalised masked means of the last layer: what ``--pooler avg`` (and MiniLM's own pooling) is."""
    from transformers import AutoModel, AutoTokenizer

    model, tok = AutoModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    batch = tok(sentences, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state  # (N, L, H)
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()


# sentence-transformers 6.3 leaves a candidate that is the anchor's own text out of its negatives (6.2 mined it
# when the anchor is another pair's positive): the reference follows the installed miner.
MINER_SKIPS_ANCHOR = Version(version("sentence-transformers")) >= Version("6.3")


class Reference:
    """Scores of every anchor with every candidate (the distinct positives) and the guards, written from the
    miner's documentation: a candidate passes when it is none of the anchor's positives and
    ``s(a,n) <= min_p s(a,p) - margin`` (absolute), ``<= s - |s| * margin`` (relative), ``<= max_score``."""

    def __init__(self, folder: Path, pairs: list[tuple[str, str]]) -> None:
        self.anchors = list(dict.fromkeys(a for a, _ in pairs))
        self.corpus = list(dict.fromkeys(p for _, p in pairs))
        emb = mean_pooled(folder, self.anchors + self.corpus)
        self.S = emb[: len(self.anchors)] @ emb[len(self.anchors) :].T  # (anchors, corpus)
        self.own = {a: {p for b, p in pairs if b == a} for a in self.anchors}
        self.pos = {a: min(self.score(a, p) for p in self.own[a]) for a in self.anchors}

    def score(self, a: str, c: str) -> float:
        return float(self.S[self.anchors.index(a), self.corpus.index(c)])

    def slack(self, a: str, c: str, guard: str, value: float) -> float:
        """How far the candidate is inside the guard (>= 0: it passes)."""
        s, pos = self.score(a, c), self.pos[a]
        bound = {"absolute_margin": pos - value, "relative_margin": pos - abs(pos) * value, "max_score": value}
        return bound[guard] - s

    def candidates(self, a: str) -> list[str]:
        return [c for c in self.corpus if c not in self.own[a] and not (MINER_SKIPS_ANCHOR and c == a)]

    def top(self, a: str) -> str:
        return max(self.candidates(a), key=lambda c: self.score(a, c))


@pytest.fixture(scope="module")
def tiny_reference(tiny_bert_weights_dir, sick_pairs) -> Reference:
    return Reference(tiny_bert_weights_dir, sick_pairs)


def mine(capsys, *argv: object) -> tuple[int, str, str]:
    code = mine_cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def read_back(files: list[Path], allow_missing_negatives: bool = False) -> list[list[str]]:
    """The rows the training reader reads from ``files`` with ``text_columns [sent0, sent1, hard_neg]``."""
    options = ReadOptions.of(list(TRIPLETS), allow_missing_negatives=allow_missing_negatives)
    stats, rows = TextStats(), []
    for source in open_sources(files, options):
        for part in source.scan(stats, 1 << 20, 10_000):
            rows += [list(r) for r in zip(*source.read(part, stats), strict=True)]
    return rows


def test_mines_the_top_candidate_per_pair_in_the_order_of_the_pairs(
    tiny_bert_weights_dir, pairs_csv, sick_pairs, tiny_reference, tmp_path, capsys
) -> None:
    out = tmp_path / "mined.csv"
    code, stdout, _ = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                           "--range_max", 100, "--output", out)  # fmt: skip
    assert code == 0
    rows = read_back([out])
    assert out.read_text(encoding="utf-8").splitlines()[0] == "sent0,sent1,hard_neg"
    assert [tuple(r[:2]) for r in rows] == sick_pairs  # every pair once, in order: no guard, one negative each
    for a, _, n in rows:
        assert n not in tiny_reference.own[a]
        assert n == tiny_reference.top(a), a  # the highest-scoring candidate that is not one of its positives
    summary = json.loads((tmp_path / "mined_scores.json").read_text(encoding="utf-8"))
    selves = sum(a == n for a, _, n in rows)  # an anchor that is another pair's positive: its own best candidate
    if MINER_SKIPS_ANCHOR:  # sentence-transformers >= 6.3 never mines the anchor's own text
        assert selves == 0 and "negatives are their anchor's own text" not in stdout
    else:
        assert selves > 0 and f"warning: {selves} negatives are their anchor's own text" in stdout
    assert summary["counts"] == {"pairs_read": 60, "anchors": 58, "negatives_mined": 60, "rows_written": 60,
                                 "pairs_without_negative": 0, "pairs_with_fewer_negatives": 0,
                                 "negatives_equal_to_anchor": selves}  # fmt: skip
    neg = [tiny_reference.score(a, n) for a, _, n in rows]
    assert summary["scores"]["negative"]["q50"] == pytest.approx(np.median(neg), abs=TOL)
    pos = [tiny_reference.score(a, p) for a, p in sick_pairs]
    assert summary["scores"]["positive"]["max"] == pytest.approx(max(pos), abs=TOL)
    assert (tmp_path / "mined_scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "read 60 pairs (58 anchors)" in stdout and "60 rows" in stdout and "every pair has a negative" in stdout
    assert sorted(os.listdir(tmp_path)) == ["mined.csv", "mined_scores.json", "mined_scores.png"]  # no temp files


def check_top_passing(ref: Reference, a: str, mined: str | None, guard: str, value: float) -> None:
    """``mined`` (None: no row) is what ``top`` sampling must give ``a``: a candidate that passes the guard and
    scores at least as high as every other that passes; none only if none passes. A candidate on the bound (within
    the scores' precision) may go either way."""
    clearly = [c for c in ref.candidates(a) if ref.slack(a, c, guard, value) >= TOL]
    if mined is None:
        assert not clearly, (a, clearly[:3])
        return
    assert ref.slack(a, mined, guard, value) >= -TOL, (a, mined)
    assert all(ref.score(a, mined) >= ref.score(a, c) - TOL for c in clearly), (a, mined)


def guard_value(ref: Reference, guard: str) -> float:
    """A value of ``guard`` that the unguarded top candidate of about half the anchors breaks, rounded (so that
    no score sits on the bound)."""
    if guard == "max_score":
        return round(float(np.median([ref.score(a, ref.top(a)) for a in ref.anchors])), 3) + 5e-4
    gaps = [ref.pos[a] - ref.score(a, ref.top(a)) for a in ref.anchors]
    if guard == "relative_margin":
        gaps = [g / abs(ref.pos[a]) for g, a in zip(gaps, ref.anchors, strict=True)]
    return max(round(float(np.median(gaps)), 3), 0.0) + 5e-4


@pytest.mark.parametrize("guard", ["max_score", "absolute_margin", "relative_margin"])
def test_the_guards_hold_and_bind(guard, tiny_bert_weights_dir, pairs_csv, tiny_reference, tmp_path, capsys) -> None:
    ref, value = tiny_reference, guard_value(tiny_reference, guard)
    broken = [a for a in ref.anchors if ref.slack(a, ref.top(a), guard, value) < 0]
    assert 0 < len(broken) < len(ref.anchors)  # the guard binds for some anchors, not all
    out = tmp_path / "mined.csv"
    code, stdout, _ = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                           f"--{guard}", value, "--range_max", 100, "--output", out)  # fmt: skip
    assert code == 0
    rows = read_back([out])
    mined = {a: n for a, _, n in rows}
    for a in ref.anchors:
        check_top_passing(ref, a, mined.get(a), guard, value)
    assert any(mined.get(a) != ref.top(a) for a in broken)
    summary = json.loads((tmp_path / "mined_scores.json").read_text(encoding="utf-8"))
    lone = summary["counts"]["pairs_without_negative"]
    assert lone == sum(1 for a, p in pairs_rows(pairs_csv) if a not in mined)
    if lone:
        assert f"{lone} pairs without a negative passing the guards: not written" in stdout


def pairs_rows(path: Path) -> list[tuple[str, str]]:
    options = ReadOptions.of(["sent0", "sent1"])
    stats, rows = TextStats(), []
    for source in open_sources([path], options):
        for part in source.scan(stats, 1 << 20, 10_000):
            rows += list(zip(*source.read(part, stats), strict=True))
    return rows


def test_several_negatives_are_one_row_each_and_random_sampling_is_seeded(
    tiny_bert_weights_dir, pairs_csv, sick_pairs, tiny_reference, tmp_path, capsys
) -> None:
    outs = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for out in outs:
        code, *_ = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                        "--num_negatives", 3, "--sampling_strategy", "random", "--seed", 7, "--range_max", 20,
                        "--output", out)  # fmt: skip
        assert code == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()
    rows = read_back([outs[0]])
    by_pair: dict[tuple[str, str], list[str]] = {}
    for a, p, n in rows:
        by_pair.setdefault((a, p), []).append(n)
    assert list(by_pair) == sick_pairs  # a pair's rows together, the pairs in order
    for (a, _), negs in by_pair.items():
        assert len(negs) == 3 and len(set(negs)) == 3
        assert not set(negs) & tiny_reference.own[a]
    assert any(negs[0] != tiny_reference.top(a) for (a, _), negs in by_pair.items())  # drawn, not the top 3


def test_keep_unmined_writes_the_rest_as_pairs_for_allow_missing_negatives(
    tiny_bert_weights_dir, pairs_csv, sick_pairs, tiny_reference, tmp_path, capsys
) -> None:
    ref = tiny_reference
    strict = round(float(np.quantile([ref.score(a, ref.top(a)) for a in ref.anchors], 0.3)), 3) + 5e-4
    out = tmp_path / "mined.parquet"
    code, stdout, _ = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                           "--max_score", strict, "--range_max", 3, "--keep_unmined", "--output", out)  # fmt: skip
    assert code == 0
    unmined = tmp_path / "mined_unmined.parquet"
    triplets, lone = read_back([out]), pairs_rows(unmined)
    assert triplets and lone
    assert sorted([tuple(r[:2]) for r in triplets] + lone) == sorted(sick_pairs)  # no pair lost, none twice
    assert f"{len(lone)} pairs without a negative passing the guards -> {unmined}" in stdout
    both = read_back([out, unmined], allow_missing_negatives=True)
    assert len(both) == len(sick_pairs) and sum(r[2] == "" for r in both) == len(lone)
    code, stdout, _ = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                           "--max_score", -2, "--overwrite", "--output", out)  # fmt: skip
    assert code == 0 and not unmined.exists()  # an earlier run's companion is not left beside the new output
    assert "no negative passed the guards" in stdout and "60 pairs without a negative" in stdout
    assert json.loads((tmp_path / "mined_scores.json").read_text(encoding="utf-8"))["scores"]["negative"]["count"] == 0


def test_a_sentence_transformer_in_a_training_output_folder(minilm_dir, sick_pairs, tmp_path, capsys) -> None:
    """all-MiniLM-L6-v2 as a SimCSE run's ``model/`` (loaded as saved: mean pooling, Normalize), margin 0.1, on
    the first 30 pairs."""
    pairs = sick_pairs[:30]
    run = tmp_path / "run"
    run.mkdir()
    (run / "model").symlink_to(minilm_dir, target_is_directory=True)
    out = tmp_path / "mined.csv"
    code, _, _ = mine(capsys, "--pairs", write_rows(tmp_path / "pairs30.csv", ("sent0", "sent1"), pairs),
                      "--model", run, "--absolute_margin", 0.1, "--range_max", 50, "--output", out)  # fmt: skip
    assert code == 0
    ref = Reference(minilm_dir, pairs)
    rows = read_back([out])
    mined = {a: n for a, _, n in rows}
    assert any(ref.slack(a, ref.top(a), "absolute_margin", 0.1) < 0 for a in ref.anchors)  # the margin binds
    for a in ref.anchors:
        check_top_passing(ref, a, mined.get(a), "absolute_margin", 0.1)


def test_a_hub_dataset_is_read_by_its_columns(tiny_bert_weights_dir, pairs_csv, sick_pairs, tmp_path, capsys):
    """``--hub_dataset csv --hub_data_file F``: ``datasets``' packaged CSV builder (offline) as a Hub source."""
    out = tmp_path / "mined.csv"
    code, stdout, _ = mine(capsys, "--hub_dataset", "csv", "--hub_data_file", pairs_csv, "--columns", "sent0",
                           "sent1", "--model", tiny_bert_weights_dir, "--pooler", "avg", "--output", out)  # fmt: skip
    assert code == 0 and f"read 60 pairs (58 anchors) from hub:csv/{pairs_csv}" in stdout
    assert [tuple(r[:2]) for r in read_back([out])] == sick_pairs


# ---- bad input: one line, before the model loads -------------------------------------------------------------
def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _companion(output: Path, name: str) -> Path:
    """``output`` (not there), with an earlier run's companion ``name`` beside it."""
    _write(output.parent / name, "{}")
    return output


BAD = {
    "missing pairs file": (lambda t, fx: ["--pairs", t / "nope.csv"], "training file not found: {tmp}/nope.csv"),
    "unknown column": (lambda t, fx: ["--pairs", fx["csv"], "--columns", "sent0,premise"], "no column 'premise'"),
    "three columns": (lambda t, fx: ["--pairs", fx["csv"], "--columns", "a,b,c"], "expected two column names"),
    "bad row": (
        lambda t, fx: ["--pairs", _write(t / "p.csv", "sent0,sent1\na,b\nc,\n")],
        "error: {tmp}/p.csv:3: 'sent1' is empty",
    ),
    "output suffix": (lambda t, fx: ["--pairs", fx["csv"], "--output", t / "o.txt"], "unsupported suffix '.txt'"),
    "output exists": (
        lambda t, fx: ["--pairs", fx["csv"], "--output", _write(t / "o.csv", "x\n")],
        "--output {tmp}/o.csv already exists; pass --overwrite",
    ),
    "companion exists": (
        lambda t, fx: ["--pairs", fx["csv"], "--output", _companion(t / "o.csv", "o_scores.json")],
        "its companion {tmp}/o_scores.json already exists",
    ),
    "output is the input": (
        lambda t, fx: ["--pairs", fx["csv"], "--output", fx["csv"], "--overwrite"],
        "would overwrite the input file",
    ),
    "max_score nan": (lambda t, fx: ["--pairs", fx["csv"], "--max_score", "nan"], "max_score must be a finite number"),
    "negative num_negatives": (
        lambda t, fx: ["--pairs", fx["csv"], "--num_negatives", "-1"],
        "num_negatives must be an integer >= 1, got -1",
    ),
    "range_min above range_max": (
        lambda t, fx: ["--pairs", fx["csv"], "--range_min", "10", "--range_max", "5"],
        "range_min (10) must be smaller than range_max (5)",
    ),
    "negative margin": (lambda t, fx: ["--pairs", fx["csv"], "--absolute_margin", "-0.1"], "must be >= 0"),
    "not an integer": (lambda t, fx: ["--pairs", fx["csv"], "--range_max", "5.5"], "--range_max: invalid int"),
    "cls pooler": (lambda t, fx: ["--pairs", fx["csv"], "--pooler", "cls"], "needs the trained SimCSE MLP"),
    "missing model": (lambda t, fx: ["--pairs", fx["csv"], "--model", t / "none"], "no such path"),
    "pairs and hub": (lambda t, fx: ["--pairs", fx["csv"], "--hub_dataset", "x/y"], "one of the two"),
    "unknown flag": (lambda t, fx: ["--pairs", fx["csv"], "--margin", "0.1"], "unrecognized arguments: --margin"),
    "not a device": (lambda t, fx: ["--pairs", fx["csv"], "--device", "foo"], "--device foo: not a device"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_before_the_model_loads(
    case, pairs_csv, tiny_bert_weights_dir, tmp_path, capsys, monkeypatch
):
    def no_model(*args, **kwargs):
        raise AssertionError("the model loaded before the error")

    monkeypatch.setattr(mine_cli, "load_sentence_transformer", no_model)
    make, expected = BAD[case]
    argv = [str(a) for a in make(tmp_path, {"csv": pairs_csv})]
    defaults = {"--model": tiny_bert_weights_dir, "--output": tmp_path / "out.csv"}
    argv += [str(x) for flag, value in defaults.items() if flag not in argv for x in (flag, value)]
    code, out, err = mine(capsys, *argv)
    assert code == 2
    err = err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    expected = expected.replace("{tmp}", str(tmp_path))
    assert err.startswith(expected) if expected.startswith("error: ") else expected in err, err
    assert "Traceback" not in out + err and "usage:" not in out + err


def test_use_faiss_without_faiss_is_one_line(pairs_csv, tiny_bert_weights_dir, tmp_path, capsys, monkeypatch):
    from simcse_weince.text import mining

    monkeypatch.setattr(mining, "faiss_installed", lambda: False)
    code, _, err = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--use_faiss",
                        "--output", tmp_path / "o.csv")  # fmt: skip
    assert code == 2 and err.startswith("error: use_faiss needs the faiss package")


def test_use_faiss_mines_what_the_exact_search_mines(tiny_bert_weights_dir, pairs_csv, tmp_path, capsys) -> None:
    pytest.importorskip("faiss")
    common = ["--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg", "--absolute_margin", 0.01]
    for name, extra in (("exact.csv", []), ("faiss.csv", ["--use_faiss"])):
        assert mine(capsys, *common, *extra, "--output", tmp_path / name)[0] == 0
    exact, flat = read_back([tmp_path / "exact.csv"]), read_back([tmp_path / "faiss.csv"])
    assert flat and sum(a != b for a, b in zip(exact, flat, strict=True)) <= 1  # a near-tie may swap


# ---- sizes, pairs that give nothing, stops ----------------------------------------------------------------------
def test_range_max_is_limited_to_the_candidates_that_exist(
    tiny_bert_weights_dir, pairs_csv, sick_pairs, tmp_path, capsys, monkeypatch
) -> None:
    """``--range_max 1000000000`` once made the miner pad its score table to a billion columns per anchor (800 GB):
    it is clamped to the candidates an anchor has (the distinct positives not its own), and said so."""
    import sentence_transformers.util

    real = sentence_transformers.util.mine_hard_negatives
    corpus = len({p for _, p in sick_pairs})
    seen: list[int] = []

    def spy(*args, **kwargs):
        seen.append(kwargs["range_max"])
        assert kwargs["range_max"] <= corpus, "the miner was asked for more candidates than exist"
        return real(*args, **kwargs)

    monkeypatch.setattr(sentence_transformers.util, "mine_hard_negatives", spy)
    out = tmp_path / "mined.csv"
    code, stdout, err = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                             "--range_max", 1_000_000_000, "--output", out)  # fmt: skip
    assert code == 0, err
    most = max(corpus - len({p for b, p in sick_pairs if b == a}) for a, _ in sick_pairs)
    assert seen == [most]
    assert f"--range_max 1000000000 is more than the {most} candidates" in stdout and f"using {most}" in stdout
    assert [tuple(r[:2]) for r in read_back([out])] == sick_pairs  # the same rows as any range_max >= the candidates
    summary = json.loads((tmp_path / "mined_scores.json").read_text(encoding="utf-8"))
    assert summary["settings"]["range_max"] == 1_000_000_000  # the settings given are recorded as given


def test_a_setting_that_needs_more_memory_than_there_is_is_refused_before_the_model_loads(
    pairs_csv, tiny_bert_weights_dir, tmp_path, capsys, monkeypatch
) -> None:
    from simcse_weince.core import memory

    def no_model(*args, **kwargs):
        raise AssertionError("the model loaded before the error")

    monkeypatch.setattr(mine_cli, "load_sentence_transformer", no_model)
    monkeypatch.setattr(memory, "available_bytes", lambda: 50 << 20)
    code, _, err = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--batch_size", 100,
                        "--output", tmp_path / "o.csv")  # fmt: skip
    assert code == 2 and "\n" not in err.strip(), err
    assert err.startswith("error: --batch_size 100 needs about ") and "more than the 50 MB available" in err, err
    assert "expected a smaller --batch_size" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("name", "rows", "why"),
    [
        ("one pair", [("a cat sleeps", "a cat is asleep")], "its 1 pair has 1 distinct positive"),
        ("identical pairs", [("a cat sleeps", "a cat is asleep")] * 3, "its 3 pairs have 1 distinct positive"),
        ("one anchor", [("a cat sleeps", "a cat is asleep"), ("a cat sleeps", "the cat naps")], "2 distinct"),
    ],
)
def test_pairs_that_give_no_candidate_are_refused_naming_the_file(
    name, rows, why, tiny_bert_weights_dir, tmp_path, capsys
) -> None:
    """Once: exit 0, a header-only file and a warning blaming guards that were not set."""
    pairs = write_rows(tmp_path / "pairs.csv", ("sent0", "sent1"), rows)
    out = tmp_path / "mined.csv"
    code, stdout, err = mine(capsys, "--pairs", pairs, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                             "--output", out)  # fmt: skip
    assert code == 2, stdout
    err = err.strip()
    assert err.startswith(f"error: {pairs}: no hard negative can be mined") and "\n" not in err, err
    assert why in err and "fewer than 2 distinct candidates" in err
    assert sorted(os.listdir(tmp_path)) == ["pairs.csv"]  # no empty output left behind


def _sigterm_at(module, name: str, monkeypatch) -> None:
    """``module.name`` replaced by a SIGTERM to this process (as ``kill`` sends it), arriving while it runs."""
    import signal
    import time

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here
        raise AssertionError("SIGTERM was not handled")

    monkeypatch.setattr(module, name, terminated)


def test_a_stop_while_mining_says_nothing_was_written_and_the_same_command_runs_again(
    tiny_bert_weights_dir, pairs_csv, tmp_path, capsys, monkeypatch
) -> None:
    out = tmp_path / "mined.csv"
    argv = ["--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg", "--output", out]
    with monkeypatch.context() as patch:
        _sigterm_at(mine_cli, "mine_negatives", patch)
        code, _, err = mine(capsys, *argv)
    assert code == 130  # the last line of stderr (above it: the progress bars)
    assert err.strip().splitlines()[-1] == (
        f"stopped: SIGTERM: nothing was written ({out} and its companions are written at the end); run the same "
        "command again to mine from the start"
    )
    assert not out.exists()
    assert mine(capsys, *argv)[0] == 0  # the same command runs


def test_a_stop_while_writing_names_the_files_kept(tiny_bert_weights_dir, pairs_csv, tmp_path, capsys, monkeypatch):
    from simcse_weince.text import mining_output

    out = tmp_path / "mined.csv"
    _sigterm_at(mining_output, "plot_scores", monkeypatch)
    code, _, err = mine(capsys, "--pairs", pairs_csv, "--model", tiny_bert_weights_dir, "--pooler", "avg",
                        "--output", out)  # fmt: skip
    assert code == 130
    assert err.strip().splitlines()[-1] == (
        f"stopped: SIGTERM: kept {out} (complete); not written: {tmp_path / 'mined_scores.png'}, "
        f"{tmp_path / 'mined_scores.json'}; run the same command with --overwrite to mine again"
    )
    assert len(read_back([out])) == 60
