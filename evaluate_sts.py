"""Evaluate a sentence encoder on STS and SentEval transfer tasks.

python evaluate_sts.py --model outputs/quickstart --tasks sts --mode test
python evaluate_sts.py --model sentence-transformers/all-MiniLM-L6-v2 --tasks all
"""

from __future__ import annotations

from simcse_weince.cli.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
