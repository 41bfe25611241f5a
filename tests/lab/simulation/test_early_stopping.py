"""Early stopping of the ground-truth encoder: a :class:`Watch` reads a validation score along a run without changing
it, keeps the lowest per track (the budget and its 1.5× check), and the encoder sweep scores the encoder there, on
items that never chose anything."""

from __future__ import annotations

import pytest
import torch

from weince_lab.simulation.learning import TrainConfig, Watch, build_loss, observations, train_encoder
from weince_lab.simulation.search import universe_gap
from weince_lab.simulation.sweep_cells import check_steps, encoder_split, run_cell
from weince_lab.simulation.sweep_reports import report_encoder
from weince_lab.simulation.sweep_settings import resolve
from weince_lab.simulation.universe import kernel_law, make_universe

CFG = TrainConfig(negatives=8, dim=4, steps=30, batch=32, pairs=2000, lr=0.05, seed=3)
LAW = kernel_law("endpoint", beta=3.0)


def _world() -> tuple:
    u = make_universe(40, 4, LAW, seed=2)
    obs = observations(u, 8, 0.1, seed=2)
    train, validation = torch.arange(24), torch.arange(24, 40)
    return u.subset(train), obs[train], u.subset(validation), obs[validation]


def _run(cfg: TrainConfig, check: int | None = None, every: int | None = 10, name: str = "weince") -> tuple:
    """One watched (or, ``every`` None, unwatched) encoder run; the watch's score is the validation items' KL."""
    part, obs, validation, validation_obs = _world()
    loss = build_loss(name, 0.1, LAW)

    def score_of(encoder: torch.nn.Module) -> float:
        with torch.no_grad():
            table = torch.nn.functional.normalize(encoder(validation_obs).double(), dim=1)
        return universe_gap(validation, table, loss)

    make = None if every is None else (lambda encoder: Watch(every, lambda: score_of(encoder)))
    encoder, result = train_encoder(part, obs, loss, cfg, hidden=8, check_steps=check, watch=make)
    return encoder, result, score_of


def test_the_watch_keeps_each_tracks_lowest_and_the_earlier_of_a_tie() -> None:
    scores = iter([3.0, 1.0, 1.0, 0.5, 2.0])
    watch = Watch(5, lambda: next(scores))
    loss = build_loss("infonce", 0.1, LAW)
    table = torch.zeros(2)
    for step, tracks in [(5, ("budget", "check")), (10, ("budget", "check")), (15, ("budget",)),
                         (20, ("check",)), (25, ("check",))]:  # fmt: skip
        table += 1
        watch.see(step, tracks, [table], loss)
    assert (watch.best["budget"].steps, watch.best["budget"].score) == (10, 1.0)  # the tie at 15 keeps 10
    assert torch.equal(watch.best["budget"].parameters[0], torch.full((2,), 2.0))
    assert (watch.best["check"].steps, watch.best["check"].score) == (20, 0.5)
    with pytest.raises(ValueError, match="every"):
        Watch(0, lambda: 0.0)


class _Log(Watch):
    """A watch that also logs which tracks read at which step."""

    def __init__(self, every: int, score) -> None:
        super().__init__(every, score)
        self.reads: dict[str, list[int]] = {"budget": [], "check": []}

    def see(self, step, tracks, parameters, loss) -> None:
        for track in tracks:
            self.reads[track].append(step)
        super().see(step, tracks, parameters, loss)


@pytest.mark.parametrize(("steps", "anneal"), [(25, 0), (25, 10), (30, 0)])
def test_each_track_reads_the_steps_a_separate_run_of_its_length_reads(steps: int, anneal: int) -> None:
    """Every E = 10 steps and at each track's own last step: the budget of 25 reads 10, 20, 25 and its check (38)
    10, 20, 30, 38 (not the budget's 25), as separate runs of 25 and 38 steps read them; with a decay too."""
    part, obs, _, _ = _world()
    cfg = TrainConfig(**(CFG.to_dict() | {"steps": steps, "anneal": anneal}))
    check = check_steps(steps)
    logs = []

    def make(encoder: torch.nn.Module) -> Watch:
        logs.append(_Log(10, lambda: 0.0))
        return logs[-1]

    train_encoder(part, obs, build_loss("infonce", 0.1, LAW), cfg, hidden=8, check_steps=check, watch=make)
    expected = {n: [*range(10, n + 1, 10), *([n] if n % 10 else [])] for n in (steps, check)}
    assert logs[0].reads == {"budget": expected[steps], "check": expected[check]}
    assert steps != 25 or (expected[25], expected[38]) == ([10, 20, 25], [10, 20, 30, 38])


@pytest.mark.parametrize(("name", "steps", "anneal"), [("weince", 30, 0), ("weince", 30, 10), ("learned_link", 25, 0)])
def test_watching_changes_nothing_and_the_checks_choice_is_the_longer_runs(name: str, steps: int, anneal: int) -> None:
    """The watched run's budget is the unwatched run's bit for bit (tables, loss, λ, β, the learned link). Its budget
    choice is the choice of a watched run of the budget alone, and its check's choice that of a watched run of 1.5×
    the steps (with its own decay; at 25 steps and E = 10 the check reads 10, 20, 30, 38 as a 38-step run does, not
    the budget's last step 25), the loss's own state included."""
    cfg = TrainConfig(**(CFG.to_dict() | {"steps": steps, "anneal": anneal}))
    check = check_steps(steps)
    longer = TrainConfig(**(cfg.to_dict() | {"steps": check}))
    _, watched, _ = _run(cfg, check=check, name=name)
    _, plain, _ = _run(cfg, check=check, every=None, name=name)
    _, alone, _ = _run(cfg, name=name)
    _, long_run, _ = _run(longer, name=name)
    assert torch.equal(watched.table, plain.table) and torch.equal(watched.check.table, plain.check.table)
    assert (watched.final_loss, watched.lambda_mean, watched.beta_mean, watched.learned) == (
        plain.final_loss, plain.lambda_mean, plain.beta_mean, plain.learned)  # fmt: skip
    assert plain.stops == {} and set(watched.stops) == {"budget", "check"}
    for mine, reference in ((watched.stops["budget"], alone.stops["budget"]),
                            (watched.stops["check"], long_run.stops["budget"])):  # fmt: skip
        assert (mine.steps, mine.score) == (reference.steps, reference.score)
        assert all(torch.equal(a, b) for a, b in zip(mine.parameters, reference.parameters, strict=True))
        assert mine.loss_state.keys() == reference.loss_state.keys()
        assert all(torch.equal(mine.loss_state[k], reference.loss_state[k]) for k in mine.loss_state)
    if name == "learned_link":  # the loss's own parameters are part of the kept state
        assert watched.stops["budget"].loss_state and watched.learned != {}


def test_the_chosen_step_is_the_argmin_over_separate_runs_of_each_length() -> None:
    """At a constant rate a run's state at step t is a run of t steps: the watch's choice over a 25-step run is the
    arg min of the validation KL over separate runs of 10, 20 and 25 steps (the last step is read too), its state
    that run's encoder."""
    cfg = TrainConfig(**(CFG.to_dict() | {"steps": 25}))
    _, result, _ = _run(cfg)
    runs = {t: _run(TrainConfig(**(cfg.to_dict() | {"steps": t})), every=None) for t in (10, 20, 25)}
    gaps = {t: score_of(model) for t, (model, _, score_of) in runs.items()}
    best = min(gaps, key=gaps.get)
    stop = result.stops["budget"]
    assert stop.steps == best and stop.score == pytest.approx(gaps[best], rel=1e-12)
    assert all(torch.equal(a, b) for a, b in zip(stop.parameters, runs[best][0].parameters(), strict=True))
    assert len(set(gaps.values())) == 3  # the runs differ: the choice is a real one


def test_the_early_stopped_encoder_cell_scores_at_its_chosen_steps() -> None:
    """The cell holds out a validation quarter (never scored) and a test quarter. Its figures are those of the
    encoder at the chosen step t̂: a cell of t̂ steps reading only its last gives them all again. Its check is the
    choice over the 1.5× run: a cell of that length gives the check's KL as its own. Without early stopping nothing
    of it appears."""
    given = {"kernels": ["endpoint"], "seeds": [0], "losses": ["infonce"], "items": 48}
    cell = {"kernel": "endpoint", "loss": "infonce", "k": 16, "tau": 0.1, "pairs": 4000, "seed": 0}

    def record_of(steps: int, every: int) -> dict:
        return run_cell(resolve("encoder", {**given, "steps": steps, "early_stop": every}, quick=True), cell)

    record = record_of(20, 5)
    stopped = record["stopped"]
    assert encoder_split(48, 10) == (24, 12, 12) and encoder_split(48, 0) == (24, 0, 24)
    assert stopped["every"] == 5 and stopped["validation_items"] == 12
    assert stopped["steps"] in (5, 10, 15, 20) and stopped["check_steps"] in (5, 10, 15, 20, 25, 30)
    assert stopped["check_steps"] != stopped["steps"]  # still improving: the two choices differ, the test can tell
    at_choice = record_of(stopped["steps"], stopped["steps"])  # a constant rate: its last step is the state at t̂
    assert at_choice["stopped"]["steps"] == stopped["steps"]
    assert (at_choice["train"], at_choice["heldout"]) == (record["train"], record["heldout"])
    longer = record_of(30, 5)
    assert longer["stopped"]["steps"] == stopped["check_steps"]
    assert longer["heldout"]["universe_gap"] == record["convergence"]["heldout"]["check_universe_gap"]
    assert longer["train"]["universe_gap"] == record["convergence"]["train"]["check_universe_gap"]
    plain = run_cell(resolve("encoder", {**given, "steps": 20}, quick=True), cell)
    assert "stopped" not in plain
    # the test quarter is a quarter: 12 items give top-1 in twelfths
    assert round(record["heldout"]["top1"] * 12, 9) == round(record["heldout"]["top1"] * 12)
    settings = resolve("encoder", {**given, "steps": 20, "early_stop": 5}, quick=True)
    _, words = report_encoder(settings, [record])
    assert "12 other items (validation) read every 5 steps" in words and "on the 12 held-out items" in words
    assert f"| {stopped['steps']} |" in words and "stopped at (steps, per seed)" in words
    assert "universe KL at the step early stopping chose over 20 and over 30 steps" in words
    assert "In 0 of 1 cells both chose the same step among the first 20" in words
    assert f"Chosen steps: {stopped['steps']}–{stopped['steps']}, median {stopped['steps']}." in words


def test_the_settings_check_and_keep_early_stopping() -> None:
    assert resolve("encoder", {"early_stop": 25}, quick=True).to_dict()["early_stop"] == 25
    assert "early_stop" not in resolve("encoder", {}, quick=True).to_dict()  # stores made before it are unchanged
    with pytest.raises(ValueError, match=r"^--early_stop must be an integer >= 0, got -1$"):
        resolve("encoder", {"early_stop": -1}, quick=True)
    with pytest.raises(ValueError, match="a quarter for validation and a quarter of the items; needs >= 12, got 10"):
        resolve("encoder", {"early_stop": 5, "items": 10}, quick=True)
    assert resolve("encoder", {"items": 10}, quick=True).items == 10
