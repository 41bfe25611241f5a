#!/usr/bin/env bash
# Paper-scale unsupervised SimCSE (GPU machine): bert-base-uncased on wiki1m_for_simcse.txt, InfoNCE and
# WEINCE (beta ols) x 3 seeds, then the full STS + transfer evaluation (SentEval protocol) of every best
# checkpoint, assembled into experiments/results/paper_scale.{md,json,png} with mean +- std and the paired
# difference. About 15.6k steps per run. Extra arguments go to the driver, e.g.
#   bash experiments/paper_scale.sh --extra --train_files /data/wiki1m_for_simcse.txt
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" -m weince_lab.experiments.text_runs --config configs/unsup_bert_base.yaml \
    --variants infonce weince-ols --seeds 0 1 2 --eval_tasks all --eval_mode test \
    --out experiments/results/paper_scale "$@"
