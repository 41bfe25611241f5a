"""The convergence check of a ground-truth cell: the same run continued to 1.5× its steps. Everything read at the
budget is bit for bit a run of the budget; the state at the check is a run of the check's steps; the reports say
which cells moved, or that none was checked."""

from __future__ import annotations

import pytest
import torch

from weince_lab.simulation.learning import (
    TrainConfig,
    build_loss,
    checked_state,
    learning_rate,
    observations,
    train_encoder,
    train_table,
)
from weince_lab.simulation.search import universe_gap
from weince_lab.simulation.sweep_cells import check_steps, convergence, is_complete, run_cell
from weince_lab.simulation.sweep_reports import convergence_section
from weince_lab.simulation.sweep_settings import resolve
from weince_lab.simulation.universe import kernel_law, make_universe

CFG = TrainConfig(negatives=16, dim=4, steps=40, batch=64, pairs=4000, lr=0.05, seed=2)


@pytest.mark.parametrize("name", ["weince", "learned_link"])
def test_the_budget_is_untouched_and_the_check_is_the_longer_run(name: str) -> None:
    """A run continued to 60 steps reports, at its budget of 40, what a 40-step run reports (table, loss, λ, the
    learned link); its check is the 60-step run's table, and the loss's own parameters there are that run's."""
    law = kernel_law("endpoint", beta=3.0)
    u = make_universe(48, 4, law, seed=1)
    checked, plain, longer = (build_loss(name, 0.1, law) for _ in range(3))
    with_check = train_table(u, checked, CFG, check_steps=60)
    alone = train_table(u, plain, CFG)
    run60 = train_table(u, longer, TrainConfig(**(CFG.to_dict() | {"steps": 60})))
    assert torch.equal(with_check.table, alone.table)
    assert (with_check.final_loss, with_check.lambda_mean, with_check.beta_mean, with_check.learned) == (
        alone.final_loss, alone.lambda_mean, alone.beta_mean, alone.learned)  # fmt: skip
    assert universe_gap(u, with_check.table, checked) == universe_gap(u, alone.table, plain)  # the loss is at 40
    assert with_check.check.steps == 60 and torch.equal(with_check.check.table, run60.table)
    with checked_state(with_check, [], checked):
        assert universe_gap(u, with_check.check.table, checked) == universe_gap(u, run60.table, longer)
        if name == "learned_link":
            assert checked.learned_values() == run60.learned != alone.learned
    assert checked.learned_values() == alone.learned  # back at the budget


def test_the_rate_is_constant_then_decays_linearly_to_zero_over_the_last_steps() -> None:
    constant = TrainConfig(steps=10, lr=0.5)
    assert [learning_rate(constant, step, 10) for step in range(10)] == [0.5] * 10
    cfg = TrainConfig(steps=10, lr=0.5, anneal=4)
    rates = [learning_rate(cfg, step, 10) for step in range(10)]
    assert rates == [0.5] * 6 + [0.5 * (1 - j / 4) for j in range(4)] and rates[-1] == 0.5 / 4
    assert [learning_rate(cfg, step, 15) for step in range(15)][-5:] == [0.5, *rates[-4:]]  # the check's own decay
    for bad in (-1, 10, 11, 2.5):
        with pytest.raises(ValueError, match="anneal"):
            TrainConfig(steps=10, anneal=bad)


@pytest.mark.parametrize("name", ["weince", "learned_link"])
def test_with_a_final_decay_the_budget_and_the_check_are_each_a_run_of_their_own_length(name: str) -> None:
    """Budget 40 and check 60, each ending in 10 decaying steps: the budget is bit for bit a run of 40 with that
    decay, the check a run of 60 with it (the shared 30 steps forked: optimizer, streams and loss state restored),
    and the learned link's own scalars follow; both differ from a constant rate's."""
    law = kernel_law("endpoint", beta=3.0)
    u = make_universe(48, 4, law, seed=1)
    cfg = TrainConfig(**(CFG.to_dict() | {"anneal": 10}))
    checked, plain, longer, constant = (build_loss(name, 0.1, law) for _ in range(4))
    with_check = train_table(u, checked, cfg, check_steps=60)
    alone = train_table(u, plain, cfg)
    run60 = train_table(u, longer, TrainConfig(**(cfg.to_dict() | {"steps": 60})))
    assert torch.equal(with_check.table, alone.table)
    assert (with_check.final_loss, with_check.lambda_mean, with_check.learned) == (
        alone.final_loss, alone.lambda_mean, alone.learned)  # fmt: skip
    assert with_check.check.steps == 60 and torch.equal(with_check.check.table, run60.table)
    with checked_state(with_check, [], checked):
        assert checked.learned_values() == run60.learned
    assert checked.learned_values() == alone.learned
    assert not torch.equal(alone.table, train_table(u, constant, CFG).table)


def test_an_encoder_is_put_at_the_check_and_back() -> None:
    law = kernel_law("vmf", kappa=10.0)
    u = make_universe(40, 4, law, seed=0)
    obs = observations(u, 8, 0.1, 0)
    loss, other = build_loss("infonce", 0.1, law), build_loss("infonce", 0.1, law)
    encoder, result = train_encoder(u, obs, loss, CFG, hidden=16, check_steps=60)
    long_encoder, _ = train_encoder(u, obs, other, TrainConfig(**(CFG.to_dict() | {"steps": 60})), hidden=16)
    short_encoder, _ = train_encoder(u, obs, other, CFG, hidden=16)
    with torch.no_grad():
        assert torch.equal(encoder(obs), short_encoder(obs))
        with checked_state(result, list(encoder.parameters()), loss):
            assert torch.equal(encoder(obs), long_encoder(obs))
        assert torch.equal(encoder(obs), short_encoder(obs))
    with pytest.raises(ValueError, match="not continued to a convergence check"):
        with checked_state(train_table(u, loss, CFG), [], loss):
            pass


def test_a_cell_carries_its_check_and_a_cell_without_one_runs_again() -> None:
    settings = resolve("temperature", {"kernels": ["vmf"], "seeds": [0], "taus": [0.5], "pairs": [1000]}, quick=True)
    cell = {"kernel": "vmf", "loss": "infonce", "k": 16, "tau": 0.5, "pairs": 1000, "seed": 0}
    record = run_cell(settings, cell)
    check = record["convergence"]
    assert (check["steps"], check["check_steps"]) == (150, check_steps(150)) == (150, 225)
    assert check["universe_gap"] == record["universe_gap"]
    assert check["moved"] == check["check_universe_gap"] - check["universe_gap"]
    assert check["converged"] == (abs(check["moved"]) <= 0.005)
    assert is_complete("temperature", record)
    assert not is_complete("temperature", {k: v for k, v in record.items() if k != "convergence"})


def _record(loss: str, seed: int, moved: float) -> dict:
    cell = {"kernel": "vmf", "loss": loss, "k": 16, "seed": seed}
    return {"cell": cell, "convergence": convergence(100, 0.2, 150, 0.2 + moved)}


def test_the_report_tables_the_arms_that_moved_and_counts_the_checks() -> None:
    records = [_record("infonce", 0, 0.001), _record("infonce", 1, -0.004), _record("weince", 0, -0.02),
               _record("weince", 1, 0.003)]  # fmt: skip
    summary, lines = convergence_section(records, ("kernel", "loss", "k", "seed"))
    assert summary == {"checked": True, "checks": 4, "converged": 3, "tolerance": 0.005, "steps": 100,
                       "check_steps": 150, "unconverged_arms": 1}  # fmt: skip
    assert "3 of 4 checks passed; the arms with a cell that did not:" in lines[1]
    assert lines[-1] == "| vmf | weince | 16 | 1/2 | -0.0085 | -0.0200 |"
    summary, lines = convergence_section(records[:2], ("kernel", "loss", "k", "seed"))
    assert summary["converged"] == 2 and lines[-1].endswith("2 of 2 checks passed.")


def test_cells_made_before_the_check_are_reported_unchecked() -> None:
    old = [{"cell": {"kernel": "vmf", "loss": "infonce", "seed": 0}, "universe_gap": 0.1}]
    summary, lines = convergence_section(old, ("kernel", "loss", "seed"))
    assert summary == {"checked": False} and lines[1].startswith("**Convergence: not checked.**")
