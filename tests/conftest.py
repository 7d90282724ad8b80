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


# ----------------------------------------------------------------------------------- the tiers
# Which tests carry which marker (the markers are declared in pyproject.toml, the one place;
# `make test` leaves out every one of them but runs the rest in parallel). A test is marked by
# the fixtures it asks for, else by its file or its own id here.
FIXTURE_MARKERS = {
    "browser": "browser",  # headless Chromium (tests/chromium.py)
    "postgres_url": "postgres",
    "pgvector_url": "postgres",
}
PATH_MARKERS = {
    # a test id, or a file: every test in it
    "tests/test_docs.py::test_site_builds_strictly_and_loads_nothing_remote": "browser",
    "tests/serve/test_playground.py": "browser",
    "tests/run/test_ray_executor.py": "ray",
    "tests/run/test_ray_cluster.py": "ray",
    "tests/memories/test_registry_one_file.py::test_a_one_file_memory_runs_as_ray_tasks": "ray",
    "tests/test_telemetry.py": "strace",
    "tests/memories/test_cognee.py": "environment",
    "tests/memories/test_hindsight.py": "environment",
    "tests/memories/test_hindsight_private.py": "environment",
    "tests/memories/test_amem.py": "environment",
    "tests/test_notebooks.py": "environment",
    "tests/run/test_conformance.py::test_every_built_in_memory_passes[cognee]": "environment",
    "tests/run/test_conformance.py::test_every_built_in_memory_passes[hindsight]": "environment",
    "tests/run/test_conformance.py::test_every_built_in_memory_passes[amem]": "environment",
    "tests/memories/test_footprint.py::"
    "test_every_registered_memory_says_what_it_holds[cognee]": "environment",
    "tests/memories/test_footprint.py::"
    "test_every_registered_memory_says_what_it_holds[hindsight]": "environment",
    # heavy: the seconds-long checks (pytest --durations), kept out of the fast tier
    "tests/run/test_conformance.py": "heavy",
    "tests/log/test_faults.py": "heavy",
    "tests/run/test_resume_sources.py": "heavy",
    "tests/run/test_parallel_and_limits.py": "heavy",
    "tests/run/test_signals.py": "heavy",
    "tests/sweep/test_sweep_command.py": "heavy",
    "tests/models/test_e5_onnx.py": "heavy",
    "tests/run/test_resume_and_modes.py": "heavy",
    "tests/memories/test_systems.py": "heavy",
    "tests/memories/test_footprint.py": "heavy",
    "tests/results/test_stored_prompts.py": "heavy",
    "tests/memories/test_protocol.py": "heavy",
    "tests/run/test_import_race.py": "heavy",
    "tests/run/test_executors.py": "heavy",
    "tests/models/test_tokens_and_embeddings.py::"
    "test_e5_is_deterministic_across_calls_batches_and_processes": "heavy",
    "tests/results/test_crafted_folders.py::"
    "test_a_delta_of_two_million_spans_is_refused_before_it_is_built": "heavy",
}


def pytest_collection_modifyitems(config, items):
    root = Path(__file__).resolve().parent.parent
    for item in items:
        path = Path(str(item.fspath)).resolve().relative_to(root).as_posix()
        test_id = f"{path}::{item.originalname}"
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in item.fixturenames:
                item.add_marker(marker)
        for key in (path, test_id, f"{path}::{item.name}"):
            if key in PATH_MARKERS:
                item.add_marker(PATH_MARKERS[key])
