"""SimCSE, unsupervised and supervised, with WEINCE or InfoNCE.

    python train_unsup.py configs/unsup_bert_base.yaml [--key value ...]
    accelerate launch --num_processes 2 train_unsup.py configs/...yaml

The YAML keys are the fields of the model, data, loss and training argument groups
(``python train_unsup.py --help``); command-line flags override them.
"""

from __future__ import annotations

from simcse_weince.cli.train_text import main

if __name__ == "__main__":
    raise SystemExit(main())
