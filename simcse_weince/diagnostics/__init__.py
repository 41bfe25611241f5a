"""Extreme-value diagnostics: peaks-over-threshold GPD fits, link selection, WEINCE statistics, geometry."""

from simcse_weince.diagnostics.geometry import alignment, uniformity
from simcse_weince.diagnostics.link import LinkFit, ScoreBatch, select_link
from simcse_weince.diagnostics.pot import GPDFit, fit_exceedances, fit_pot, threshold_stability

__all__ = [
    "GPDFit",
    "LinkFit",
    "ScoreBatch",
    "alignment",
    "fit_exceedances",
    "fit_pot",
    "select_link",
    "threshold_stability",
    "uniformity",
]
