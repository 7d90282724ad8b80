"""Fixtures for the memories' tests: shared dialogues (the PostgreSQL servers are in
``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from memory_lab import load_dialogues

from ..conftest import FIXTURES


@pytest.fixture(scope="module")
def nurse():
    """Mirae lives in Seoul as a nurse, then moves to Busan (39 days later) and teaches; hiking
    said twice."""
    return load_dialogues(FIXTURES / "memories" / "moving-nurse.yaml")[0]


@pytest.fixture(scope="module")
def seat_change():
    return load_dialogues(FIXTURES / "langgraph" / "seat-change.yaml")[0]
