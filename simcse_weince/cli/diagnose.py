"""``simcse-diagnose`` / ``python -m simcse_weince.cli.diagnose``: extreme-value diagnostics of an encoder.

Writes ``report.json`` and PNG plots (tail histogram with the fitted GPD, threshold stability, λ
distribution, link-selection log-likelihoods) into ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args, get_origin, get_type_hints

import numpy as np
import torch
import yaml

from simcse_weince.cli.errors import command_main
from simcse_weince.core import strict_json
from simcse_weince.core.model_sources import check_model_source, resolve_model_path
from simcse_weince.core.paths import resolve_data_path, senteval_root
from simcse_weince.core.stopping import kept_on_stop
from simcse_weince.diagnostics.geometry import alignment, uniformity
from simcse_weince.diagnostics.link import select_link
from simcse_weince.diagnostics.plots import plot_lambda, plot_link, plot_stability, plot_tail
from simcse_weince.diagnostics.pot import fit_pot, threshold_stability
from simcse_weince.diagnostics.scores import EmbeddedBatch, negative_scores, positive_ranks
from simcse_weince.diagnostics.text_geometry import stsb_sentences_and_pairs, text_geometry
from simcse_weince.diagnostics.weince_summary import batch_statistics, summarise
from simcse_weince.losses import LOSSES, ContrastiveLoss
from simcse_weince.training.arguments import LossArguments
from simcse_weince.training.config import ConfigError
from simcse_weince.vision.model import simclr_folder

STATISTICS_CONFIG = LOSSES["weince"].Config  # the per-anchor statistics diagnosed are WEINCE's (its knobs' flags)

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    # The former spellings, accepted and not shown in --help. Their default is SUPPRESS so that the named flag's
    # default holds, and each is registered before its named flag, which is therefore the last action of the dest.
    for old, (new, kind) in FORMER_FLAGS.items():
        p.add_argument(f"--{old}", dest=new, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kind)
    p.add_argument(
        "--model",
        required=True,
        help="text: SimCSE output / SentenceTransformer / HF encoder; vision: a SimCLR run folder",
    )
    p.add_argument("--kind", choices=("auto", "text", "vision"), default="auto")
    p.add_argument("--out", required=True, help="output folder for report.json and the plots")
    p.add_argument(
        "--sentences",
        nargs="*",
        default=None,
        help="text files, one sentence per line (default: the STS-B dev+test sentences)",
    )
    p.add_argument("--data_dir", default=None, help="SentEval data/downstream folder (text default data)")
    p.add_argument("--pooler", default=None, help="text pooler override")
    p.add_argument(
        "--text_positives",
        choices=("dropout", "stsb"),
        default="dropout",
        help="text positives: two dropout views of each sentence (the training layout) or STS-B pairs "
        "with gold >= 4 (real paraphrases, which do not always win: more informative for the "
        "link selection)",
    )
    p.add_argument("--vision_data_dir", default="{data}/cifar10_jpeg", help="vision: data root")
    p.add_argument("--vision_dataset", default="cifar10_zip", help="vision: data set name")
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--num_batches", type=int, default=32)
    tail = p.add_argument_group("score tail (POT fit of the negatives' similarities)")
    tail.add_argument(
        "--pot_quantile", type=float, default=0.99, help="quantile of the negatives' scores at the POT threshold"
    )
    tail.add_argument(
        "--stability_quantiles",
        type=float,
        nargs="+",
        default=[0.98, 0.985, 0.99, 0.992, 0.995],
        help="threshold quantiles of the stability plot",
    )
    p.add_argument("--bootstrap", type=int, default=200)
    loss = p.add_argument_group(
        "WEINCE statistics (λ, β, ρ, ΔAIC)",
        "default: the run's saved loss settings (run_config.yaml beside the model), else the WEINCE defaults; "
        "a flag given here overrides one setting",
    )
    knobs = {f.name: f for f in dataclasses.fields(STATISTICS_CONFIG)}
    hints = get_type_hints(STATISTICS_CONFIG)
    for flag, name in LOSS_FLAGS.items():
        help_text = f"{knobs[name].metadata['help']} Default: the run's {name}, else {knobs[name].default!r}."
        loss.add_argument(
            f"--{flag}", dest=flag, default=None, help=help_text.replace("%", "%%"), **flag_type(hints[name])
        )
    p.add_argument("--seed", type=int, default=0)
    return p


# WEINCE config fields without a flag: τ does not enter the statistics, and a fixed λ would replace them.
NOT_STATISTICS_FLAGS = frozenset({"temperature", "fixed_lambda"})
# flag -> WEINCE config field, one per knob; the loss's q (the hardness quantile that defines ρ_0) is
# ``--hardness_quantile``, apart from the POT threshold's ``--pot_quantile``
LOSS_FLAGS = {
    ("hardness_quantile" if f.name == "q" else f.name): f.name
    for f in dataclasses.fields(STATISTICS_CONFIG)
    if f.name not in NOT_STATISTICS_FLAGS
}
# former flag -> (its name now, its argparse type): scripts written for the old spellings keep working
FORMER_FLAGS = {
    "q": ("pot_quantile", {"type": float}),
    "qs": ("stability_quantiles", {"type": float, "nargs": "+"}),
    "loss_q": ("hardness_quantile", {"type": float}),
}


def flag_type(hint: object) -> dict:
    """argparse ``choices`` for a ``Literal`` knob, else ``type`` (``int`` for ``int | None``)."""
    if get_origin(hint) is Literal:
        return {"choices": get_args(hint)}
    return {"type": next(t for t in (get_args(hint) or (hint,)) if t is not type(None))}


def saved_loss_settings(model_path: str) -> tuple[dict, str]:
    """The ``loss`` group of the run's ``run_config.yaml`` (beside the model folder or one level up) and
    where it came from; ``({}, "defaults")`` when the model is not a training output of this project."""
    folder = Path(model_path)
    for candidate in (folder / "run_config.yaml", folder.parent / "run_config.yaml"):
        if candidate.is_file():
            cfg = yaml.safe_load(candidate.read_text(encoding="utf-8")) or {}
            if isinstance(cfg.get("loss"), dict):
                return dict(cfg["loss"]), str(candidate)
    return {}, "defaults"


def statistics_loss(args, model_path: str, layout: str) -> tuple[ContrastiveLoss, str]:
    """The WEINCE loss whose statistics are reported: the run's saved settings, then the flags given.

    Raises:
        ValueError: an invalid setting (before any model is loaded).
    """
    saved, source = saved_loss_settings(model_path)
    known = {f.name for f in dataclasses.fields(LossArguments)}
    settings = {k: v for k, v in saved.items() if k in known}
    flags = {field: getattr(args, flag) for flag, field in LOSS_FLAGS.items() if getattr(args, flag) is not None}
    settings.update(flags, loss="weince", gather_across_devices=False)
    if flags:
        source += f" + flags {sorted(flags)}"
    try:
        return LossArguments(**settings).build(layout), source
    except (TypeError, ValueError) as err:
        raise ConfigError(f"WEINCE settings ({source}): {err}") from err


def model_kind(args, path: str) -> str:
    return args.kind if args.kind != "auto" else ("vision" if simclr_folder(path) is not None else "text")


def collect(args, path: str, kind: str) -> tuple[list[EmbeddedBatch], dict, str]:
    """(embedded batches, geometry, description of the scored space) for the model."""
    if kind == "text":
        from simcse_weince.diagnostics.scores import text_batches, text_pair_batches
        from simcse_weince.text.checkpoint import load_text_checkpoint
        from simcse_weince.text.sources.lines import read_sentences

        ckpt = load_text_checkpoint(path, args.pooler)
        model, tok = ckpt.model, ckpt.tokenizer
        space = f"text: {ckpt.description}; training-path outputs (pooler {model.pooler}" + (
            ", with the SimCSE MLP)" if model.mlp is not None else ", no MLP in the saved model)"
        )
        data_dir = senteval_root(resolve_data_path(args.data_dir) if args.data_dir else None)
        stsb_sentences, pairs = stsb_sentences_and_pairs(data_dir)
        sentences = stsb_sentences
        if args.sentences:
            sentences = [s for f in args.sentences for s in read_sentences(resolve_data_path(f))]
        if args.text_positives == "stsb":
            batches = list(text_pair_batches(model, tok, pairs, args.batch_size, args.num_batches, args.seed))
        else:
            batches = list(text_batches(model, tok, sentences, args.batch_size, args.num_batches, args.seed))
        geometry = text_geometry(model, tok, stsb_sentences, pairs, args.seed)
        return batches, geometry, space
    from simcse_weince.diagnostics.scores import vision_batches
    from simcse_weince.vision.augment import TwoViews, simclr_transform
    from simcse_weince.vision.data import Indexed, load_image_dataset
    from simcse_weince.vision.model import load_simclr

    model, cfg = load_simclr(path)
    base = load_image_dataset(args.vision_dataset, resolve_data_path(args.vision_data_dir), "test")
    ds = Indexed(base, None, TwoViews(simclr_transform(args.vision_dataset, cfg["image_size"])))
    batches = list(vision_batches(model, ds, args.batch_size, args.num_batches, args.seed))
    a = torch.cat([b.anchors for b in batches])
    p = torch.cat([b.positives for b in batches])
    geometry = {
        "alignment": alignment(a, p),
        "alignment_positives": "two augmented views",
        "uniformity": uniformity(a[:2000]),
        "uniformity_images": int(min(2000, len(a))),
    }
    return batches, geometry, f"vision: {cfg['backbone']} backbone + projection head outputs (the loss's space)"


def run(argv: Sequence[str]) -> dict:
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    path = resolve_model_path(args.model)
    kind = model_kind(args, path)
    loss, loss_source = statistics_loss(args, path, "simcse" if kind == "text" else "ntxent")  # before loading
    if loss_source.startswith("defaults"):
        logger.warning(defaults_warning(loss_source))
    if kind == "text":
        path = check_model_source(args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with kept_on_stop(lambda: kept_files(out, written)):
        report = diagnose(args, path, kind, loss, loss_source, out, written, t0)
    print(summary_text(report))
    return report


def diagnose(
    args: argparse.Namespace,
    path: str,
    kind: str,
    loss: ContrastiveLoss,
    loss_source: str,
    out: Path,
    written: list[Path],
    t0: float,
) -> dict:
    """Embed the batches, fit the tail, the link and the WEINCE statistics, write the plots and ``report.json``
    (each file added to ``written`` once complete); the report."""
    batches, geometry, space = collect(args, path, kind)
    if len(batches) < 2:
        raise ValueError(f"need at least 2 batches of {args.batch_size} (got {len(batches)}): lower --batch_size")
    score_batches = [b.score_batch() for b in batches]
    negatives = np.concatenate([negative_scores(b) for b in score_batches])
    ranks = np.concatenate([positive_ranks(b) for b in score_batches])
    logger.info("%d batches, %d negative scores; fitting the tail", len(batches), negatives.size)
    pot = fit_pot(negatives, args.pot_quantile, args.bootstrap, args.seed)
    stability = threshold_stability(negatives, args.stability_quantiles, max(50, args.bootstrap // 2), args.seed)
    logger.info("GPD xi = %.3f [%.3f, %.3f]; fitting the link family", pot.xi, *pot.xi_ci)
    link = select_link(score_batches)
    stats = [batch_statistics(b.anchors, b.positives, loss) for b in batches]
    lam_all = torch.cat([s.lam for s in stats]).cpu().numpy()
    report = {
        "model": args.model,
        "kind": kind,
        "positives": args.text_positives if kind == "text" else "two augmented views",
        "batches": len(batches),
        "batch_size": args.batch_size,
        "negative_scores": int(negatives.size),
        "positive_rank": {"top1": float(np.mean(ranks == 1)), "mean": float(ranks.mean())},
        "pot": pot.to_dict(),
        "threshold_stability": [f.to_dict() for f in stability],
        "link": link.to_dict() | link_note(float(np.mean(ranks == 1)), link.converged),
        "anchor_statistics_first_batch": summarise(stats[0]),
        "lambda_all_batches": {"mean": float(lam_all.mean()), "frac_gt_half": float((lam_all > 0.5).mean())},
        "weince_loss_config": loss.get_config_dict(),
        "weince_loss_settings_from": loss_source,
        "space": space,
        "geometry": geometry,
    }
    plots = {}
    for name, draw, file in (
        ("tail", lambda f: plot_tail(negatives, pot, f), "tail_gpd.png"),
        ("stability", lambda f: plot_stability(stability, f), "threshold_stability.png"),
        ("lambda", lambda f: plot_lambda(lam_all, f), "lambda_hist.png"),
        ("link", lambda f: plot_link(link, f), "link_loglik.png"),
    ):
        plots[name] = draw(out / file)
        written.append(out / file)
    report["plots"] = {k: str(v) for k, v in plots.items()}
    report["seconds"] = time.perf_counter() - t0
    (out / "report.json").write_text(strict_json.dumps(report, indent=2))
    written.append(out / "report.json")
    return report


def kept_files(out: Path, written: list[Path]) -> str:
    """What a stop leaves in ``out`` and how to go on."""
    again = "run the same command to diagnose again from the start"
    if not written:
        return f"nothing was written into {out} (the plots and report.json are written at the end); {again}"
    return f"kept {', '.join(p.name for p in written)} in {out}, report.json not written; {again} (it replaces them)"


def link_note(top1: float, converged: bool = True) -> dict:
    """Flag the case where the winners carry (almost) no information about the link: the positive (nearly)
    always ranks first, or the fit ran off to infinity (winners separable by their scores)."""
    if top1 < 0.99 and converged:
        return {"identifiable": True}
    why = f"the positive ranks first for {100 * top1:.1f}% of anchors" if top1 >= 0.99 else "the fit did not converge"
    return {
        "identifiable": False,
        "note": f"{why}: the observed winners barely constrain the link, so a and b are not identified and a ~0 gain "
        "says nothing either way",
    }


def summary_text(r: dict) -> str:
    pot, link, geo = r["pot"], r["link"], r["geometry"]
    endpoint = "none (xi >= 0)" if pot["endpoint"] is None else f"{pot['endpoint']:.4f}"
    lines = [
        f"{r['model']} ({r['kind']}): {r['batches']} batches of {r['batch_size']}, {r['negative_scores']:,} negatives",
        f"  POT q={pot['q']}: xi = {pot['xi']:.3f} [{pot['xi_ci'][0]:.3f}, {pot['xi_ci'][1]:.3f}], "
        f"sigma = {pot['sigma']:.4f}, endpoint = {endpoint}",
        f"  link selection (identified, {100 * link['level']:.0f}% CI): a = {link['a']:.3f} "
        f"[{link['a_ci'][0]:.3f}, {link['a_ci'][1]:.3f}] (softmax slope), b = {link['b']:.3f} "
        f"[{link['b_ci'][0]:.3f}, {link['b_ci'][1]:.3f}] (endpoint weight); held-out gain "
        f"{link['heldout_gain']:+.4f} [{link['heldout_gain_ci'][0]:+.4f}, {link['heldout_gain_ci'][1]:+.4f}] "
        "nats/anchor",
        *([f"  note: {link['note']}"] if not link.get("identifiable", True) else []),
        f"  WEINCE lambda (all batches): mean {r['lambda_all_batches']['mean']:.3f}, "
        f"share > 0.5 {r['lambda_all_batches']['frac_gt_half']:.3f}",
        f"  positive ranked first: {r['positive_rank']['top1']:.3f}; "
        f"alignment {geo.get('alignment', float('nan')):.4f}, uniformity {geo['uniformity']:.4f}",
        f"  report: {Path(r['plots']['tail']).parent / 'report.json'} ({r['seconds']:.0f} s)",
    ]
    source = r["weince_loss_settings_from"]
    lines.insert(
        -1,
        f"  warning: {defaults_warning(source)}" if source.startswith("defaults") else f"  WEINCE settings: {source}",
    )
    return "\n".join(lines)


def defaults_warning(source: str) -> str:
    """The line saying that the WEINCE statistics use the default loss settings (no ``run_config.yaml`` found)."""
    given = source.removeprefix("defaults").removeprefix(" + ")
    return (
        "no run_config.yaml beside the model, so the WEINCE statistics (lambda, beta) use the default loss settings"
        + (f" and the {given}" if given else "")
        + "; if the model was trained with other settings, pass them as flags (--beta_mode, --hardness_quantile, ...)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    return command_main(run, argv, log_info=True)


if __name__ == "__main__":
    raise SystemExit(main())
