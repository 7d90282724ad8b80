"""Fixtures for the memories' tests: shared dialogues, and real PostgreSQL servers, one per
session, stopped after."""

from __future__ import annotations

import pytest

from memory_lab import load_dialogues

from ..conftest import FIXTURES
from ..postgres_cluster import debian_bin_dir, pgvector_bin_dir, running_cluster


@pytest.fixture(scope="module")
def nurse():
    """Mirae lives in Seoul as a nurse, then moves to Busan (39 days later) and teaches; hiking
    said twice."""
    return load_dialogues(FIXTURES / "memories" / "moving-nurse.yaml")[0]


@pytest.fixture(scope="module")
def seat_change():
    return load_dialogues(FIXTURES / "langgraph" / "seat-change.yaml")[0]


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
