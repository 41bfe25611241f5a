"""The Ground truth II sweeps' settings: the full size is the one the stored results were made with, the stored
cells still read, and each option's check names it as its flag."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO
from weince_lab.simulation.cell_store import CellStore
from weince_lab.simulation.sweep_cells import cell_key, cells
from weince_lab.simulation.sweep_settings import SWEEPS, SweepSettings, resolve

STORED = REPO / "experiments" / "results" / "ground_truth"


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_full_size_is_the_stored_runs_and_their_cells_read(sweep: str) -> None:
    """``simcse-simulate SWEEP --workers 2 --out experiments/results/ground_truth`` (docs/results.md) reads the
    stored sweep: the same settings file, byte for byte, and every cell of the sweep in the store. A training
    sweep's cells either all carry the convergence check (none would run) or all predate it and read as outdated
    (the command trains them again, with the check); the proposition's cells train nothing."""
    settings = resolve(sweep, {})
    assert json.dumps(settings.to_dict(), indent=2) == (STORED / f"{sweep}.settings.json").read_text()
    store = CellStore(STORED, settings)  # refuses other settings; start() is not called, nothing is written
    stored = [json.loads(line) for line in (STORED / f"{sweep}.cells.jsonl").read_text().splitlines()]
    assert sorted(cell_key(c) for c in cells(settings)) == sorted(cell_key(r["cell"]) for r in stored)
    if sweep == "proposition" or all("convergence" in r for r in stored):
        assert not store.outdated and len(store.done) == len(stored)
    else:
        assert store.outdated == len(stored) and not store.done
        assert not any("convergence" in r for r in stored)


def test_lists_are_sorted_tuples_and_saved_as_lists() -> None:
    settings = resolve("negatives", {"ks": [64, 4, 16], "seeds": [2, 0]}, quick=True)
    assert settings.ks == (4, 16, 64) and settings.seeds == (2, 0)  # the seeds keep their order
    assert settings.to_dict()["ks"] == [4, 16, 64] and settings.items == 64
    assert resolve("encoder", {}, quick=True).items == 128 and resolve("encoder", {}).items == 1024


@pytest.mark.parametrize(
    ("sweep", "given", "message"),
    [
        ("negatives", {"dim": 1}, "--dim must be an integer >= 2, got 1"),
        ("negatives", {"kernels": []}, "--kernels must be some of"),
        ("temperature", {"losses": []}, "--losses: a training sweep needs at least one loss"),
        ("encoder", {"items": 5}, "--items: the encoder sweep holds out half of the items; needs >= 6, got 5"),
        ("encoder", {"pairs": [0]}, "--pairs must be integers >= 1, got [0]"),
        ("proposition", {"ks": [1, 2], "kappa": 0.0}, "--kappa must be a finite number > 0, got 0.0"),
        ("negatives", {"blend_lambda": 1.0}, "the blend's lambda must be in (0, 1), got 1.0"),
        ("temperature", {"anneal": -1}, "--anneal must be an integer >= 0, got -1"),
        ("temperature", {"anneal": 150}, "--anneal must be < --steps (150): a run needs a step at the full rate"),
        ("temperature", {"anneal": 2.5}, "--anneal must be an integer >= 0, got 2.5"),
    ],
)
def test_a_bad_option_is_named_as_its_flag(sweep: str, given: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        resolve(sweep, given, quick=True)
    assert str(err.value).startswith(message)


def test_the_proposition_reads_no_training_option() -> None:
    """k = 1 and 2 are fine without training (no tail fit), and the training-set sizes are not read."""
    settings = resolve("proposition", {"ks": [1, 2], "pairs": [0, 5], "losses": []}, quick=True)
    assert settings.ks == (1, 2) and settings.pairs == (0, 5)
    with pytest.raises(ValueError, match="unknown sweep options"):
        resolve("proposition", {"workers": 2})
    with pytest.raises(ValueError, match="sweep must be one of"):
        resolve("kernels", {})
    with pytest.raises(ValueError, match="--ks must be a list"):
        SweepSettings(sweep="negatives", ks=4, taus=(0.1,), losses=("infonce",), pairs=(10,))


def test_a_final_decay_is_saved_only_when_asked_and_a_store_refuses_another(tmp_path) -> None:
    """``--anneal 0`` (a constant rate) leaves the settings file as every store before it had; any other value is
    saved, and resuming a store with another value is refused, naming it."""
    constant = resolve("temperature", {"anneal": 0}, quick=True)
    assert "anneal" not in constant.to_dict() and constant.to_dict() == resolve("temperature", {}, quick=True).to_dict()
    decayed = resolve("temperature", {"anneal": 50}, quick=True)
    assert decayed.to_dict()["anneal"] == 50
    CellStore(tmp_path, constant).start()
    with pytest.raises(ValueError, match="anneal"):
        CellStore(tmp_path, decayed)
