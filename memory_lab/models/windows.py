"""The answering model's context window: ``--context-limit``'s default.

``memory_lab/data/context_windows.json`` lists the windows providers publish (each source named
there); the offline reader emulates 128K tokens. A run's limit (``context_window``) is the one
given (``--context-limit TOKENS``), none (``--context-limit none``), or by default the answering
model's window: an unlisted model gets no limit, and says so. ``run.json`` records the limit
and where it came from (``SOURCES``), and a resume keeps what it recorded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from memory_lab.errors import ConfigError
from memory_lab.models.spec import ModelSpec, is_offline

WINDOWS_FILE = "memory_lab/data/context_windows.json"
MODEL_WINDOW = "model"  # --context-limit's default: the answering model's window
# where a run's limit came from, as run.json's context_limit_source records it
SOURCES = {
    "given": "--context-limit",
    "model": "the answering model's window",
    "none": "--context-limit none",
    "unknown": "no limit: the answering model's window is not known",
}
_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")  # a snapshot date, or -latest


@cache
def _table() -> dict[str, Any]:
    text = (resources.files("memory_lab") / "data" / "context_windows.json").read_text("utf-8")
    return json.loads(text)


def model_window(model: str) -> int | None:
    """The published window of a model string (``offline``: the offline reader's emulated
    one), None for a model the table does not list."""
    spec = ModelSpec.parse(model)
    table = _table()
    if spec.offline:
        return int(table["offline"])
    listed = table["models"].get(spec.provider, {})
    for name in (spec.name, _SUFFIX.sub("", spec.name)):
        if name in listed:
            return int(listed[name])
    return None


@dataclass(frozen=True)
class ContextWindow:
    """A run's context limit in tokens (None: prompts are never cut) and its ``source``."""

    limit: int | None
    source: str


def context_window(setting: int | str | None, model: str) -> ContextWindow:
    """The limit a ``--context-limit`` setting gives a run whose answering model is ``model``:
    a number as given, None as none, ``MODEL_WINDOW`` as the model's window (none when the
    table does not list it)."""
    if setting is None:
        return ContextWindow(None, "none")
    if setting == MODEL_WINDOW:
        window = model_window(model)
        return ContextWindow(window, "model" if window is not None else "unknown")
    assert isinstance(setting, int), setting
    return ContextWindow(setting, "given")


def describe(limit: int | None, source: str | None, model: str) -> str:
    """A run's limit in words, as its report and summary say it (``source`` None: a run from
    before the source was recorded)."""
    if source == "unknown":
        return f"none: the window of {model} is not known ({WINDOWS_FILE}; give --context-limit)"
    if limit is None:
        return "none (--context-limit none)" if source == "none" else "none"
    if source == "given":
        return f"{limit:,} tokens (--context-limit)"
    if source == "model":
        whose = "the offline reader's emulated window" if is_offline(model) else None
        return f"{limit:,} tokens, {whose or 'the window of ' + model}"
    return f"{limit:,} tokens"


def parse_limit(text: str) -> int | str | None:
    """``--context-limit``'s value: TOKENS (a positive whole number), ``none`` or ``model``
    (ValueError naming the option otherwise)."""
    word = text.strip().lower()
    if word == "none":
        return None
    if word == MODEL_WINDOW:
        return MODEL_WINDOW
    if re.fullmatch(r"\d+", word) and int(word) > 0:
        return int(word)
    raise ConfigError(
        f"--context-limit must be a positive whole number of tokens, 'none' or 'model', "
        f"got {text!r}"
    )
