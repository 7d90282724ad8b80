"""Cells in threads on a cold interpreter: no thread sees another's half-imported module.

The main API-bound sweep (``--concurrency``, OpenAI models, a Chroma-backed memory beside
others) once failed cells with ``partially initialized module 'httpx' has no attribute 'URL'``:
chromadb imported httpx in one cell's thread while another thread built a ``ChatOpenAI``,
whose client reads ``sys.modules['httpx']`` without the import lock. Each run here is a fresh
``memory-lab`` process, so nothing is imported before the run starts.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from ..fault_runs import write_dialogues
from ..models.openai_mock import OpenAIMock
from ..processes import CLI

RUNS = 3


def test_concurrent_cells_with_chroma_and_openai_clients_never_fail_on_imports(tmp_path):
    dialogues = write_dialogues(tmp_path / "dialogues")
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-import-race",
        "MEMORY_LAB_MAX_RETRIES": "0",
        "HF_HUB_OFFLINE": "1",
    }
    with OpenAIMock() as mock:
        for n in range(RUNS):
            out = tmp_path / f"run-{n}"
            argv = [
                *CLI, "run", "--dialogues", dialogues,
                "--memory", "buffer", "summary", "vector",
                "--llm", "openai:gpt-4o-mini", "--memory-llm", "openai:gpt-4o-mini",
                "--embeddings", "openai:text-embedding-3-small", "--base-url", mock.base_url,
                "--concurrency", "4", "--no-cache", "--out", str(out),
            ]  # fmt: skip
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
            run = json.loads((Path(out) / "run.json").read_text("utf-8"))
            errors = [e.get("error", "") for e in run.get("errors", [])]
            assert done.returncode == 0, (n, errors or done.stderr[-2000:])
            assert run["status"] == "complete"
            assert "partially initialized" not in done.stdout + done.stderr
