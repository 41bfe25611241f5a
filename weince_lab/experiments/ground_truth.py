"""Ground truth II, learning a known similarity: now ``simcse-simulate proposition|negatives|temperature|encoder``.

The sweeps live in :mod:`weince_lab.simulation` (settings, cells, cell store, reports) and their command in
:mod:`weince_lab.simulate`; this driver keeps ``python -m weince_lab.experiments.ground_truth SWEEP ...`` running that
command with the same options, cells and files.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from weince_lab import simulate


def main(argv: Sequence[str] | None = None) -> int:
    return simulate.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(main())
