"""Fixtures of the judge's tests."""

from __future__ import annotations

import pytest

from ..models.openai_mock import OpenAIMock


@pytest.fixture
def mock(monkeypatch):
    """The loopback OpenAI mock, with a fake key, no retries and no base URL from the
    environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge-fake")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIMock() as server:
        yield server
