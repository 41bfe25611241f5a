"""``python -m simcse_weince.cli.mine`` / ``simcse-mine``: hard negatives for supervised SimCSE, mined from
(anchor, positive) pairs by a sentence encoder (sentence-transformers' ``mine_hard_negatives``), written as
SimCSE's ``sent0, sent1, hard_neg`` triplets (CSV or Parquet) with a histogram and a JSON summary of the scores.

    python -m simcse_weince.cli.mine --pairs pairs.csv --model sentence-transformers/all-MiniLM-L6-v2 \\
        --absolute_margin 0.1 --range_max 50 --keep_unmined --output mined.csv

Every flag, the input files, their columns and rows and the output names are checked before the model loads;
a bad one ends the command with one ``error:`` line. See :mod:`simcse_weince.text.mining` for the guards and the
row layout, :mod:`simcse_weince.text.mining_output` for the files written.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from simcse_weince.cli.errors import command_main
from simcse_weince.core.devices import check_device
from simcse_weince.core.model_sources import check_model_source
from simcse_weince.core.stopping import kept_on_stop
from simcse_weince.text.mining import (
    SAMPLING_STRATEGIES,
    MiningSettings,
    anchor_positive_columns,
    mine_negatives,
    plan_mining,
    read_pairs,
)
from simcse_weince.text.mining_output import MiningOutputs
from simcse_weince.text.poolers import POOLERS
from simcse_weince.text.sentence_transformer import check_pooler, load_sentence_transformer
from simcse_weince.text.sources import format_names


class _Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one ``error:`` line (``ValueError`` for :func:`run_command`), not its usage."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(f"command line: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="simcse-mine", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    add_input_flags(p)
    add_mining_flags(p)
    out = p.add_argument_group("output")
    out.add_argument("--output", required=True, help="the triplets file, .csv or .parquet")
    out.add_argument(
        "--keep_unmined",
        action="store_true",
        help="write the pairs without a negative to <stem>_unmined<suffix> (for allow_missing_negatives)",
    )
    out.add_argument("--overwrite", action="store_true", help="replace the output and its companion files")
    return p


def add_input_flags(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("pairs")
    src.add_argument("--pairs", nargs="+", metavar="FILE", help=f"{format_names()} files of pairs")
    src.add_argument("--hub_dataset", default=None, help="a Hub dataset instead of --pairs (its train split)")
    src.add_argument("--hub_data_file", default=None, help="one file of --hub_dataset")
    src.add_argument(
        "--columns",
        nargs="+",
        default=None,
        metavar="NAME",
        help="the anchor and positive columns, e.g. --columns premise,hypothesis (default sent0,sent1)",
    )
    src.add_argument("--skip_bad_rows", action="store_true", help="skip (and count) bad rows instead of stopping")
    enc = p.add_argument_group("encoder")
    enc.add_argument(
        "--model",
        required=True,
        help="SentenceTransformer folder, SimCSE training output folder, or HF encoder (folder or name)",
    )
    enc.add_argument(
        "--pooler",
        choices=POOLERS,
        default=None,
        help="pool the transformer this way (default: a SentenceTransformer's own modules; "
        "cls_before_pooler for a plain HF encoder)",
    )
    enc.add_argument("--device", default=None, help="cpu, cuda, ... (default: CUDA when there)")
    enc.add_argument("--batch_size", type=int, default=32, help="sentences per encoding batch")


def add_mining_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("mining (the arguments of sentence-transformers' mine_hard_negatives)")
    g.add_argument("--num_negatives", type=int, default=1, help="negatives per pair at most; one row each")
    g.add_argument("--range_min", type=int, default=0, help="skip the candidates ranked above this (0-based)")
    g.add_argument("--range_max", type=int, default=None, help="consider the candidates ranked below this")
    g.add_argument("--absolute_margin", type=float, default=None, help="keep s(a,n) <= s(a,p) - margin")
    g.add_argument("--relative_margin", type=float, default=None, help="keep s(a,n) <= s(a,p) - |s(a,p)| * margin")
    g.add_argument("--max_score", type=float, default=None, help="keep s(a,n) <= max_score")
    g.add_argument("--min_score", type=float, default=None, help="keep s(a,n) >= min_score")
    g.add_argument(
        "--sampling_strategy",
        choices=SAMPLING_STRATEGIES,
        default="top",
        help="top: the highest-scoring candidates that pass; random: drawn among them",
    )
    g.add_argument("--seed", type=int, default=0, help="the seed of --sampling_strategy random")
    g.add_argument("--use_faiss", action="store_true", help="search with a FAISS flat index (needs faiss)")


def encodes_on_host(device: str | None) -> bool:
    """True when the model will encode in this machine's memory: ``--device cpu``, or no ``--device`` and no CUDA."""
    if device is not None:
        return device.split(":")[0] == "cpu"
    import torch

    return not torch.cuda.is_available()


def settings_of(args: argparse.Namespace) -> MiningSettings:
    names = ("num_negatives", "range_min", "range_max", "absolute_margin", "relative_margin", "max_score",
             "min_score", "sampling_strategy", "batch_size", "use_faiss", "seed")  # fmt: skip
    return MiningSettings(**{n: getattr(args, n) for n in names})


def run(argv: Sequence[str]) -> dict:
    """Check everything, read the pairs, load the model, mine, write; returns the summary written."""
    args = build_parser().parse_args(list(argv))
    settings = settings_of(args)
    columns = anchor_positive_columns(args.columns)
    check_pooler(args.pooler)
    check_device(args.device)
    if bool(args.pairs) == bool(args.hub_dataset):
        raise ValueError("expected the pairs from --pairs FILE [FILE ...] or from --hub_dataset NAME, one of the two")
    outputs = MiningOutputs.plan(args.output, args.keep_unmined, args.overwrite, args.pairs or ())
    source = check_model_source(args.model)
    with kept_on_stop(outputs.kept):
        pairs = read_pairs(args.pairs, columns, args.hub_dataset, args.hub_data_file, args.skip_bad_rows)
        print(f"read {len(pairs):,} pairs ({len(set(pairs.anchors)):,} anchors) from {', '.join(pairs.sources)}")
        plan = plan_mining(pairs, settings, on_host=encodes_on_host(args.device))  # before the model loads
        if plan.note:
            print(f"note: {plan.note}")
        model = load_sentence_transformer(source, args.pooler, args.device)
        result = mine_negatives(pairs, model, settings, plan=plan)
        summary = outputs.write(pairs, result, settings, {"model": args.model, "pooler": args.pooler})
    report(summary, outputs)
    return summary


def report(summary: dict, outputs: MiningOutputs) -> None:
    """The counts and the files, on stdout."""
    c, s = summary["counts"], summary["scores"]
    print(f"mined {c['negatives_mined']:,} negatives for {c['anchors']:,} anchors: {c['rows_written']:,} rows "
          f"(sent0, sent1, hard_neg) -> {outputs.rows}")  # fmt: skip
    lone = c["pairs_without_negative"]
    if not c["rows_written"]:
        print(f"warning: no negative passed the guards: {outputs.rows} holds its header only (loosen them)")
    if not lone:
        print("every pair has a negative")
    elif summary["files"]["unmined"]:
        print(f"{lone:,} pairs without a negative passing the guards -> {outputs.unmined} (sent0, sent1: train them "
              "with the triplets under allow_missing_negatives)")  # fmt: skip
    else:
        print(f"{lone:,} pairs without a negative passing the guards: not written (--keep_unmined writes them)")
    if c["pairs_with_fewer_negatives"]:
        print(f"{c['pairs_with_fewer_negatives']:,} pairs with fewer than num_negatives negatives")
    if c["negatives_equal_to_anchor"]:
        print(f"warning: {c['negatives_equal_to_anchor']:,} negatives are their anchor's own text (the loss masks "
              "them as duplicates; a margin or max_score removes them)")  # fmt: skip
    pos, neg = s["positive"]["q50"], s["negative"]["q50"]
    median = f"median score: positives {pos:.3f}" + (f", negatives {neg:.3f}" if neg is not None else "")
    print(f"{median}; histogram {outputs.plot}, summary {outputs.summary}")


def main(argv: Sequence[str] | None = None) -> int:
    return command_main(run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
