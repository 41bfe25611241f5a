"""Ground truth: simulated scores and winners whose laws are known, to check the diagnostics and WEINCE's λ (E1–E3);
and Ground truth II, universes with a known similarity kernel where trained tables meet the Bayes search (the sweeps:
``sweep_settings``, ``sweep_cells``, ``cell_store``, ``sweep_memory``, ``sweep_reports``, ``sweep_runner``).

Layering: imports ``losses`` and ``diagnostics`` only; no library imports it; its command is ``simcse-simulate``.
"""

from weince_lab.simulation.batches import ScoreSetting, SimulatedBatch, simulate_batch, simulate_ntxent_batch
from weince_lab.simulation.shortfall import ShortfallLaw
from weince_lab.simulation.winners import BlendedLaw, pseudo_true_softmax_slope, true_gain

__all__ = [
    "BlendedLaw",
    "ScoreSetting",
    "ShortfallLaw",
    "SimulatedBatch",
    "pseudo_true_softmax_slope",
    "simulate_batch",
    "simulate_ntxent_batch",
    "true_gain",
]
