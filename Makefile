# initmem: two commands for a newcomer, `make demo` and `make test`. Everything is set up from here.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL := 3
export RAY_AUTH_MODE := disabled
export TORCHINDUCTOR_CACHE_DIR := $(CURDIR)/.cache/inductor
export MPLBACKEND := Agg

.PHONY: setup data demo test lint format bench notebooks clean

setup: $(VENV)/.installed data

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[dev]'
	# foolbox only for its 20 real CIFAR-10 test images (tests read the PNGs; foolbox is never imported)
	$(PY) -m pip install --no-deps foolbox==3.3.4
	touch $@

# Full Fashion-MNIST, the offline default data set (Debian package; needs root, skipped with a warning otherwise).
data:
	@if [ -d /usr/share/datasets/fashion-mnist ]; then echo "Fashion-MNIST: /usr/share/datasets/fashion-mnist"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null && apt-get install -y -q dataset-fashion-mnist >/dev/null)) && \
	  echo "Fashion-MNIST installed: /usr/share/datasets/fashion-mnist" || \
	  echo "warning: could not install dataset-fashion-mnist; torchvision will try to download it"; \
	else echo "warning: run 'sudo apt-get install dataset-fashion-mnist' for the offline default data"; fi

demo: setup
	$(VENV)/bin/initmem demo --out runs/demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The suite on TEST_WORKERS processes (pytest-xdist; 2: the 2-core machine CI runs on): 357 s
# against 588 s on one, quiet (2026-12-07).
TEST_WORKERS ?= 2
test: setup lint
	$(PY) -m pytest -q -n $(TEST_WORKERS)

# Execute every notebook and store it with its outputs and figures (what a code host shows).
notebooks: setup
	$(PY) notebooks/execute.py

bench: setup
	$(PY) benchmarks/run.py --out benchmarks/results.json

clean:
	rm -rf $(VENV) .cache runs build *.egg-info
