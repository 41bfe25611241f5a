"""The A/B of SICK's negatives: the three arms train on the same 1,284 (anchor, positive) pairs (the mining by a
tiny encoder here, in this process), the mined arm is reused only when mined the same way, each arm's overrides
are a valid training configuration, and the table pairs the runs by seed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from simcse_weince.text.columns import ReadOptions
from simcse_weince.text.reading import TextStats
from simcse_weince.text.sources import open_sources
from weince_lab.experiments.sick_mining_ab import build_parser, combine, prepare_arms, text_runs_argv


def arm_rows(overrides: list[str]) -> list[tuple[str, ...]]:
    """The rows the training reader gives for an arm's ``--train_files`` (and ``--text_columns``)."""
    files = overrides[1 : overrides.index("--text_columns") if "--text_columns" in overrides else None]
    two = "--text_columns" in overrides
    options = ReadOptions.of(["sent0", "sent1"] if two else ["sent0", "sent1", "hard_neg"],
                             allow_missing_negatives=not two)  # fmt: skip
    stats, rows = TextStats(), []
    for source in open_sources(files, options):
        for part in source.scan(stats, 1 << 20, 10_000):
            rows += list(zip(*source.read(part, stats), strict=True))
    return rows


def test_the_arms_hold_the_same_pairs(shared_data: Path, tiny_bert_weights_dir: Path, tmp_path: Path) -> None:
    from simcse_weince.cli import mine as mine_cli
    from simcse_weince.cli.train_text import ARG_GROUPS
    from simcse_weince.training.config import parse_config

    argv = ["--rows_dir", str(tmp_path / "rows"), "--data_dir", str(shared_data / "senteval" / "downstream"),
            "--mining_model", str(tiny_bert_weights_dir), "--mining_pooler", "avg", "--margin", "0.02"]  # fmt: skip
    args = build_parser().parse_args(argv)
    mined = []

    def mine(argv: list[str]) -> int:  # in this process: no second import of torch and the model
        mined.append(argv)
        return mine_cli.main(argv)

    overrides = prepare_arms(tmp_path / "rows", args.data_dir, args, args.arms, mine)
    assert len(mined) == 1 and "--absolute_margin" in mined[0]
    rows = {arm: arm_rows(o) for arm, o in overrides.items()}
    pairs = {arm: Counter(r[:2] for r in arm_rows) for arm, arm_rows in rows.items()}
    assert sum(pairs["none"].values()) == len(pairs["none"]) == 1284  # each distinct entailment once
    assert pairs["sick"] == pairs["none"] == pairs["mined"]
    negatives = {arm: sum(1 for r in arm_rows if len(r) > 2 and r[2]) for arm, arm_rows in rows.items()}
    assert negatives["sick"] == 251 and negatives["none"] == 0 and 0 < negatives["mined"] < 1284  # some unmined
    for arm, o in overrides.items():  # each arm's overrides make a valid configuration of the quickstart
        parse_config(ARG_GROUPS, [args.config, *o, "--output_dir", str(tmp_path / "runs" / arm)])
    assert text_runs_argv("none", overrides["none"], args)[-5:] == overrides["none"][-5:]

    def no_mining(argv: list[str]) -> int:
        raise AssertionError("mined again")

    assert prepare_arms(tmp_path / "rows", args.data_dir, args, args.arms, no_mining) == overrides  # reused
    other = build_parser().parse_args([*argv, "--margin", "0.05"])
    with pytest.raises(SystemExit, match="was mined with"):
        prepare_arms(tmp_path / "rows", args.data_dir, other, other.arms, no_mining)


def test_the_table_pairs_the_runs_by_seed() -> None:
    def arm(offset: float, lam: float | None) -> dict:
        runs = {v: {str(s): {"STS-B": 80 + offset + s + (0.5 if v == "weince-ols" else 0)} for s in (0, 1, 2)}
                for v in ("infonce", "weince-ols")}  # fmt: skip
        stats = {v: {str(s): {"lambda": lam if v == "weince-ols" else None, "rho": 0.4, "delta_aic": 70.0,
                              "lambda_frac_gt_half": 0.2} for s in (0, 1, 2)} for v in runs}  # fmt: skip
        return {"per_run": runs, "lambda": stats}

    table, out = combine({"sick": arm(0.0, 0.25), "mined": arm(1.0, 0.3)}, ["infonce", "weince-ols"])
    assert out["difference"]["sick: weince-ols − infonce"]["STS-B"] == pytest.approx((0.5, 0.0))
    assert out["difference"]["infonce: mined − sick"]["STS-B"] == pytest.approx((1.0, 0.0))  # seed effects cancel
    assert out["mean"]["mined / infonce"]["STS-B"] == pytest.approx((82.0, 1.0))
    assert out["lambda"]["mined / weince-ols"]["lambda"] == pytest.approx((0.3, 0.0))
    assert out["lambda"]["mined / infonce"]["lambda"] is None
    assert "| mined / infonce | – | 0.20 ± 0.00 | 0.40 ± 0.00 | 70.00 ± 0.00 |" in table
