# Set-up and the main jobs. Everything lives in a virtual environment inside the checkout (.venv).
# TORCH_SPEC names the torch build to install first (this machine has torch 2.14.1 + torchvision 0.29.1
# on local disk); override it elsewhere, e.g. `make test TORCH_SPEC="torch torchvision"`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup quickstart quickstart-sup test test-fast lint bench

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_SPEC)
	$(PY) -m pip install --quiet -e '.[dev,vision,offline]'
	touch $@

setup: $(VENV)/.installed

quickstart: setup
	$(PY) train_unsup.py configs/quickstart.yaml --overwrite_output_dir true

# Supervised SimCSE on pairs and triplets from SICK's training split (written to outputs/sick_nli first).
quickstart-sup: setup
	$(PY) -m experiments.sick_nli --out outputs/sick_nli
	$(PY) train_unsup.py configs/sup_quickstart.yaml --overwrite_output_dir true

# Everything: lint, then the whole suite on TEST_WORKERS processes (one per core here; the longest tests start
# first, an idle worker steals queued tests from a busy one, and each worker keeps to one thread: tests/conftest.py).
TEST_WORKERS ?= 2
test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=15

# The inner loop: lint and the fast tests only.
test-fast: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q -m "not slow"

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: setup
	$(PY) bench/loss_overhead.py
