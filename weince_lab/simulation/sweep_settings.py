"""The settings of the Ground truth II sweeps: one checked field per option, the full and ``--quick`` sizes.

Four sweeps over universes with a known kernel (:mod:`~weince_lab.simulation.universe`):

* ``proposition``: Whiteley's Proposition 1. For the fixed embedding φ = the true vectors, the measured CE − R_k
  against k per kernel and τ, its log-log slope, the exact first-order constant and Whiteley's bounds, in the
  variants of ``--variants`` (:data:`VARIANTS`): the negatives drawn from the items other than the anchor
  (``excluded``), and Whiteley's literal one, drawn from π = all items, the anchor included (``literal``).
* ``negatives``: a free table trained with each loss at each k (fixed τ). The gap of the trained search to the
  Bayes search against k, with its slope per seed and the interval across seeds; the paired WEINCE − InfoNCE
  differences; the λ the loss chose; and the link coefficients (a, b) read off the learned cosines.
* ``temperature``: the same at a fixed k across τ and two training-set sizes. It gives the best τ per kernel, and
  shows whether a high τ makes the gap vary less across seeds and sample sizes.
* ``encoder``: an MLP encoder of noisy observations, trained on half of the items and scored on both halves, so
  the held-out half measures how the learned search generalises to unseen items.

:class:`SweepSettings` holds every option of a sweep; each field carries its range check
(:mod:`simcse_weince.core.checks`) and its ``--help`` text, and the ``simcse-simulate`` flags are derived from the
fields. The messages name the option as its flag (``--taus must be ...``). :func:`resolve` fills the options not
given: the sweep's own default, over the ``--quick`` size when asked, over the full size (the fields' defaults).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from simcse_weince.core import checks
from weince_lab.simulation.learning import LOSSES, anneal_below_steps, build_loss
from weince_lab.simulation.universe import KERNELS, kernel_law

SWEEPS: tuple[str, ...] = ("proposition", "negatives", "temperature", "encoder")
# The proposition's variants: its negatives uniform over the items other than the anchor (the sweeps' own search),
# or over all items, the anchor included (Whiteley's literal Proposition 1).
VARIANTS: tuple[str, ...] = ("excluded", "literal")
MAX_SEED = 2**62
# The options that differ per sweep, at the full size; then the --quick size (a test's), whose per-sweep entries
# replace the full size's. An option given on the command line wins over both.
PER_SWEEP: dict[str, dict[str, Any]] = {
    "proposition": {"ks": (4, 16, 64, 256, 1024), "taus": (0.05, 0.1, 0.2, 0.5), "losses": (), "pairs": (0,)},
    "negatives": {"ks": (4, 16, 64, 256, 1024), "taus": (0.1,),
                  "losses": ("infonce", "weince", "weince_unit", "oracle"), "pairs": (100_000,)},
    "temperature": {"ks": (64,), "taus": (0.02, 0.05, 0.1, 0.2, 0.5), "losses": ("infonce", "weince"),
                    "pairs": (10_000, 100_000)},
    "encoder": {"ks": (64,), "taus": (0.1,), "losses": ("infonce", "weince", "oracle"), "pairs": (100_000,),
                "items": 1024},
}  # fmt: skip
QUICK: dict[str, Any] = {
    "items": 64, "dim": 4, "seeds": (0, 1), "steps": 150, "batch": 64, "lr": 0.05, "eval_sets": 256,
    "eval_sizes": (8,), "link_batches": 2, "link_anchors": 64, "link_size": 16, "samples": 20_000,
    "obs_width": 8, "hidden": 16,
    "proposition": {"ks": (16, 64, 256, 1024), "taus": (0.5,), "losses": (), "pairs": (0,)},
    "negatives": {"ks": (4, 16, 64), "taus": (0.1,), "losses": ("infonce", "weince"), "pairs": (4000,)},
    "temperature": {"ks": (16,), "taus": (0.1, 0.5), "losses": ("infonce", "weince"), "pairs": (1000, 4000)},
    "encoder": {"ks": (16,), "taus": (0.1,), "losses": ("infonce", "weince"), "pairs": (4000,), "items": 128},
}  # fmt: skip
_TRAINING = {"steps", "batch", "lr", "anneal", "eval_sets", "eval_sizes", "losses", "pairs"}
_LINK = {"link_batches", "link_anchors", "link_size"}
_ENCODER = {"obs_width", "hidden", "noise", "early_stop"}
_PROPOSITION = {"samples", "variants"}
# Settings a sweep does not read: changing them does not stop a resume. The proposition's variants are part of each
# of its cells (a change runs the cells lacking them again; a store made before they existed still resumes).
IGNORED: dict[str, set[str]] = {
    "proposition": _TRAINING | _LINK | _ENCODER | {"variants"},
    "negatives": _PROPOSITION | _ENCODER,
    "temperature": _PROPOSITION | _ENCODER,
    "encoder": _PROPOSITION,  # the link settings refit the held-out items' link
}
# The sweeps that take one value of a list option (the others sweep over it).
SINGLE: dict[str, tuple[str, ...]] = {
    "negatives": ("taus", "pairs"),
    "temperature": ("ks",),
    "encoder": ("ks", "taus", "pairs"),
}


# ---- checks of the options (each reports the option as its flag) --------------------------------------------------
def _flag(check: checks.Check) -> checks.Check:
    """``check`` reporting the field as its command-line flag (``--items must be ...``) and a list as typed."""

    def flagged(name: str, value: Any, owner: Any = None) -> None:
        check(f"--{name}", _plain(value), owner)

    return flagged


def _distinct(name: str, values: Any) -> None:
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a value, got {values!r}")


def _every(check: checks.Check, expected: str, *, distinct: bool = False) -> checks.Check:
    """A non-empty list, every value accepted by ``check``, reported as ``<name> must be <expected>, got <the
    list>``; no value twice (reported the same way when ``expected`` says ``distinct``)."""

    def every(name: str, values: Any, owner: Any = None) -> None:
        ok = bool(values) and not (distinct and len(set(values)) != len(values))
        try:
            for value in values:
                check(name, value, owner)
        except ValueError:
            ok = False
        if not ok:
            checks.fail(name, expected, values)
        _distinct(name, values)

    return every


def _members(choices: tuple[str, ...], *, empty: bool = False) -> checks.Check:
    """A list of ``choices`` (the first other value is named), no value twice."""

    def members(name: str, values: Any, owner: Any = None) -> None:
        if not (values or empty):
            checks.fail(name, f"some of {choices}", values)
        for value in values:
            if value not in choices:
                checks.fail(name, f"of {choices}", value)
        _distinct(name, values)

    return members


def _seed(name: str, value: Any, owner: Any = None) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_SEED):
        raise ValueError(name)


def _single(name: str, values: Any, owner: Any) -> None:
    """The sweep takes one value of this option."""
    if name.removeprefix("--") in SINGLE.get(owner.sweep, ()) and len(values) != 1:
        raise ValueError(f"{name}: the {owner.sweep} sweep takes one value, got {values!r}")


def _ks(name: str, values: Any, owner: Any) -> None:
    # WEINCE's tail fits need K >= 3 candidates (fewer fall back to β = 1, which would bend even the oracle's link).
    low = 1 if owner.sweep == "proposition" else 3
    _every(checks.integer_at_least(low), f"integers >= {low}")(name, values, owner)
    _single(name, values, owner)
    if owner.sweep in ("proposition", "negatives") and len(values) < 2:
        raise ValueError(f"{name}: a slope needs at least 2 values of k")


def _taus(name: str, values: Any, owner: Any) -> None:
    _every(checks.positive_finite, "finite numbers > 0")(name, values, owner)
    _single(name, values, owner)


def _losses(name: str, values: Any, owner: Any) -> None:
    """Arms of :data:`LOSSES`, each maybe with its knobs (``hcl:hcl_beta=0.5``), built once here so that a knob the
    loss does not take, or a value out of its range, stops before any cell runs."""
    for value in values:
        if not isinstance(value, str):
            checks.fail(name, f"arms of {LOSSES}", value)
        try:
            build_loss(value, 0.1, kernel_law("vmf", 10.0))
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
    _distinct(name, values)
    if owner.sweep != "proposition" and not values:
        raise ValueError(f"{name}: a training sweep needs at least one loss")


def _pairs(name: str, values: Any, owner: Any) -> None:
    if owner.sweep == "proposition":  # not read: only kept distinct
        _distinct(name, values)
        return
    _every(checks.integer_at_least(1), "integers >= 1")(name, values, owner)
    _single(name, values, owner)


def _positive(value: Any) -> bool:
    return checks.is_real(value) and value > 0


def _items(name: str, value: Any, owner: Any) -> None:
    if owner.sweep == "encoder" and checks.is_real(value):
        # early stopping splits the held-out half again (validation, test), each part >= 3 items
        need, parts = (12, "a quarter for validation and a quarter") if _positive(owner.early_stop) else (6, "half")
        if value < need:
            raise ValueError(f"{name}: the encoder sweep holds out {parts} of the items; needs >= {need}, got {value}")
    checks.integer_at_least(3)(name, value, owner)


def _blend_lambda(name: str, value: Any, owner: Any) -> None:
    """Every kernel's parameters, also those of kernels not run: a bad value is never kept."""
    for kernel in KERNELS:
        kernel_law(kernel, owner.kappa, owner.beta, value)


def _anneal(name: str, value: Any, owner: Any) -> None:
    checks.integer_at_least(0)(name, value, owner)
    anneal_below_steps(name, value, owner.steps, "--steps")


def _option(check: checks.Check, help: str) -> dict[str, Any]:
    return checks.setting(_flag(check), help)


_AT_LEAST_2 = checks.integer_at_least(2)
_SEEDS = _every(_seed, "distinct integers in [0, 2**62)", distinct=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepSettings:
    """Every option of one sweep, checked at construction (``ValueError`` naming the option as its flag).

    The list options hold tuples, sorted ascending where the order is read (slopes, "the largest k").
    :meth:`to_dict` is the form saved beside the cells (``<sweep>.settings.json``) and in the report's JSON.

    Example:
        >>> resolve("negatives", {"kernels": ["vmf"]}, quick=True).ks
        (4, 16, 64)
    """

    sweep: str = field(metadata=_option(checks.one_of(SWEEPS), "The sweep."))
    kernels: tuple[str, ...] = field(default=KERNELS, metadata=_option(_members(KERNELS), f"Of {KERNELS}."))
    items: int = field(default=512, metadata=_option(_items, "N, the universe's items."))
    dim: int = field(default=8, metadata=_option(_AT_LEAST_2, "d, the latent (and the table's) dimension."))
    kappa: float = field(
        default=10.0, metadata=_option(checks.positive_finite, "The vMF concentration κ (τ* = 1/κ), vmf and blend.")
    )
    beta: float = field(
        default=3.0, metadata=_option(checks.positive_finite, "The endpoint kernel's β*, endpoint and blend.")
    )
    blend_lambda: float = field(default=0.5, metadata=_option(_blend_lambda, "The blend's λ*, in (0, 1)."))
    seeds: tuple[int, ...] = field(default=(0, 1, 2), metadata=_option(_SEEDS, "The seeds."))
    steps: int = field(default=2000, metadata=_option(checks.integer_at_least(1), "Training steps."))
    batch: int = field(default=256, metadata=_option(_AT_LEAST_2, "Anchors per step."))
    lr: float = field(default=0.02, metadata=_option(checks.positive_finite, "Adam's learning rate."))
    anneal: int = field(
        default=0,
        metadata=_option(
            _anneal,
            "The last steps of a run (of the budget and of its convergence check alike), over which Adam's rate "
            "decays linearly to 0; 0: a constant rate.",
        ),
    )
    eval_sets: int = field(
        default=4096, metadata=_option(_AT_LEAST_2, "Fresh candidate sets per size for the search gap.")
    )
    eval_sizes: tuple[int, ...] = field(
        default=(16, 256),
        metadata=_option(
            _every(checks.integer_at_least(3), "integers >= 3 (the tail fits need 3 candidates)"),
            "Candidate-set sizes of the search gap.",
        ),
    )
    link_batches: int = field(
        default=8, metadata=_option(_AT_LEAST_2, "Batches of the link fit on the learned cosines.")
    )
    link_anchors: int = field(default=256, metadata=_option(_AT_LEAST_2, "Anchors per batch of the link fit."))
    link_size: int = field(default=64, metadata=_option(_AT_LEAST_2, "Candidates per anchor of the link fit."))
    samples: int = field(default=200_000, metadata=_option(_AT_LEAST_2, "Monte Carlo samples per k (proposition)."))
    variants: tuple[str, ...] = field(
        default=VARIANTS,
        metadata=_option(
            _members(VARIANTS),
            f"Of {VARIANTS} (proposition): the negatives drawn from the items other than the anchor, or from all "
            "items, the anchor included (Whiteley's literal Proposition 1).",
        ),
    )
    obs_width: int = field(
        default=32, metadata=_option(_AT_LEAST_2, "Width of the items' noisy observations (encoder).")
    )
    hidden: int = field(default=128, metadata=_option(_AT_LEAST_2, "Hidden width of the MLP encoder (encoder)."))
    noise: float = field(default=0.1, metadata=_option(checks.non_negative(), "Noise σ of the observations (encoder)."))
    early_stop: int = field(
        default=0,
        metadata=_option(
            checks.integer_at_least(0),
            "Encoder: hold out half of the unseen items for validation, read their universe KL every this many "
            "steps, and score the encoder where it was lowest (its check: the same choice over the 1.5× run); "
            "0: at the last step, every unseen item scored.",
        ),
    )
    ks: tuple[int, ...] = field(metadata=_option(_ks, "Negatives per anchor."))
    taus: tuple[float, ...] = field(metadata=_option(_taus, "Temperatures."))
    losses: tuple[str, ...] = field(
        metadata=_option(_losses, f"Of {LOSSES} (training sweeps), each maybe with knobs: hcl:hcl_beta=0.5.")
    )
    pairs: tuple[int, ...] = field(metadata=_option(_pairs, "Training-set sizes (training sweeps)."))

    def __post_init__(self) -> None:
        for name in _LISTS:  # a list given as any sequence is kept as a tuple
            value = getattr(self, name)
            if isinstance(value, str) or not hasattr(value, "__iter__"):
                raise ValueError(f"--{name} must be a list, got {value!r}")
            value = tuple(value)
            if name in ("ks", "taus", "pairs", "eval_sizes"):  # ascending: slopes and "the largest k" read the order
                with contextlib.suppress(TypeError):  # values that do not compare: the checks name them
                    value = tuple(sorted(value))
            object.__setattr__(self, name, value)
        checks.check_fields(self)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON values (lists for the tuples), in the fields' order; ``variants`` only in the
        proposition's (the training sweeps do not read it), ``anneal`` and ``early_stop`` only when > 0 (a constant
        rate and no early stopping, as every store made before them had): the stored settings files stay as they
        were."""
        return {
            f.name: _plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if (f.name != "variants" or self.sweep == "proposition")
            and (f.name not in ("anneal", "early_stop") or getattr(self, f.name))
        }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


_LISTS = tuple(f.name for f in dataclasses.fields(SweepSettings) if str(f.type).startswith("tuple"))
OPTIONS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SweepSettings) if f.name != "sweep")


def resolve(sweep: str, given: Mapping[str, Any], *, quick: bool = False) -> SweepSettings:
    """The sweep's settings: the options ``given`` (``None`` = not given), then the sweep's own defaults and the
    ``--quick`` size when ``quick``, then the full size.

    Raises:
        ValueError: an unknown sweep or option, or a value outside its range (naming the option).
    """
    checks.one_of(SWEEPS)("sweep", sweep)
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown sweep options {unknown}; expected some of {list(OPTIONS)}")
    size = {k: v for k, v in QUICK.items() if k not in SWEEPS} if quick else {}
    defaults = {**size, **(QUICK if quick else PER_SWEEP)[sweep]}
    values = {**defaults, **{k: v for k, v in given.items() if v is not None}}
    return SweepSettings(sweep=sweep, **values)
