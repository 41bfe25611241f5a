#!/usr/bin/env bash
# Issue 41, "Diagnose what the claims cite": trains the two vision proxy encoders (InfoNCE, WEINCE; same seed, same
# recipe) and the text quickstart model, then runs simcse-diagnose on them and on all-MiniLM-L6-v2.
# Run from the repository root with .venv active. Each group holds /work/heavy.lock (the shared 2-core machine).
# Usage: [EPOCHS=14] bash experiments/results/diagnostics/run_diagnostics.sh [vision|text|all]
set -u
# the same as `make quickstart` without its set-up step (which would rebuild .venv if pyproject.toml changed)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
D=experiments/results/diagnostics
LOG=$D/run_log.txt
EPOCHS=${EPOCHS:-14}
step() {  # name, command...: run one step, log its start, end, exit code and wall time
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "[$(date -u +%FT%TZ)] START $name: $* (HEAD $(git rev-parse HEAD))" | tee -a "$LOG"
  "$@" > "outputs/logs/$name.log" 2>&1
  local rc=$?
  echo "[$(date -u +%FT%TZ)] END $name rc=$rc wall=$(( $(date +%s) - t0 ))s" | tee -a "$LOG"
}
mkdir -p outputs/logs
what=${1:-all}
# LOCK_HELD=1: this process already holds /work/heavy.lock (an inherited descriptor), so the groups run without
# taking it again.
LOCKED=(flock /work/heavy.lock)
[[ ${LOCK_HELD:-0} == 1 ]] && LOCKED=()
if [[ $what == vision || $what == all ]]; then
  "${LOCKED[@]}" bash -c "
    $(declare -f step); LOG=$LOG
    step train_vision_infonce python -m simcse_weince.cli.train_vision configs/vision/cpu_proxy_cifar10.yaml --loss infonce --seed 0 --num_train_epochs $EPOCHS --output_dir outputs/vision_proxy_infonce
    step train_vision_weince python -m simcse_weince.cli.train_vision configs/vision/cpu_proxy_cifar10.yaml --loss weince --seed 0 --num_train_epochs $EPOCHS --output_dir outputs/vision_proxy_weince
    step diagnose_vision_infonce python -m simcse_weince.cli.diagnose --model outputs/vision_proxy_infonce --out $D/vision_proxy_infonce
    step diagnose_vision_weince python -m simcse_weince.cli.diagnose --model outputs/vision_proxy_weince --out $D/vision_proxy_weince
  "
fi
if [[ $what == text || $what == all ]]; then
  "${LOCKED[@]}" bash -c "
    $(declare -f step); LOG=$LOG
    step diagnose_minilm_stsb python -m simcse_weince.cli.diagnose --model sentence-transformers/all-MiniLM-L6-v2 --text_positives stsb --batch_size 128 --num_batches 4 --out $D/minilm-stsb
    step train_quickstart env HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false python train_unsup.py configs/quickstart.yaml --overwrite_output_dir true
    step diagnose_quickstart_stsb python -m simcse_weince.cli.diagnose --model outputs/quickstart --text_positives stsb --batch_size 128 --num_batches 4 --out $D/quickstart-stsb
  "
fi
