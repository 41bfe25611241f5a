"""Checkpoint selection on the user's own validation data: a retrieval folder (BEIR layout) or an STS file, the
metric named by ``metric_for_best_model``, recorded in run_config.yaml, results.json and the model card."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from simcse_weince.cli.train_text import run
from simcse_weince.evaluation.families import FAMILIES
from simcse_weince.evaluation.family import DevSet
from simcse_weince.evaluation.retrieval import evaluate_retrieval
from simcse_weince.evaluation.retrieval_data import load_beir_folder, load_builtin_task
from simcse_weince.evaluation.sts import evaluate_sts
from simcse_weince.evaluation.sts_data import load_sts_task
from simcse_weince.text import validation as validation_module
from simcse_weince.text.model_card import score_label
from simcse_weince.text.validation import Validation, ValidationEvaluator, parse_validation
from tests.evaluation.test_families import HashEncoder, LengthFamily, LengthResult
from tests.helpers import argv


def _retrieval_folder(senteval: Path, folder: Path) -> Path:
    """60 queries of STS-B dev's paraphrase task, their documents and 140 distractors, as a BEIR folder with a dev
    split."""
    task = load_builtin_task("STSB-paraphrase", senteval, "dev")
    queries = list(task.queries)[:60]
    wanted = {d for q in queries for d in task.relevant[q]}
    docs = [d for i, d in enumerate(task.corpus) if d in wanted or i < 140]
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as f:
        f.writelines(json.dumps({"_id": d, "title": "", "text": task.corpus[d]}) + "\n" for d in docs)
    with (folder / "queries.jsonl").open("w") as f:
        f.writelines(json.dumps({"_id": q, "text": task.queries[q]}) + "\n" for q in queries)
    rows = [f"{q}\t{d}\t1\n" for q in queries for d in sorted(task.relevant[q])]
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(rows))
    return folder


@pytest.mark.slow
def test_retrieval_folder_validation_keeps_the_checkpoint_it_ranks_best(
    tiny_bert_dir: Path, wiki_sample: Path, shared_data: Path, tmp_path: Path
) -> None:
    folder = _retrieval_folder(shared_data / "senteval" / "downstream", tmp_path / "val")
    out = tmp_path / "run"
    results = run(argv(
        model_name_or_path=tiny_bert_dir, init_from_config=True, pooler="cls", train_files=wiki_sample,
        drop_unterminated_last_line="wiki1m_for_simcse.head*", max_train_samples=96, max_seq_length=16,
        per_device_train_batch_size=16, learning_rate="3e-3", max_steps=6, eval_steps=1, save_steps=1,
        logging_steps=1, min_tail_points=10, output_dir=out, disable_tqdm=True, seed=3, save_total_limit=2,
        validation=f"retrieval:{folder}", metric_for_best_model="retrieval_mrr@10", eval_test_at_end=False,
    ))  # fmt: skip
    history = json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())["log_history"]
    evals = {e["step"]: e["eval_retrieval_mrr@10"] for e in history if "eval_retrieval_mrr@10" in e}
    assert sorted(evals) == [1, 2, 3, 4, 5, 6] and {"eval_retrieval_ndcg@10", "eval_retrieval_recall@100"} <= {
        k for e in history for k in e
    }
    best_step = max(evals, key=evals.__getitem__)
    assert best_step != 6 and evals[best_step] > evals[6]  # the case where keeping the last one would be wrong
    assert results["best_checkpoint"] == str(out / f"checkpoint-{best_step}")
    assert results["after"]["validation"] == pytest.approx(evals[best_step], abs=1e-6)  # the best one's weights
    assert results["validation"] == {
        "setting": f"retrieval:{folder}",
        "label": f"retrieval folder {folder}",
        "metric": "retrieval_mrr@10",
        "pairs": False,
    }
    assert json.loads((out / "results.json").read_text())["validation"]["metric"] == "retrieval_mrr@10"
    assert f"validation: retrieval:{folder}" in (out / "run_config.yaml").read_text()
    card = (out / "model" / "README.md").read_text()
    assert f"best retrieval_mrr@10 on retrieval folder {folder}" in card


def test_sts_file_validation_reads_csv_tsv_jsonl_alike(tmp_path: Path) -> None:
    from simcse_weince.evaluation.sts_data import load_sts_file

    rows = [("A man plays.", "Someone plays.", 4.5), ("A cat.", "A car.", 0.5), ("Rain.", "It rains.", 3.0)]
    (tmp_path / "v.csv").write_text(
        "sentence1,sentence2,score,extra\n" + "".join(f'"{a}","{b}",{s},x\n' for a, b, s in rows)
    )
    (tmp_path / "v.tsv").write_text("score\tsentence2\tsentence1\n" + "".join(f"{s}\t{b}\t{a}\n" for a, b, s in rows))
    (tmp_path / "v.jsonl").write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "score": s}) + "\n"
                                              for a, b, s in rows))  # fmt: skip
    for name in ("v.csv", "v.tsv", "v.jsonl"):
        sub = load_sts_file(tmp_path / name).subsets[0]
        assert list(zip(sub.sentences1, sub.sentences2, sub.scores, strict=True)) == rows, name
    (tmp_path / "bad.csv").write_text("sentence1,sentence2,score\na,b,1\nc,d,high\n")
    with pytest.raises(ValueError, match=r"bad.csv:3: expected a numeric score, got 'high'"):
        load_sts_file(tmp_path / "bad.csv")
    (tmp_path / "quote.csv").write_text('"sentence1,sentence2,score\n"a","b",1\n')  # the header's quote unclosed
    with pytest.raises(ValueError, match=r"quote.csv:\d+: .*expected CSV rows"):
        load_sts_file(tmp_path / "quote.csv")
    (tmp_path / "q.tsv").write_text('sentence1\tsentence2\tscore\nHe said "hi\tShe said "yo"\t2\na\tb\t1\n')
    assert load_sts_file(tmp_path / "q.tsv").subsets[0].sentences1 == ['He said "hi', "a"]  # TSV: quotes are text
    (tmp_path / "semi.csv").write_text("sentence1;sentence2;score\na;b;1\nc;d;2\n")  # a spreadsheet's CSV
    with pytest.raises(ValueError) as err:
        load_sts_file(tmp_path / "semi.csv")
    assert str(err.value).endswith(
        "(the header was read as one column holding semicolons, but this file's fields must be separated by commas; "
        "save it so, or under the suffix of its separator: .csv for commas, .tsv for tabs)"
    )


def test_validation_settings_and_their_metrics() -> None:
    assert parse_validation("stsb") == Validation("stsb")
    assert parse_validation("retrieval:/x/y").metrics[0] == "retrieval_ndcg@10"
    assert parse_validation("sts:a.csv").check_metric("eval_sts_pearson") == "sts_pearson"
    with pytest.raises(ValueError, match="not a metric of validation 'retrieval:/x/y'; expected one of retrieval_"):
        parse_validation("retrieval:/x/y").check_metric("stsb_spearman")
    with pytest.raises(ValueError, match="expected stsb"):
        parse_validation("retrieval")


def _hash_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluator's SimCSEEncoder replaced by a model-free encoder (a fixed vector per sentence)."""
    monkeypatch.setattr(validation_module, "SimCSEEncoder", lambda *args, **kwargs: HashEncoder())


def test_the_evaluator_reports_what_the_evaluation_families_compute(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The validation's numbers are the evaluation's (STS: Spearman and Pearson "all"; retrieval: every metric),
    × 100 under today's names, on the same split, cut to eval_max_pairs."""
    _hash_encoded(monkeypatch)
    senteval = shared_data / "senteval" / "downstream"
    stsb = parse_validation("STS-B")
    assert stsb == Validation("stsb") and stsb.spec == "stsb" and stsb.label == "STS-B dev"
    task = stsb.load(senteval, max_pairs=50)
    expected = evaluate_sts(HashEncoder(), load_sts_task("STSBenchmark", senteval, "dev").first_pairs(50))
    evaluator = ValidationEvaluator(stsb, task, tokenizer=None)
    assert evaluator(None) == {"stsb_spearman": expected.main, "stsb_pearson": expected.pearson["all"]}
    assert evaluator.num_samples == 50
    folder = _retrieval_folder(senteval, tmp_path / "val")
    chosen = parse_validation(f"retrieval:{folder}")
    evaluator = ValidationEvaluator(chosen, chosen.load(senteval), tokenizer=None)
    metrics = evaluate_retrieval(HashEncoder(), load_beir_folder(folder, "dev")).metrics
    assert evaluator(None) == {f"retrieval_{k}": 100.0 * v for k, v in metrics.items()}
    assert list(evaluator(None)) == list(chosen.metrics) and evaluator.num_samples == 60


class DevLengths(LengthFamily):
    """The toy family of the evaluation tests, declaring its task "long" a dev set: all a new validation needs."""

    def dev_set(self, task: str) -> DevSet | None:
        dev = DevSet(self.name, task, task, "long sentences", "lengths", ("mean_norm",), pairs=True)
        return dev if task == "long" else None

    def dev_scores(self, result: LengthResult) -> dict[str, float]:
        return {"mean_norm": result.mean_norm}

    def num_samples(self, loaded: list[str]) -> int:
        return len(loaded)


def test_a_new_validation_is_a_family_declaring_its_dev_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A throwaway dev set declared by a family shows in the error message, ``--help`` and the card's label."""
    monkeypatch.setitem(FAMILIES, "lengths", DevLengths())
    _hash_encoded(monkeypatch)
    chosen = parse_validation("LONG")  # as --tasks names it
    assert chosen.spec == "long" and chosen.metrics == ("lengths_mean_norm",)
    assert chosen.check_metric("eval_lengths_mean_norm") == "lengths_mean_norm"
    evaluator = ValidationEvaluator(chosen, chosen.load(None), tokenizer=None)
    norms = np.linalg.norm(HashEncoder().encode(["a long sentence", "another long one"]), axis=1)
    assert evaluator(None) == {"lengths_mean_norm": pytest.approx(norms.mean())} and evaluator.num_samples == 2
    form = "long (long sentences: lengths_mean_norm)"
    with pytest.raises(
        ValueError, match=rf"validation 'short': expected stsb \(STS-B dev: .*\), .* or {re.escape(form)}$"
    ):
        parse_validation("short")  # a task of the family that is no dev set
    with pytest.raises(SystemExit):
        run(["--help"])
    assert form in " ".join(capsys.readouterr().out.split())  # --help, written when the parser is built
    record = {"setting": chosen.spec, "label": chosen.label, "metric": chosen.metrics[0], "pairs": chosen.dev.pairs}
    assert score_label("validation", 20, record) == "long sentences, lengths_mean_norm (first 20 pairs)"  # the card
