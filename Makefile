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

.PHONY: setup setup-min quickstart quickstart-sup test test-fast test-bench test-min lint bench

# torch (and uv) by pip, which sees this machine's local torch files; the package and everything else by uv, which
# resolves and installs several times faster than pip and keeps the torch build already there. Installed without
# byte-compiling, then compiled on every core at once. A file that does not compile is left as pip would leave it
# (its .pyc is made when it is imported).
$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile $(TORCH_SPEC) '$(UV_SPEC)'
	$(VENV)/bin/uv pip install --quiet --python $(PY) -e '.[dev,vision,offline]'
	$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	touch $@

setup: $(VENV)/.installed

quickstart: setup
	$(PY) train_unsup.py configs/quickstart.yaml --overwrite_output_dir true

# Supervised SimCSE on pairs and triplets from SICK's training split (written to outputs/sick_nli first).
quickstart-sup: setup
	$(PY) -m weince_lab.experiments.sick_nli --out outputs/sick_nli
	$(PY) train_unsup.py configs/sup_quickstart.yaml --overwrite_output_dir true

# Everything but the benchmarks: lint, then the suite on TEST_WORKERS processes (one per core here; the longest tests
# start first, an idle worker steals queued tests from a busy one, and each worker keeps to one thread:
# tests/conftest.py). Within 10 minutes from a fresh clone on 2 AVX2-only cores (docs/results.md, time budgets).
TEST_WORKERS ?= 2
test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q -m "not bench" -n $(TEST_WORKERS) --dist worksteal --durations=25

# The benchmark scripts end to end at toy size (tests marked `bench`: tests/bench/ and the GPU check's benchmark
# rows); CI runs them after `make test`.
test-bench: setup
	$(PY) -m pytest -q -m bench -n $(TEST_WORKERS) --dist worksteal --durations=15

# The inner loop: lint and the fast tests only.
test-fast: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q -m "not slow and not bench"

# The dependency floors: a second environment (.venv-min) with every direct dependency at the LOWEST version
# pyproject.toml allows (uv's lowest-direct resolution; indirect ones resolve as usual), rebuilt from scratch when
# pyproject.toml or this file changes, then the linter (the ruff floor) and the fast tests in it. torch/torchvision stay
# at TORCH_SPEC's build, which pip installs first (uv does not see this machine's local torch files) and uv keeps by an
# override.
VENV_MIN ?= .venv-min
PY_MIN := $(VENV_MIN)/bin/python
UV_SPEC ?= uv

$(VENV_MIN)/.installed: pyproject.toml Makefile
	rm -rf $(VENV_MIN)
	$(PYTHON) -m venv $(VENV_MIN)
	$(PY_MIN) -m pip install --quiet --upgrade pip
	$(PY_MIN) -m pip install --quiet $(TORCH_SPEC) '$(UV_SPEC)'
	$(PY_MIN) -m pip freeze | grep -iE '^(torch|torchvision)==' > $(VENV_MIN)/torch-override.txt
	$(VENV_MIN)/bin/uv pip install --quiet --python $(PY_MIN) --resolution lowest-direct --upgrade \
		--override $(VENV_MIN)/torch-override.txt -e '.[dev,vision,offline]'
	touch $@

setup-min: $(VENV_MIN)/.installed

test-min: setup-min
	$(PY_MIN) -m ruff check .
	$(PY_MIN) -m ruff format --check .
	$(PY_MIN) -m pytest -q -m "not slow and not bench" -n $(TEST_WORKERS) --dist worksteal --durations=15

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: setup
	$(PY) bench/loss_overhead.py
