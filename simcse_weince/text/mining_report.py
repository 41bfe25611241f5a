"""What a hard-negative mining gave, as numbers and a picture: the quantiles of the anchors' scores with their
positives and with their mined negatives (and of the gap ``s(a, p) - s(a, n)`` per row), and a histogram of the
two score distributions with the score bounds drawn in (matplotlib's Agg canvas: no display, no global state).

A guard against false negatives shows in both: with ``absolute_margin`` m every gap is >= m, with ``max_score``
every negative lies left of its line; a negative distribution pressed against the positives' says the guards let
near-duplicates through.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simcse_weince.core.atomic import atomic_file
from simcse_weince.text.mining import MinedNegatives, MiningSettings

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def quantile_summary(values: Sequence[float] | np.ndarray) -> dict[str, float | int | None]:
    """``count``, ``mean``, ``std``, ``min``, the :data:`QUANTILES` (``q05`` ... ``q95``; ``q50`` the median)
    and ``max`` of ``values`` (NaN left out); ``None`` for each statistic of no values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    names = ["mean", "std", "min", *(f"q{round(q * 100):02d}" for q in QUANTILES), "max"]
    if v.size == 0:
        return {"count": 0, **dict.fromkeys(names)}
    stats = [v.mean(), v.std(), v.min(), *np.quantile(v, QUANTILES), v.max()]
    return {"count": int(v.size), **{n: float(x) for n, x in zip(names, stats, strict=True)}}


def score_summary(result: MinedNegatives) -> dict[str, dict]:
    """The quantile summaries of the positives' scores (every pair), the negatives' (every row) and the gaps."""
    gaps = result.positive_scores[result.row_pair] - result.negative_scores if len(result.rows) else []
    return {
        "positive": quantile_summary(result.positive_scores),
        "negative": quantile_summary(result.negative_scores),
        "positive_minus_negative": quantile_summary(gaps),
    }


def plot_scores(path: str | Path, result: MinedNegatives, settings: MiningSettings, title: str = "") -> Path:
    """A PNG histogram of ``s(anchor, positive)`` over the pairs and ``s(anchor, negative)`` over the mined
    rows, ``max_score`` / ``min_score`` as vertical lines; written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    pos, neg = result.positive_scores, result.negative_scores
    both = np.concatenate([pos[np.isfinite(pos)], neg[np.isfinite(neg)]])
    bins = np.linspace(both.min(), both.max(), 41) if both.size and both.min() < both.max() else 40
    ax.hist(pos, bins=bins, alpha=0.55, label=f"positives ({pos.size} pairs)")
    if neg.size:
        ax.hist(neg, bins=bins, alpha=0.55, label=f"mined negatives ({neg.size} rows)")
    for name, style in (("max_score", "--"), ("min_score", ":")):
        value = getattr(settings, name)
        if value is not None:
            ax.axvline(value, color="k", ls=style, lw=1, label=f"{name} {value:g}")
    guards = [f"{n} {getattr(settings, n):g}" for n in ("absolute_margin", "relative_margin")
              if getattr(settings, n) is not None]  # fmt: skip
    ax.set_xlabel("score with the anchor" + (f" ({', '.join(guards)})" if guards else ""))
    ax.set_ylabel("count")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return Path(path)
