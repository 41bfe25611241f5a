#!/usr/bin/env bash
# The WEINCE paper's vision protocol at full scale (GPU machine): CIFAR-100, ResNet-18, the authors' settings
# (configs/vision/cifar100_resnet18_authors.yaml), encoder seeds 7 21 63 84, arms (a)-(f) and the link arms (g)-(j)
# of weince_lab/experiments/paper_protocol.py: (4 + 4 + 4 + 3 x 27 x 4 + 4 x 4) = 352 arm-runs, 344 distinct training runs ((b)
# is a point of the (f) grid, (c) the centre of the (d) grid). Expected time per run on one H200: about 45 min of
# training (100 epochs x 50,000 images at the ~2,000 images/s the GPU check measured for ResNet-18 on CIFAR with
# 8 loader workers; an estimate, not a measurement of this recipe), plus the run's evaluation (feature extraction
# and 1 + 5 scikit-learn linear probes on 40,000 x 512 features, on the CPU: not measured); about 260 GPU-hours. Restartable: run it again
# after a stop; finished runs are skipped and a killed one resumes. Extra arguments go to the driver, e.g.
#   bash experiments/paper_protocol.sh --arms a b c e --extra --data_dir /data/cifar100 --download false
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" -m weince_lab.experiments.paper_protocol --config configs/vision/cifar100_resnet18_authors.yaml \
    --out experiments/results/paper_protocol "$@"
