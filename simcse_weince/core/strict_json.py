"""JSON that every reader accepts: what a run writes (``results.json``, run records) never holds ``NaN`` or
``Infinity``.

Python's ``json`` writes a non-finite float as the bare words ``NaN`` / ``Infinity``, which are not JSON: ``jq``,
JavaScript's ``JSON.parse`` and strict parsers refuse the whole file. A score that is not a number (an undefined
correlation, a diverged loss) is written as ``null`` instead, and ``allow_nan=False`` makes any non-finite value
that still got through an error at the writer, not in a reader later.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(obj: Any) -> Any:
    """``obj`` with every non-finite float (also numpy's and 0-d tensors' ``float()``) in dicts, lists and tuples
    replaced by ``None``."""
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_or_none(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if not isinstance(obj, bool | int | str | float) and obj is not None and hasattr(obj, "__float__"):
        try:  # numpy and torch scalars: a non-finite one is None, a finite one is left to ``default``
            return None if not math.isfinite(float(obj)) else obj
        except (TypeError, ValueError):
            return obj
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite_or_none` (``obj``) with ``allow_nan=False``; ``kwargs`` as for ``json.dumps``."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kwargs)
