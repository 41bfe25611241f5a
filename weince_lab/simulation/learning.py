r"""Learning a known similarity: an embedding table or an encoder, trained with the project's own losses.

The model is a table E (N × d′) (:func:`train_table`), or a small MLP encoder of noisy observations of the latent
vectors (:func:`train_encoder`), which also embeds items it never saw in training. In both, normalised rows ê_x
give cosines ŝ_xy = ê_x·ê_y. A training set is a fixed sample of ``pairs`` positive pairs (x, y⁺) drawn from the
universe's M; each step takes ``batch`` of them and draws k fresh negatives per anchor, uniform over the other
items. Each anchor's candidates are its positive and its own k negatives: the A × (1 + k)
:class:`~simcse_weince.losses.layout.ScoreMatrix` (positive in column 0, K = k) goes through the loss's own
``loss_from_scores``, so InfoNCE and WEINCE (its statistics, β modes, λ) are exactly the shipped code. Adam on the
table or the encoder's weights.

Pairs, negatives and the initial table come from seeded generators that do not depend on the loss, so at one seed
every loss sees the same pairs, the same negatives and the same initial table (or encoder).

Memory: the scores are A × N before the candidates' columns are picked and A × (1 + k) after, a few MB at
k = 1024; no gradient cache is needed at these sizes.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import torch

from simcse_weince.core import checks
from simcse_weince.losses import loss_class
from simcse_weince.losses.base import ContrastiveLoss
from simcse_weince.losses.layout import ScoreMatrix
from weince_lab.simulation.universe import Universe
from weince_lab.simulation.winners import BlendedLaw

FIELD_LOSSES: tuple[str, ...] = ("hardness_infonce", "hcl", "dcl", "focal_infonce", "sigmoid")
LOSSES: tuple[str, ...] = (
    "infonce", "weince", "weince_unit", "weince_hill", "oracle",
    "learned_temperature", "learned_link", "learned_link_b", "profiled_link", "arctanh", *FIELD_LOSSES,
)  # fmt: skip


# The arms whose loss class takes its own knobs after τ (``NAME:knob=value,...``; the others take none).
KNOBBED: tuple[str, ...] = ("infonce", "weince", "learned_temperature", "learned_link", "profiled_link", *FIELD_LOSSES)


def parse_arm(arm: str) -> tuple[str, dict[str, float | str | None]]:
    """An arm ``NAME`` or ``NAME:knob=value[,knob=value...]`` as its loss name and knobs (values: numbers, ``none``
    or a word), e.g. ``hcl:hcl_beta=0.5`` → ``("hcl", {"hcl_beta": 0.5})``.

    Raises:
        ValueError: an unknown name, a malformed knob, or knobs on an arm that takes none (naming the arm).
    """
    name, colon, rest = arm.partition(":")
    checks.one_of(LOSSES)("loss", name)
    knobs: dict[str, float | str | None] = {}
    for part in rest.split(",") if colon else ():
        knob, equals, value = part.partition("=")
        if not (knob and equals and value) or knob in knobs:
            raise ValueError(f"loss arm {arm!r}: expected NAME or NAME:knob=value[,knob=value...], got {part!r}")
        knobs[knob] = _knob_value(value)
    if knobs and name not in KNOBBED:
        raise ValueError(f"loss arm {arm!r}: {name} takes no knobs here (arms with knobs: {', '.join(KNOBBED)})")
    return name, knobs


def _knob_value(text: str) -> float | str | None:
    if text.lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def build_loss(name: str, tau: float, kernel: BlendedLaw) -> ContrastiveLoss:
    """The loss of an arm: ``infonce`` at τ; ``weince`` (the shipped defaults, β mode ``ols``), ``weince_unit`` or
    ``weince_hill`` at τ; ``oracle``, the kernel's own link (λ* fixed, β clamped to β*, τ* = 1/κ): WEINCE's logit
    at the true parameters, whatever ``tau`` is; the link losses (issue 43): ``learned_temperature``,
    ``learned_link`` (a and b learned) and ``learned_link_b`` (b alone, a = 1/τ), starting at (1/τ, 0);
    ``profiled_link`` from the same start; ``arctanh``, which has no τ; the field's losses (issue 55:
    ``hardness_infonce``, ``hcl``, ``dcl``, ``focal_infonce``, ``sigmoid``) at τ and their defaults (the sigmoid
    loss's t starting at 1/τ), each searching with its own ``search_logits``.

    An arm with knobs (:func:`parse_arm`, e.g. ``hcl:hcl_beta=0.5``) is that loss at τ with those knobs.

    Raises:
        ValueError: an unknown arm, or a knob its loss does not take or a value outside its range (naming the arm).
    """
    arm = name
    name, knobs = parse_arm(arm)
    if name in KNOBBED:
        try:
            return loss_class(name)(tau, **knobs)
        except TypeError as err:  # a knob the loss does not take
            raise ValueError(f"loss arm {arm!r}: {err}") from None
    if name in ("weince_unit", "weince_hill"):
        return loss_class("weince")(tau, beta_mode=name.split("_")[1])
    if name == "learned_link_b":
        return loss_class("learned_link")(tau, link_learn_a=False)
    if name == "arctanh":
        return loss_class("arctanh")()
    return loss_class("weince")(kernel.tau, fixed_lambda=kernel.lam, beta_clamp=(kernel.beta, kernel.beta))  # oracle


_AT_LEAST_1 = checks.integer_at_least(1)
_AT_LEAST_2 = checks.integer_at_least(2)


@dataclass(frozen=True)
class TrainConfig:
    """One training run of a table.

    Raises:
        ValueError: a value outside its range (naming it).
    """

    negatives: int = field(default=64, metadata=checks.setting(_AT_LEAST_1, "k per anchor, >= 1."))
    dim: int = field(default=8, metadata=checks.setting(_AT_LEAST_2, "d′ of the table, >= 2."))
    steps: int = field(default=2000, metadata=checks.setting(_AT_LEAST_1, "Adam steps, >= 1."))
    batch: int = field(default=256, metadata=checks.setting(_AT_LEAST_2, "Anchors per step, >= 2."))
    pairs: int = field(default=100_000, metadata=checks.setting(_AT_LEAST_1, "The training sample size, >= 1."))
    lr: float = field(default=0.02, metadata=checks.setting(checks.positive_finite, "Adam's learning rate, > 0."))
    seed: int = 0
    anneal: int = field(
        default=0,
        metadata=checks.setting(
            checks.integer_at_least(0), "The last steps, over which the rate decays linearly to 0 (0: constant)."
        ),
    )

    def __post_init__(self) -> None:
        checks.check_fields(self)
        anneal_below_steps("anneal", self.anneal, self.steps, "steps")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainResult:
    table: torch.Tensor  # (N, d′) float64 unit rows, detached
    final_loss: float  # mean loss over the last tenth of the steps
    lambda_mean: float  # WEINCE's mean λ over the last tenth of the steps (0 for InfoNCE)
    beta_mean: float  # WEINCE's mean β over the last tenth (1 for InfoNCE)
    learned: dict[str, float] = field(default_factory=dict)  # the link losses' (a, b) at the end
    check: Check | None = None  # the state at the convergence check's step count (``check_steps``), if asked
    stops: dict[str, Stop] = field(default_factory=dict)  # early stopping's best states per track (``Watch``)


@dataclass
class Check:
    """The trained state at ``steps`` of a run continued past its budget (the convergence check), while the run's
    own objects (the table, the encoder, the loss) are left at the budget: the table's unit rows, the trained
    parameters' values and the loss's state there."""

    steps: int
    table: torch.Tensor
    parameters: list[torch.Tensor]
    loss_state: dict


@dataclass
class Stop:
    """The state an early-stopped run is read at: the step, its validation ``score`` there, the trained parameters'
    values and the loss's state."""

    steps: int
    score: float
    parameters: list[torch.Tensor]
    loss_state: dict


@dataclass
class Watch:
    r"""Early stopping: every ``every`` steps of a run, and at its last, ``score()`` (a no-grad validation figure,
    lower is better; it draws nothing from the training's generators) is read, and each track keeps its lowest:
    ``best["budget"]`` over the run's own steps and ``best["check"]`` over its convergence check's (the steps the two
    share count for both; each track's "last" is its own run's, so the check reads the steps a separate run of its
    length would). The procedure's result is the state at arg min over the read steps t of score(t), and its
    convergence check is the same arg min over the 1.5× run: ties keep the earlier step."""

    every: int
    score: Callable[[], float]
    best: dict[str, Stop] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checks.integer_at_least(1)("every", self.every)

    def see(self, step: int, tracks: tuple[str, ...], parameters: list[torch.Tensor], loss: ContrastiveLoss) -> None:
        """Read the score at ``step`` (the steps taken) and keep the state where it is the lowest of a track."""
        score = float(self.score())
        for track in tracks:
            if track not in self.best or score < self.best[track].score:
                self.best[track] = Stop(step, score, *_state(parameters, loss))


@contextmanager
def held_at(
    parameters: list[torch.Tensor], loss: ContrastiveLoss, values: list[torch.Tensor], state: dict
) -> Iterator[None]:
    """Within it, ``parameters`` (the trained ones, in the order they were given to the training; none: only the
    loss) hold ``values`` and ``loss`` holds ``state``; after it, what they held before."""
    before = _state(parameters, loss)
    _load(parameters, loss, values, state)
    try:
        yield
    finally:
        _load(parameters, loss, *before)


@contextmanager
def checked_state(result: TrainResult, parameters: list[torch.Tensor], loss: ContrastiveLoss) -> Iterator[None]:
    """Within it, ``parameters`` (as for :func:`held_at`) and ``loss`` hold their values at the convergence check
    (``result.check``), and after it their values at the budget again."""
    if result.check is None:
        raise ValueError("the run was not continued to a convergence check (check_steps)")
    with held_at(parameters, loss, result.check.parameters, result.check.loss_state):
        yield


def _load(parameters: list[torch.Tensor], loss: ContrastiveLoss, values: list[torch.Tensor], state: dict) -> None:
    if parameters:
        with torch.no_grad():
            for p, v in zip(parameters, values, strict=True):
                p.copy_(v)
    loss.load_state_dict(state)


def initial_table(items: int, dim: int, seed: int) -> torch.Tensor:
    """The seeded N(0, 1) initial table, shared by every loss at one seed."""
    return torch.randn(items, dim, generator=torch.Generator().manual_seed(2 * seed + 1))


def batch_scores(table: torch.Tensor, anchors: torch.Tensor, candidates: torch.Tensor) -> ScoreMatrix:
    """The A × (1 + k) score matrix of a batch: cosines of the normalised rows, the positive in column 0."""
    unit = torch.nn.functional.normalize(table, dim=1)
    # All N cosines of each anchor, then its candidates' columns: A × N × d′ work instead of A × (1 + k) × d′
    # (N < k at the largest k), with the same values.
    scores = (unit[anchors] @ unit.T).gather(1, candidates)  # (A, 1 + k)
    none = torch.zeros_like(scores, dtype=torch.bool)
    return ScoreMatrix(
        scores=scores,
        positive_index=torch.zeros(anchors.numel(), dtype=torch.long),
        self_mask=none,
        user_mask=none,
        num_negatives=candidates.shape[1] - 1,
    )


def anneal_below_steps(name: str, anneal: int, steps: int, steps_name: str) -> None:
    """A run's final decay leaves it at least one step at the full rate: ``anneal`` < ``steps`` (``ValueError``
    naming both, as the caller calls them)."""
    if anneal >= steps:
        raise ValueError(f"{name} must be < {steps_name} ({steps}): a run needs a step at the full rate, got {anneal}")


def learning_rate(cfg: TrainConfig, step: int, end: int) -> float:
    r"""Adam's rate at ``step`` (0-based) of a run of ``end`` steps: η = ``cfg.lr`` until the last A = ``cfg.anneal``
    steps, then a linear decay, η·(1 − (step − (end − A))/A), whose last step is η/A (A = 0: η throughout)."""
    start = end - cfg.anneal
    return cfg.lr if step < start else cfg.lr * (1.0 - (step - start) / cfg.anneal)


def _fit(
    universe: Universe,
    loss: ContrastiveLoss,
    cfg: TrainConfig,
    embed: Callable[[], torch.Tensor],
    parameters: list[torch.Tensor],
    check_steps: int | None = None,
    watch: Watch | None = None,
) -> TrainResult:
    """The one training loop: ``embed()`` gives the (N, d′) rows of the universe's items (a table, or an encoder of
    their observations), Adam moves ``parameters`` at :func:`learning_rate`; ``watch`` (early stopping) reads its
    score along the way and keeps the best states (:class:`Watch`), without changing the run.

    With ``check_steps`` > ``cfg.steps`` the run is also continued to ``check_steps`` (the convergence check) and
    its state there kept in ``result.check``; the parameters and the loss are then put back to their values at
    ``cfg.steps``, so that everything else read of the run is the budget's, bit for bit. At a constant rate
    (A = ``cfg.anneal`` = 0) the check is the same run going on. With a final decay the budget and its check share
    their first ``cfg.steps`` − A steps at the full rate (the same streams of pairs and negatives) and each ends with
    its own A decaying steps: the check is, bit for bit, a run of ``check_steps`` with the same decay.
    """
    total = max(cfg.steps, check_steps or 0)
    checking = total > cfg.steps
    data = torch.Generator().manual_seed(2 * cfg.seed)
    anchors_all, positives_all = universe.sample_pairs(cfg.pairs, data)
    # a loss's own parameters (the learned links' α, b) in the same Adam at the same rate
    own = [p for p in loss.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam([*parameters, *own], lr=cfg.lr)
    tail = max(1, cfg.steps // 10)
    losses, lams, betas = [], [], []
    ends = {"budget": cfg.steps, "check": total}  # the last step of each track

    def steps(first: int, last: int, end: int, budget: bool, tracks: tuple[str, ...]) -> None:
        for step in range(first, last):
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(cfg, step, end)
            rows = torch.randint(0, cfg.pairs, (cfg.batch,), generator=data)
            anchors = anchors_all[rows]
            negatives = universe.sample_negatives(anchors, cfg.negatives, data)
            candidates = torch.cat([positives_all[rows, None], negatives], dim=1)
            value = loss.loss_from_scores(batch_scores(embed(), anchors, candidates))
            optimizer.zero_grad(set_to_none=True)
            value.backward()
            optimizer.step()
            if watch is not None:  # each track reads every E steps and at its own run's last
                read = tuple(t for t in tracks if (step + 1) % watch.every == 0 or step + 1 == ends[t])
                if read:
                    watch.see(step + 1, read, parameters, loss)
            if budget and cfg.steps - tail <= step:
                losses.append(value.detach())
                if isinstance(loss, loss_class("weince")) and loss.last_statistics is not None:
                    lams.append(loss.last_statistics.lam.mean())
                    betas.append(loss.last_statistics.beta.mean())

    fork = cfg.steps - cfg.anneal  # the steps the budget and its check share
    steps(0, fork, cfg.steps, budget=True, tracks=("budget", "check") if checking else ("budget",))
    shared = None
    if checking and cfg.anneal:
        shared = (_state(parameters, loss), copy.deepcopy(optimizer.state_dict()), data.get_state())
    steps(fork, cfg.steps, cfg.steps, budget=True, tracks=("budget",))
    check = None
    if checking:
        budget = _state(parameters, loss)
        if shared is not None:
            _load(parameters, loss, *shared[0])
            optimizer.load_state_dict(shared[1])
            data.set_state(shared[2])
        steps(cfg.steps if shared is None else fork, total, total, budget=False, tracks=("check",))
        with torch.no_grad():
            table = torch.nn.functional.normalize(embed().double(), dim=1)
        check = Check(total, table, *_state(parameters, loss))
        _load(parameters, loss, *budget)
    with torch.no_grad():
        final = torch.nn.functional.normalize(embed().double(), dim=1)
    return TrainResult(
        final,
        float(torch.stack(losses).mean()),
        float(torch.stack(lams).mean()) if lams else 0.0,
        float(torch.stack(betas).mean()) if betas else 1.0,
        loss.learned_values(),
        check,
        dict(watch.best) if watch is not None else {},
    )


def _state(parameters: list[torch.Tensor], loss: ContrastiveLoss) -> tuple[list[torch.Tensor], dict]:
    return [p.detach().clone() for p in parameters], copy.deepcopy(loss.state_dict())


def train_table(
    universe: Universe,
    loss: ContrastiveLoss,
    cfg: TrainConfig,
    init: torch.Tensor | None = None,
    check_steps: int | None = None,
) -> TrainResult:
    """Train a table on ``cfg.pairs`` pairs from ``universe`` with ``loss``; ``init`` overrides the seeded start;
    ``check_steps``: also the table of the same run continued to that many steps (``result.check``)."""
    start = initial_table(universe.size, cfg.dim, cfg.seed) if init is None else init
    table = torch.nn.Parameter(start.detach().float().clone())
    return _fit(universe, loss, cfg, lambda: table, [table], check_steps)


def observations(universe: Universe, width: int, noise: float, seed: int) -> torch.Tensor:
    """(N, width) noisy observations o_x = P x + σ ε of the latent vectors: a fixed seeded random projection P
    (width × d, N(0, 1/d) entries) and iid N(0, σ²) noise, one draw per item (float32)."""
    generator = torch.Generator().manual_seed(3 * seed + 2)
    d = universe.vectors.shape[1]
    projection = torch.randn(d, width, dtype=torch.float64, generator=generator) / math.sqrt(d)
    noise_draw = torch.randn(universe.size, width, dtype=torch.float64, generator=generator)
    return (universe.vectors @ projection + noise * noise_draw).float()


class Encoder(torch.nn.Module):
    """A small MLP from observations to embeddings: Linear → GELU → Linear (rows normalised by the scores), its
    initial weights drawn from a seeded generator (PyTorch's default uniform ranges, not the global RNG)."""

    def __init__(self, width: int, hidden: int, dim: int, seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(2 * seed + 1)
        self.first = torch.nn.Linear(width, hidden)
        self.second = torch.nn.Linear(hidden, dim)
        with torch.no_grad():
            for layer in (self.first, self.second):
                bound = 1.0 / math.sqrt(layer.in_features)
                layer.weight.copy_((torch.rand(layer.weight.shape, generator=generator) * 2 - 1) * bound)
                layer.bias.copy_((torch.rand(layer.bias.shape, generator=generator) * 2 - 1) * bound)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.second(torch.nn.functional.gelu(self.first(obs)))


def train_encoder(
    universe: Universe,
    obs: torch.Tensor,
    loss: ContrastiveLoss,
    cfg: TrainConfig,
    hidden: int = 64,
    check_steps: int | None = None,
    watch: Callable[[Encoder], Watch] | None = None,
) -> tuple[Encoder, TrainResult]:
    """Train an :class:`Encoder` of the items' observations ``obs`` (N, width) on pairs from ``universe``; the
    seeded initial weights are shared by every loss at one seed. The result's table is the encoded universe;
    ``check_steps`` as for :func:`train_table` (:func:`checked_state` puts the encoder at the check). ``watch``
    makes the early-stopping :class:`Watch` of the encoder (its score reads the encoder); its best states are the
    result's ``stops`` (:func:`held_at` puts the encoder at one)."""
    encoder = Encoder(obs.shape[1], hidden, cfg.dim, cfg.seed)
    watching = watch(encoder) if watch is not None else None
    parameters = list(encoder.parameters())
    return encoder, _fit(universe, loss, cfg, lambda: encoder(obs), parameters, check_steps, watching)
