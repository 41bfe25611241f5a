"""The WEINCE paper's vision protocol, with the controls that separate its three factors.

    python -m weince_lab.experiments.paper_protocol  # the paper's grid (GPU: paper_protocol.sh)
    python -m weince_lab.experiments.paper_protocol --quick  # a size a test runs (tiny data, 2 seeds)
    .venv/bin/python -m weince_lab.experiments.paper_protocol --config configs/vision/cpu_proxy_cifar10.yaml \\
        --arms a b c e0 --seeds 0 1 2 --runs_dir outputs/experiments/paper_protocol_cpu \\
        --out experiments/results/paper_protocol_cpu --extra --num_train_epochs 4   # the CPU proxy run

The paper's WEINCE number (hsme98/weince, ``slurm/submit_cifar100_r18_*.slurm``, ``scripts/aggregate_table23_r18.py``)
mixes three things: the per-anchor blend, two extra top-M hard-negative terms that only the WEINCE arm has, and a
best-of-27 selection (margin × κ_ρ × κ_aic, picked on a validation split per metric) that only the WEINCE arm gets.
The arms, each an ordinary training run per seed (``simcse_weince.cli.train_vision``):

* (a) InfoNCE;                              (b) InfoNCE + the two terms;
* (c) WEINCE at the grid's centre;          (d) WEINCE, best of the grid;
* (e) WEINCE + terms, best of the grid (the paper's arm);
* (f) InfoNCE + terms, best of a grid of equal size on τ and the two terms' weights (the same tuning budget);
* (e0) WEINCE + terms at the grid's centre (the CPU run's stand-in for (e));
* (g) the learned link, (h) InfoNCE with a learned τ, (i) the profiled link, (j) temperature-free InfoNCE (the
  registered losses ``learned_link``, ``learned_temperature``, ``profiled_link``, ``arctanh``; ``docs/algorithm.md``
  §6), without the terms.

Tuning budget: (a), (b), (c), (e0) and (g)–(j) are one configuration each (no grid); (d) and (e) take the best of
the WEINCE grid (margin × κ_ρ × κ_aic, 27 points), (f) the best of an InfoNCE grid of the same size (τ × the two
terms' weights). (g), (h) and (i) start from the base config's τ, as (a) runs at it (a = 1/τ, b = 0: InfoNCE at
step 0); what they learn or fit, (a, b) or a alone, is their own and no grid is searched over it. Their caps and
settings are the losses' defaults, and the learned scalars of (g) and (h) have the run's learning rate unless an
``--extra --loss_learning_rate`` changes it for every arm alike. (j) has no τ, so no knob at all.

The WEINCE arms use the authors' settings of ``tlambda_select`` (β = 1, q 0.2, tail 10 %, at least 32 points); the
terms are theirs (weights 0.5, M = 50, β_t from the global tail). The grid's centre is WEINCE's defaults (margin 2,
κ_ρ 10, κ_aic 1). Every run evaluates its last model (not a best checkpoint: no test-set selection) with
:mod:`weince_lab.experiments.heldout`: a 20 % stratified validation split of the training features per evaluation
seed (the same seeds for every arm), R@1/2/5/10/20/50 and weighted k-NN@50 against the other 80 %, and a linear
probe fitted on them; a run's figure is the mean over the evaluation seeds.

Selection, as the authors' aggregation script describes it: per configuration, the mean over encoder seeds of the
validation figure; among the configurations with every seed (all of them if none has), the best one, chosen
separately for each metric; its test figures are reported. The paired differences (same encoder seeds) isolate
each factor: (c)−(a) the blend, (b)−(a) the terms, (e)−(b) blend and grid given the terms, (d)−(c) the grid,
(e)−(f) WEINCE against InfoNCE at the same tuning budget; and, at the budget of (a), one configuration,
(g)−(a), (h)−(a), (i)−(a), (j)−(a) each new loss against InfoNCE and (g)−(h) the endpoint term given a learned
scale. Writes ``{out}.md``, ``{out}.json`` and ``{out}.png``.
Restartable: a finished run (``results.json`` in its folder; its held-out scores in ``protocol.json``) is
skipped, a killed one resumes from its last checkpoint; a folder that holds a run of other settings (another
config or ``--extra``) is refused, not reused.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from weince_lab.experiments.common import REPO, continue_argv, mean_std, run_log, run_module, write_results
from weince_lab.report import table

PAPER_CONFIG, QUICK_CONFIG = "cifar100_resnet18_authors.yaml", "cpu_proxy_cifar10.yaml"
RESULTS = "experiments/results/paper_protocol"
ARM_NAMES = ("a", "b", "c", "d", "e", "f", "e0", "g", "h", "i", "j")
DEFAULT_ARMS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
# The link losses' arms (docs/algorithm.md §6): ordinary runs of their registered loss, one configuration each.
TAU_STARTED = ("learned_link", "learned_temperature", "profiled_link")  # start at the base config's τ
NO_TAU = ("arctanh",)
WEINCE_KNOBS = ("margin", "kappa_rho", "kappa_aic")
INFONCE_KNOBS = ("temperature", "topm_softmax_weight", "topm_weibit_weight")
CENTRE = {"margin": 2.0, "kappa_rho": 10.0, "kappa_aic": 1.0}
# The authors' tlambda_select settings and extra terms (configs/vision/cifar100_resnet18_authors.yaml maps each flag).
WEINCE_SETTINGS = {"beta_mode": "unit", "q": 0.2, "tail_frac": 0.1, "min_tail_points": 32}
TERMS = {"topm_softmax_weight": 0.5, "topm_softmax_m": 50, "topm_weibit_weight": 0.5, "topm_weibit_m": 50,
         "topm_beta_auto": True}  # fmt: skip
NO_TERMS = {"topm_softmax_weight": 0.0, "topm_weibit_weight": 0.0}
# Every run is scored on its last model by the driver, not by the Trainer's per-epoch k-NN on the test set.
EVERY_RUN = {"eval_strategy": "no", "load_best_model_at_end": False, "eval_before_training": False,
             "disable_tqdm": True}  # fmt: skip
METRICS = ("linear_probe", "R@1", "R@2", "R@5", "R@10", "R@20", "R@50", "knn50")
PAIRS = (("c", "a", "the blend"), ("b", "a", "the terms"), ("e", "b", "blend and grid, given the terms"),
         ("d", "c", "the grid"), ("e", "f", "WEINCE vs InfoNCE at the same tuning budget"),
         ("e0", "b", "the blend, given the terms"), ("e0", "c", "the terms, given the blend"),
         ("e", "e0", "the grid, given the terms"), ("g", "a", "the learned link vs InfoNCE"),
         ("h", "a", "a learned τ vs InfoNCE"), ("g", "h", "the endpoint term, given a learned scale"),
         ("i", "a", "the profiled link vs InfoNCE"), ("j", "a", "temperature-free vs InfoNCE"))  # fmt: skip
QUICK = {
    "seeds": [0, 1], "eval_seeds": [1, 2], "grid_margin": [2.0], "grid_kappa_rho": [10.0],
    "grid_kappa_aic": [1.0], "grid_temperature": [0.5], "grid_softmax_weight": [0.5],
    "grid_weibit_weight": [0.25, 0.5],
}  # fmt: skip
QUICK_TRAINING = ["--train_per_class", "8", "--probe_train_per_class", "10", "--probe_test_per_class", "4",
                  "--image_size", "16",
                  "--max_steps", "1", "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "64",
                  "--dataloader_num_workers", "0", "--save_strategy", "no", "--topm_softmax_m", "4",
                  "--topm_weibit_m", "4", "--topm_min_tail_points", "16", "--logging_steps", "1"]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Arm:
    label: str
    loss: str  # a registered loss: infonce | weince | learned_link | learned_temperature | profiled_link | arctanh
    terms: bool
    grid: str | None  # None: one configuration; "weince" or "infonce": best of that grid


ARMS = {
    "a": Arm("InfoNCE", "infonce", False, None),
    "b": Arm("InfoNCE + top-M terms", "infonce", True, None),
    "c": Arm("WEINCE, grid centre", "weince", False, None),
    "d": Arm("WEINCE, best of grid", "weince", False, "weince"),
    "e": Arm("WEINCE + top-M terms, best of grid (the paper's arm)", "weince", True, "weince"),
    "f": Arm("InfoNCE + top-M terms, best of an equal grid (τ, weights)", "infonce", True, "infonce"),
    "e0": Arm("WEINCE + top-M terms, grid centre", "weince", True, None),
    "g": Arm("Learned link (a, b)", "learned_link", False, None),
    "h": Arm("InfoNCE, learned τ", "learned_temperature", False, None),
    "i": Arm("Profiled link (a, b)", "profiled_link", False, None),
    "j": Arm("Temperature-free (artanh)", "arctanh", False, None),
}


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one ``error:`` line (no usage text)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        fail(message)


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--config",
        default=None,
        help="base training YAML (default: the authors' CIFAR-100 arm; --quick: the CPU proxy)",
    )
    ap.add_argument("--arms", nargs="*", default=DEFAULT_ARMS, help=f"among {' '.join(ARM_NAMES)}")
    ap.add_argument("--seeds", type=int, nargs="*", default=[7, 21, 63, 84], help="encoder (training) seeds")
    ap.add_argument("--eval_seeds", type=int, nargs="*", default=[1, 2, 3, 4, 5], help="validation-split seeds")
    ap.add_argument("--val_ratio", type=float, default=0.2)
    ap.add_argument("--grid_margin", type=float, nargs="*", default=[0.0, 2.0, 6.0])
    ap.add_argument("--grid_kappa_rho", type=float, nargs="*", default=[5.0, 10.0, 20.0])
    ap.add_argument("--grid_kappa_aic", type=float, nargs="*", default=[0.5, 1.0, 2.0])
    ap.add_argument("--grid_temperature", type=float, nargs="*", default=[0.25, 0.5, 1.0], help="grid of arm (f)")
    ap.add_argument("--grid_softmax_weight", type=float, nargs="*", default=[0.25, 0.5, 1.0], help="grid of (f)")
    ap.add_argument("--grid_weibit_weight", type=float, nargs="*", default=[0.25, 0.5, 1.0], help="grid of (f)")
    ap.add_argument(
        "--runs_dir",
        default=None,
        help="the runs' folders (default: outputs/experiments/paper_protocol, with --quick paper_protocol_quick)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="table, JSON and plot prefix (default: experiments/results/"
        "paper_protocol; with --quick under the runs' folder)",
    )
    ap.add_argument("--quick", action="store_true", help="2 seeds, 1-point WEINCE grid, 2-point (f) grid, 1 step a run")
    ap.add_argument("--dry_run", action="store_true", help="list the runs and stop")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="overrides for every run (must come last)")
    args = ap.parse_args(argv)
    if args.config is None:
        args.config = str(REPO / "configs/vision" / (QUICK_CONFIG if args.quick else PAPER_CONFIG))
    if args.runs_dir is None:
        args.runs_dir = str(REPO / "outputs/experiments" / ("paper_protocol_quick" if args.quick else "paper_protocol"))
    if args.out is None:
        args.out = str(Path(args.runs_dir) / "paper_protocol") if args.quick else str(REPO / RESULTS)
    check_args(args)
    if args.quick:  # its sizes, where the command line did not choose others
        for name, value in QUICK.items():
            if getattr(args, name) == ap.get_default(name):
                setattr(args, name, value)
        args.extra = [*QUICK_TRAINING, *args.extra]
    return args


def check_args(args: argparse.Namespace) -> None:
    """One ``error:`` line for a bad option, before any run."""
    unknown = [a for a in args.arms if a not in ARMS]
    if unknown:
        fail(f"--arms: unknown arm {unknown[0]!r}; expected some of {', '.join(ARM_NAMES)}")
    if not args.arms:
        fail("--arms: no arm given; expected some of " + ", ".join(ARM_NAMES))
    if len(set(args.arms)) != len(args.arms):
        fail(f"--arms: an arm is given twice ({' '.join(args.arms)})")
    for name in ("seeds", "eval_seeds"):
        values = getattr(args, name)
        if not values or len(set(values)) != len(values) or min(values) < 0:
            fail(f"--{name}: expected distinct integers >= 0, got {values or 'none'}")
    if not 0 < args.val_ratio < 1:
        fail(f"--val_ratio {args.val_ratio}: expected a number in (0, 1)")
    grids = {"weince": ("grid_margin", "grid_kappa_rho", "grid_kappa_aic"),
             "infonce": ("grid_temperature", "grid_softmax_weight", "grid_weibit_weight")}  # fmt: skip
    for arm in args.arms:
        for name in grids.get(ARMS[arm].grid, ()):
            values = getattr(args, name)
            if not values:
                fail(f"--{name}: the grid of arm ({arm}) is empty; expected at least one value")
            if any(not math.isfinite(v) for v in values):
                fail(f"--{name}: expected finite numbers, got {values}")
    for value in args.grid_temperature:
        if value <= 0:
            fail(f"--grid_temperature: expected numbers > 0, got {value}")
    for name in ("grid_softmax_weight", "grid_weibit_weight"):
        if any(v < 0 for v in getattr(args, name)):
            fail(f"--{name}: expected numbers >= 0, got {getattr(args, name)}")
    if not Path(args.config).is_file():
        fail(f"--config {args.config}: no such file; expected a vision training YAML")
    # The arms' own knobs; the others (beta_mode, the terms' M, ...) an --extra may change for every arm alike.
    owned = {*WEINCE_KNOBS, *INFONCE_KNOBS, *NO_TERMS, *EVERY_RUN, "loss", "seed", "output_dir"}
    for token in args.extra:
        if token.startswith("--") and token[2:].split("=", 1)[0] in owned:
            fail(f"--extra {token}: set by the protocol's arms; change it through the driver's own options")


def base_temperature(config: str) -> float:
    """τ of the base config (the InfoNCE arms' τ outside the (f) grid)."""
    from simcse_weince.losses.weince import WeinceConfig

    cfg = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
    return float(cfg.get("temperature", WeinceConfig().temperature))


def tag(value: Any) -> str:
    return f"{value:g}".replace(".", "p").replace("-", "m") if isinstance(value, float) else str(value)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One configuration of one loss family: its knobs (a grid point) and whether the terms are on."""

    loss: str
    terms: bool
    knobs: tuple[tuple[str, Any], ...]

    @property
    def name(self) -> str:
        family = self.loss + ("+terms" if self.terms else "")
        return family + "".join(f"_{k}{tag(v)}" for k, v in self.knobs)

    def overrides(self) -> dict[str, Any]:
        out: dict[str, Any] = {"loss": self.loss}
        if self.loss == "weince":
            out |= WEINCE_SETTINGS
        out |= TERMS if self.terms else NO_TERMS
        out |= dict(self.knobs)
        return out | EVERY_RUN

    def label(self) -> str:
        return ", ".join(f"{k} {v:g}" for k, v in self.knobs)


def arm_settings(arm: Arm, args: argparse.Namespace, tau: float) -> list[Setting]:
    """The configurations an arm selects among (one for a single-configuration arm)."""
    if arm.loss in TAU_STARTED:
        return [Setting(arm.loss, False, (("temperature", tau),))]
    if arm.loss in NO_TAU:
        return [Setting(arm.loss, False, ())]
    if arm.loss == "weince":
        if arm.grid is None:
            points = [tuple(CENTRE.items())]
        else:
            points = [
                (("margin", m), ("kappa_rho", r), ("kappa_aic", a))
                for m in args.grid_margin
                for r in args.grid_kappa_rho
                for a in args.grid_kappa_aic
            ]
        return [Setting("weince", arm.terms, p) for p in points]
    if not arm.terms:
        return [Setting("infonce", False, (("temperature", tau),))]
    if arm.grid is None:
        points = [(("temperature", tau), ("topm_softmax_weight", 0.5), ("topm_weibit_weight", 0.5))]
    else:
        points = [
            (("temperature", t), ("topm_softmax_weight", ws), ("topm_weibit_weight", ww))
            for t in args.grid_temperature
            for ws in args.grid_softmax_weight
            for ww in args.grid_weibit_weight
        ]
    return [Setting("infonce", True, p) for p in points]


def cli_args(overrides: dict[str, Any]) -> list[str]:
    out = []
    for key, value in overrides.items():
        out += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return out


def run_argv(args: argparse.Namespace, setting: Setting, seed: int, out: Path) -> list[str]:
    return [args.config, *cli_args(setting.overrides()), "--seed", str(seed), "--output_dir", str(out), *args.extra]


def validate_runs(args: argparse.Namespace, runs: list[tuple[Setting, int]]) -> None:
    """Parse every distinct configuration as the training command would (one ``error:`` line for a bad value) and
    check that the data folder exists, before any run starts."""
    from simcse_weince.core.paths import resolve_data_path
    from simcse_weince.training.config import ConfigError

    seen = set()
    for setting, seed in runs:
        if setting.name in seen:
            continue
        seen.add(setting.name)
        try:
            data_args = parse_run(run_argv(args, setting, seed, Path(args.runs_dir) / "x"))["data"]
        except ConfigError as err:
            fail(f"run {setting.name}: {err}")
    root = Path(resolve_data_path(data_args.data_dir))
    if not data_args.download and not root.exists():
        fail(f"data_dir {data_args.data_dir} ({root}): no such folder; expected the {data_args.dataset} images there")


# The training settings a run's folder is compared on besides the model, data and loss groups (run_config.yaml).
TRAINING_KEYS = ("seed", "num_train_epochs", "max_steps", "per_device_train_batch_size", "learning_rate",
                 "weight_decay", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "max_grad_norm", "precision",
                 "gradient_accumulation_steps", "cpu_threads", "dataloader_num_workers")  # fmt: skip


GROUPS = ("model", "data", "loss", "training")  # the training command's argument groups, in its order


def parse_run(argv: list[str]) -> dict[str, Any]:
    """A run's argument groups by name, parsed as the training command parses ``argv``."""
    from simcse_weince.cli.train_vision import ARG_GROUPS
    from simcse_weince.training.config import parse_config

    return dict(zip(GROUPS, parse_config(ARG_GROUPS, argv), strict=True))


def check_same_settings(folder: Path, groups: dict[str, Any]) -> None:
    """Refuse (one ``error:`` line) a folder whose ``run_config.yaml`` records other settings than ``groups``: a
    run of another config or ``--extra`` must not be reused or resumed under this one's name."""
    saved_path = folder / "run_config.yaml"
    if not saved_path.is_file():
        return
    from simcse_weince.core.setting_changes import setting_changes
    from simcse_weince.training.config import to_plain

    saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {}
    now = {name: to_plain(group) for name, group in groups.items()}
    for name in GROUPS:
        group = saved.get(name) if isinstance(saved.get(name), dict) else {}
        changes = setting_changes(group, now[name], keys=TRAINING_KEYS if name == "training" else None)
        if changes:  # the first one, in the groups' order
            key, (before, after) = next(iter(changes.items()))
            fail(f"{folder} holds a run with {key} {before!r}, not {after!r} as now; use another --runs_dir "
                 "or remove that folder")  # fmt: skip


def train_if_needed(folder: Path, argv: list[str], groups: dict[str, Any]) -> str:
    """Train the run of ``argv`` (parsed: ``groups``) into ``folder`` unless it finished; a killed run resumes from
    its last complete checkpoint; a folder of other settings is refused."""
    check_same_settings(folder, groups)
    if (folder / "results.json").is_file():
        return "trained before"
    more, status = continue_argv(folder)
    run_module("simcse_weince.cli.train_vision", [*argv, *more], run_log(folder))
    return status


def evaluate_run(args: argparse.Namespace, folder: Path, groups: dict[str, Any], cache: dict) -> dict:
    """The held-out scores of a run's last model (cached in ``protocol.json``): per evaluation seed and their mean;
    ``groups`` are the run's parsed settings, ``cache`` keeps the last probe sets."""
    path = folder / "protocol.json"
    if path.is_file():
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError:  # unreadable: scored again
            saved = {}
        if saved.get("eval_seeds") == list(args.eval_seeds) and saved.get("val_ratio") == args.val_ratio:
            return saved
    import torch

    from simcse_weince.core.atomic import write_text_atomic
    from simcse_weince.vision.evaluation import extract_features
    from simcse_weince.vision.model import load_simclr
    from simcse_weince.vision.recipe import build_datasets
    from weince_lab.experiments.heldout import heldout_scores

    data_args, train_args = groups["data"], groups["training"]
    key = json.dumps(dataclasses.asdict(data_args), sort_keys=True)
    if key not in cache:
        cache.clear()
        _, probe_train, probe_test, num_classes = build_datasets(data_args)
        cache[key] = (probe_train, probe_test, num_classes)
    probe_train, probe_test, num_classes = cache[key]
    model, _ = load_simclr(folder / "model")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    bs = train_args.per_device_eval_batch_size
    tr_f, tr_y = extract_features(model, probe_train, bs, device)
    te_f, te_y = extract_features(model, probe_test, bs, device)
    if bool(torch.isfinite(tr_f).all()) and bool(torch.isfinite(te_f).all()):
        per_seed = {
            str(s): heldout_scores(tr_f, tr_y, te_f, te_y, num_classes, s, args.val_ratio) for s in args.eval_seeds
        }
    else:  # a diverged run: its figures are NaN, and no selection takes it
        print(f"warning: {folder}: the model's features are not finite; its figures are NaN", flush=True)
        per_seed = {
            str(s): {part: dict.fromkeys(METRICS, math.nan) for part in ("val", "test")} for s in args.eval_seeds
        }
    n = len(args.eval_seeds)
    mean = {
        part: {m: float(sum(per_seed[str(s)][part][m] for s in args.eval_seeds) / n) for m in METRICS}
        for part in ("val", "test")
    }
    result = {"eval_seeds": list(args.eval_seeds), "val_ratio": args.val_ratio, "per_seed": per_seed, "mean": mean}
    write_text_atomic(path, json.dumps(result, indent=2))  # a kill never leaves half a file
    return result


def select(settings: list[Setting], scores: dict, seeds: list[int]) -> dict:
    """Per metric: the configuration with the best mean validation figure among those with every seed (all of them
    if none has), and its per-seed test figures."""
    out = {}
    for m in METRICS:
        complete = [s for s in settings if all((s.name, seed) in scores for seed in seeds)]
        candidates = complete or [s for s in settings if any((s.name, seed) in scores for seed in seeds)]
        if not candidates:
            continue

        def val_mean(s: Setting, m: str = m) -> float:
            """The mean validation figure over the seeds present; -inf for a diverged (NaN) configuration."""
            vals = [scores[s.name, seed]["mean"]["val"][m] for seed in seeds if (s.name, seed) in scores]
            mean = sum(vals) / len(vals)
            return mean if math.isfinite(mean) else -math.inf

        best = max(candidates, key=val_mean)  # the first of equals, in grid order
        test = {seed: scores[best.name, seed]["mean"]["test"][m] for seed in seeds if (best.name, seed) in scores}
        out[m] = {"config": best.label(), "run": best.name, "val_mean": val_mean(best), "complete": bool(complete),
                  "test": test}  # fmt: skip
    return out


def t_halfwidth(values: list[float]) -> float:
    """Half-width of the 95 % Student-t interval of the mean; NaN for fewer than 2 values."""
    from weince_lab.simulation.search import mean_interval

    if len(values) < 2:
        return float("nan")
    mean, _, high = mean_interval(values)
    return high - mean


def summarise(args: argparse.Namespace, chosen: dict[str, dict]) -> tuple[str, dict]:
    """The table (paper's shape), the paired differences and the selected configurations, as markdown and JSON."""
    arms, differences = [], []
    summary: dict[str, Any] = {"arms": {}, "differences": {}, "seeds": args.seeds, "eval_seeds": args.eval_seeds}
    for arm, sel in chosen.items():
        cells = []
        for m in METRICS:
            vals = list(sel[m]["test"].values()) if m in sel else []
            mu, sd = mean_std(vals) if vals else (float("nan"), float("nan"))
            cells.append(f"{mu:.2f} ± {sd:.2f}" if vals else "—")
        summary["arms"][arm] = {"label": ARMS[arm].label, "selected": sel}
        arms.append([f"({arm}) {ARMS[arm].label}", *cells])
    for x, y, what in PAIRS:
        if x not in chosen or y not in chosen:
            continue
        cells, entry = [], {}
        for m in METRICS:
            common = sorted(set(chosen[x][m]["test"]) & set(chosen[y][m]["test"]))
            diffs = [chosen[x][m]["test"][s] - chosen[y][m]["test"][s] for s in common]
            mu, sd = mean_std(diffs) if diffs else (float("nan"), float("nan"))
            hw = t_halfwidth(diffs)
            entry[m] = {"mean": mu, "std": sd, "ci95_halfwidth": hw, "per_seed": diffs, "seeds": common}
            cells.append(f"{mu:+.2f} ± {sd:.2f} [{mu - hw:+.2f}, {mu + hw:+.2f}]")
        summary["differences"][f"({x})-({y})"] = {"isolates": what, **entry}
        differences.append([f"({x})−({y}): {what}", *cells])
    lines = [
        *table(["arm", *METRICS], arms),
        "", "Paired differences of the test figures (same encoder seeds): mean ± std [95 % t-interval]", "",
        *table(["difference", *METRICS], differences),
    ]  # fmt: skip
    best_of = [a for a in chosen if ARMS[a].grid is not None]
    if best_of:
        lines += ["", "Configuration each best-of arm selected (by the validation figure, per metric):", ""]
        lines += table(
            ["arm", *METRICS], [[f"({a})", *(chosen[a][m]["config"] if m in chosen[a] else "—" for m in METRICS)]
                                for a in best_of]
        )  # fmt: skip
    return "\n".join(lines), summary


def plot(summary: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    diffs = summary["differences"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(METRICS) * max(1, len(diffs)) / 2), 3.8))
    width = 0.8 / max(1, len(diffs))
    for i, (name, entry) in enumerate(diffs.items()):
        xs = [j + i * width for j in range(len(METRICS))]
        mus = [entry[m]["mean"] for m in METRICS]
        errs = [0.0 if math.isnan(entry[m]["ci95_halfwidth"]) else entry[m]["ci95_halfwidth"] for m in METRICS]
        ax.bar(xs, mus, width, yerr=errs, capsize=3, label=f"{name}: {entry['isolates']}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(METRICS))], METRICS)
    ax.set_ylabel("test difference (points), 95 % t-interval")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tau = base_temperature(args.config)
    per_arm = {arm: arm_settings(ARMS[arm], args, tau) for arm in args.arms}
    runs: list[tuple[Setting, int]] = []
    for seed in args.seeds:  # seed by seed, so that a partial grid already pairs every arm
        for arm in args.arms:
            for setting in per_arm[arm]:
                if (setting, seed) not in runs:
                    runs.append((setting, seed))
    print(f"{len(runs)} runs: {len(args.arms)} arms × {len(args.seeds)} seeds ({args.config})", flush=True)
    if args.dry_run:
        for setting, seed in runs:
            print(f"  {setting.name} seed {seed}")
        return 0
    validate_runs(args, runs)
    started, scores, cache, trained = time.perf_counter(), {}, {}, 0
    for i, (setting, seed) in enumerate(runs, 1):
        folder = Path(args.runs_dir) / f"{setting.name}-seed{seed}"
        t0 = time.perf_counter()
        argv = run_argv(args, setting, seed, folder)
        groups = parse_run(argv)
        status = train_if_needed(folder, argv, groups)
        scores[setting.name, seed] = evaluate_run(args, folder, groups, cache)
        trained += status != "trained before"
        elapsed = time.perf_counter() - started
        eta = elapsed / max(trained, 1) * (len(runs) - i)
        print(f"[{i}/{len(runs)}] {setting.name} seed {seed}: {status} in {time.perf_counter() - t0:.0f} s; "
              f"elapsed {elapsed / 60:.1f} min, about {eta / 60:.0f} min to go", flush=True)  # fmt: skip
    chosen = {arm: select(per_arm[arm], scores, args.seeds) for arm in args.arms}
    table, summary = summarise(args, chosen)
    header = (
        f"The paper's protocol ({Path(args.config).name} {' '.join(args.extra)}): encoder seeds {args.seeds}, "
        f"evaluation seeds {args.eval_seeds}, {args.val_ratio:.0%} validation split; test figures × 100, "
        "mean ± std over encoder seeds"
    )
    prefix = Path(args.out)
    write_results(prefix, table, {"header": header, **summary}, header)
    plot(summary, prefix.with_suffix(".png"), header)
    print(header + "\n\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
