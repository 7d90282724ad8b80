"""Shared fixtures. The built-in suite is replayed once per test session and shared, as are
real PostgreSQL servers (private clusters, stopped after)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .postgres_cluster import debian_bin_dir, pgvector_bin_dir, running_cluster

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FIXTURES = Path(__file__).parent / "fixtures"
CLASSIC_MEMORIES = ["buffer", "window", "window:k=1", "summary", "summary_buffer", "vector"]


@pytest.fixture(scope="session", autouse=True)
def private_session_cache(tmp_path_factory):
    """Session-wide fixtures (and the subprocesses tests start) never use the user's cache.

    Autouse session fixtures are set up before any other session fixture, so ``classic_run``
    and its kind run with this cache; each test gets its own below.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMORY_LAB_CACHE", str(tmp_path_factory.mktemp("session-cache")))
        yield


def run_classic(out: Path, memories: list[str] = CLASSIC_MEMORIES):
    """builtin:classic through ``memories`` into ``out``, with the pinned vectors."""
    from memory_lab import load_dialogues, resolve_memories, run_benchmark
    from tests.pinned_vectors import CLASSIC_VECTORS, pinned

    with pinned(CLASSIC_VECTORS):
        return run_benchmark(
            resolve_memories(memories),
            load_dialogues("builtin:classic"),
            out,
            sources=["builtin:classic"],
            progress=False,
        )


@pytest.fixture(scope="session")
def classic_run(tmp_path_factory):
    """Results of the built-in suite through every classic memory (plus window:k=1)."""
    from memory_lab import read_results

    outcome = run_classic(tmp_path_factory.mktemp("classic") / "run")
    assert outcome.failed_cells == 0
    return read_results(outcome.path)


@pytest.fixture(scope="session")
def run_models():
    from memory_lab import RunModels

    return RunModels.create()


@pytest.fixture
def mini_dialogue():
    from memory_lab import load_dialogues

    return load_dialogues(FIXTURES / "dialogues" / "mini.yaml")[0]


@pytest.fixture(autouse=True)
def private_call_cache(tmp_path, monkeypatch):
    """Tests never read or write the user's model-call cache (~/.cache/memory-lab)."""
    monkeypatch.setenv("MEMORY_LAB_CACHE", str(tmp_path / "call-cache"))


@pytest.fixture(scope="session")
def postgres_url():
    """A private PostgreSQL cluster (Debian's binaries) for the session; its URL."""
    bin_dir = debian_bin_dir()
    if bin_dir is None:
        pytest.skip(
            "no PostgreSQL binaries (/usr/lib/postgresql/*/bin/initdb): apt-get install postgresql"
        )
    with running_cluster(bin_dir) as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_url():
    """A private PostgreSQL cluster with the vector extension (pgserver's bundled build)."""
    bin_dir = pgvector_bin_dir()
    if bin_dir is None:
        pytest.skip(
            "no PostgreSQL with pgvector: Debian's postgresql has no vector extension here; "
            "pip install pgserver (bundles PostgreSQL with pgvector) to run this test"
        )
    with running_cluster(bin_dir) as url:
        yield url
