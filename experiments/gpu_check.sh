#!/usr/bin/env bash
# The prepared GPU check (H200: 6 min measured, the throughput row apart; nothing downloaded): fp16/bf16 text training, throughput vs
# sentence-transformers, gradient caching at a large batch, a ResNet-18 epoch on CIFAR-10, fp32 vs bf16
# evaluation, a 2-process run on 2 GPUs. Prints one table. `--cpu-smoke` proves the script on a CPU.
#   bash experiments/gpu_check.sh [--cpu-smoke] [--only "text bf16" vision] [--out outputs/gpu_check]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$PY" -m weince_lab.experiments.gpu_check "$@"
