"""Evaluate a sentence encoder on STS, SentEval transfer and retrieval tasks (``--tasks``: ``sts``, ``transfer``,
``retrieval``, ``all``, task names, ``sts:PATH`` for a file of scored pairs, ``retrieval:PATH`` for a BEIR folder).

python evaluate_sts.py --model outputs/quickstart --tasks sts --mode test
python evaluate_sts.py --model sentence-transformers/all-MiniLM-L6-v2 --tasks all
python evaluate_sts.py --model outputs/quickstart --tasks retrieval:data/my-domain --mode dev
"""

from __future__ import annotations

from simcse_weince.cli.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
