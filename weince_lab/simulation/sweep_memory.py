"""The memory a sweep's settings need, per option, for :func:`~simcse_weince.core.memory.check_memory` (a size that
does not fit is refused before any work, naming the option)."""

from __future__ import annotations

from weince_lab.simulation.sweep_cells import cells
from weince_lab.simulation.sweep_settings import SweepSettings
from weince_lab.simulation.universe import PAIR_CHUNK

# The memory a cell needs, by what scales it (float64 and int64 are 8 bytes; the factors count the arrays alive
# at once): the universe's N × N matrices (cosines, logits, M, its CDF, log M, the learned cosines, log Q̂, ...),
# the N × d vectors with the table, its gradient and Adam's two moments, and so on.
_F = 8
WORKER_BYTES = 700 << 20  # a worker process with torch and the project imported


def _largest(settings: dict, *names: str) -> str:
    """Of the flags ``names`` whose values multiply into one array, the one with the largest value (named when it
    does not fit)."""
    return max(names, key=lambda n: max(settings[n]) if isinstance(settings[n], list) else settings[n])


def memory_needs(settings: SweepSettings, workers: int) -> dict[str, tuple[object, float]]:
    """``flag -> (value, bytes)``: an upper estimate of the memory the sweep's settings need, per flag (for
    :func:`~simcse_weince.core.memory.check_memory`); ``--workers`` counts the other workers' cells and processes."""
    s = settings.to_dict()
    n, k = s["items"], max(s["ks"])
    needs: dict[str, tuple[object, float]] = {
        "--items": (n, float(n) * n * _F * 8 + float(PAIR_CHUNK) * n * _F * 2),
        "--dim": (s["dim"], float(n) * s["dim"] * _F * 5),
    }
    if s["sweep"] == "proposition":
        needs["--samples"] = (s["samples"], float(s["samples"]) * _F * 2)
        needs["--ks"] = (s["ks"], 4096.0 * (1 + k) * _F * 5)
    else:
        needs["--pairs"] = (s["pairs"], float(max(s["pairs"])) * _F * 4)
        flag = _largest(s, "batch", "ks")
        needs[f"--{flag}"] = (s[flag], float(s["batch"]) * (1 + k) * _F * 12)
        needs["--eval_sizes"] = (s["eval_sizes"], 256.0 * max(s["eval_sizes"]) * _F * 10)
        needs["--eval_sets"] = (s["eval_sets"], float(s["eval_sets"]) * _F * 2)
        if s["sweep"] == "encoder":
            needs["--obs_width"] = (s["obs_width"], float(n) * s["obs_width"] * _F * 2)
            needs["--hidden"] = (s["hidden"], (float(n) + s["obs_width"]) * s["hidden"] * _F * 4)
        else:
            flag = _largest(s, "link_batches", "link_anchors", "link_size")
            link = float(s["link_batches"]) * s["link_anchors"] * s["link_size"] * _F * 6
            needs[f"--{flag}"] = (s[flag], needs.get(f"--{flag}", (0, 0.0))[1] + link)
    cell = sum(b for _, b in needs.values())
    parallel = min(workers, len(cells(settings)))
    if parallel > 1:
        needs["--workers"] = (workers, (parallel - 1) * (cell + WORKER_BYTES))
    return needs
