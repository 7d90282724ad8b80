"""``ModelSpec``: a model string (``offline``, ``offline:NAME``, ``PROVIDER:MODEL``) parsed once.

``str(spec)`` gives back the exact string it was parsed from, so ``run.json`` keeps recording
the strings users typed. ``offline`` alone means "the offline model of the role" (the reader for
``reader``, the memory model for memory roles); ``offline:NAME`` names one offline model. It
lives with the models so that the run's configuration and the providers can use it without
importing the run machinery. ``ClientSettings``: how provider clients behave.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memory_lab.errors import ConfigError
from memory_lab.models.rate_limit import RateLimits

OFFLINE = "offline"


@dataclass(frozen=True)
class ModelSpec:
    """A provider (``offline``, ``openai``, ``ollama``, ...) and a model name (empty for bare
    ``offline``)."""

    provider: str
    name: str = ""

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """``offline`` | ``offline:NAME`` | ``PROVIDER:MODEL``; ValueError for anything else."""
        if not isinstance(text, str):
            raise ConfigError(f"model {text!r} must be a string: 'offline' or PROVIDER:MODEL")
        if text == OFFLINE:
            return cls(OFFLINE)
        provider, sep, name = text.partition(":")
        if not sep or not provider or not name:
            raise ConfigError(f"model {text!r} must be 'offline' or PROVIDER:MODEL")
        return cls(provider, name)

    @property
    def offline(self) -> bool:
        """Served on this machine by an offline model (no provider is called)."""
        return self.provider == OFFLINE

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}" if self.name else self.provider


def is_offline(text: str) -> bool:
    """Whether a model string names an offline model (``offline`` or ``offline:NAME``)."""
    return text == OFFLINE or text.startswith(OFFLINE + ":")


@dataclass(frozen=True)
class ClientSettings:
    """How provider clients behave: seconds a request may take before it fails
    (``--request-timeout``), retries on 429/5xx (with backoff honouring Retry-After, by the
    provider's client; ``MEMORY_LAB_MAX_RETRIES``) and the run's shared rate limits
    (``--rpm``/``--tpm``: ``rate_limit.py``; None, none)."""

    timeout: float = 60.0
    max_retries: int = 6
    limits: RateLimits | None = None

    @classmethod
    def from_env(cls, timeout: float | None = None) -> ClientSettings:
        """The settings a user's environment asks for (read where a run or the CLI is built;
        ``timeout`` given wins over ``MEMORY_LAB_REQUEST_TIMEOUT``)."""
        if timeout is None:
            timeout = float(os.environ.get("MEMORY_LAB_REQUEST_TIMEOUT", cls.timeout))
        retries = os.environ.get("MEMORY_LAB_MAX_RETRIES", "").strip()
        return cls(timeout, int(retries) if retries else cls.max_retries)
