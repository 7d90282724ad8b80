# The two quick-start commands: `make bench` (creates or reuses .venv: all the bench needs) and
# `make test` (.venv, .venv-hindsight and .venv-cognee, the hindsight and cognee memories' own
# environments).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The hindsight memory's own environment: Hindsight needs protobuf>=7, mem0 protobuf<7
HS_VENV := .venv-hindsight
HS_STAMP := $(HS_VENV)/.installed
HINDSIGHT := hindsight-api-slim[embedded-db]
# dateparser 1.5 returns three values per date found where Hindsight 1.1.0 unpacks two: every
# query naming a date would lose Hindsight's temporal retrieval (logged, not raised)
HINDSIGHT_PINS := 'dateparser<1.5'
# The cognee memory's own environment: Cognee pins pandas<3, onnxruntime 1.23 and its filelock
CG_VENV := .venv-cognee
CG_STAMP := $(CG_VENV)/.installed
COGNEE := cognee
PYTHON ?= python3

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup setup-cognee bench test test-slow lint docs notebooks lock clean

# Every install is pinned by constraints.txt, Hindsight's environment by constraints-hindsight.txt
# (`make lock` rewrites both). torch is installed first, on its own: any other route pulls a
# multi-GB CUDA build.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt --upgrade pip
	$(PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

$(HS_STAMP): constraints-hindsight.txt
	$(PYTHON) -m venv $(HS_VENV)
	$(HS_VENV)/bin/python -m pip install -q -c constraints-hindsight.txt --upgrade pip
	$(HS_VENV)/bin/python -m pip install -q -c constraints-hindsight.txt '$(HINDSIGHT)'
	touch $(HS_STAMP)

$(CG_STAMP): constraints-cognee.txt
	$(PYTHON) -m venv $(CG_VENV)
	$(CG_VENV)/bin/python -m pip install -q -c constraints-cognee.txt --upgrade pip
	$(CG_VENV)/bin/python -m pip install -q -c constraints-cognee.txt '$(COGNEE)'
	touch $(CG_STAMP)

# Cognee's environment alone (about 1.6 GB, a minute and a half from the package index)
setup-cognee: $(CG_STAMP)

setup: $(STAMP) $(HS_STAMP) $(CG_STAMP)

# The bench runs the five classic memories: Hindsight's environment (1.5 GB) is not needed
bench: $(STAMP)
	$(PY) benchmarks/classic.py

test: setup
	$(PY) -m pytest -q

# The slower checks the default run leaves out (marked slow: more kill points, more Ray).
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
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q '$(HINDSIGHT)' $(HINDSIGHT_PINS)
	{ echo "# Every package of Hindsight's own environment (.venv-hindsight, the hindsight memory's), pinned."; \
	  echo "# Rewritten by: make lock"; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all; } > constraints-hindsight.txt
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q '$(COGNEE)'
	{ echo "# Every package of Cognee's own environment (.venv-cognee, the cognee memory's), pinned."; \
	  echo "# Rewritten by: make lock"; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all; } > constraints-cognee.txt
	rm -rf $(LOCK_VENV)

clean:
	rm -rf $(VENV) $(HS_VENV) $(CG_VENV) build *.egg-info .pytest_cache
