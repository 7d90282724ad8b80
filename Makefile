# The two quick-start commands: `make bench` and `make test`. Both create (or reuse) .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: setup bench test lint clean

# torch is installed first, on its own: any other route pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

bench: setup
	$(PY) benchmarks/classic.py

test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check memory_lab tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
