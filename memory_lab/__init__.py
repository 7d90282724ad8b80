"""memory-lab: compare conversational memory strategies for LLM chatbots, offline by default.

The names below are imported on first use (PEP 562), so ``import memory_lab`` (or writing a
memory against ``memory_lab.memories``) loads nothing heavy: the benchmark's pandas, tqdm and
executors come only with ``run_benchmark``, ``read_results`` and the like.
"""

# ruff: noqa: F401  (the imports under TYPE_CHECKING are the exports; tests/test_public_api.py)
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from memory_lab.memories.discover import telemetry_switches
from memory_lab.telemetry import switch_off

# before any library with telemetry loads: nothing leaves the machine (the field systems'
# switches read from their declarations, which import nothing of theirs)
switch_off(telemetry_switches())

_EXPORTS = {
    "execute": "memory_lab.run.execute",
    "prepare_run": "memory_lab.run.prepare",
    "resolve_memories": "memory_lab.run.prepare",
    "resume_benchmark": "memory_lab.run.benchmark",
    "run_benchmark": "memory_lab.run.benchmark",
    "RunConfig": "memory_lab.log.config",
    "Dialogue": "memory_lab.dialogue.model",
    "DialogueError": "memory_lab.dialogue.model",
    "Probe": "memory_lab.dialogue.model",
    "Session": "memory_lab.dialogue.model",
    "Turn": "memory_lab.dialogue.model",
    "MemoryView": "memory_lab.run.inspect",
    "inspect_memory": "memory_lab.run.inspect",
    "Exchange": "memory_lab.memories",
    "Item": "memory_lab.memories",
    "Memory": "memory_lab.memories",
    "MemoryResources": "memory_lab.memories",
    "Query": "memory_lab.memories",
    "Recall": "memory_lab.memories",
    "SessionInfo": "memory_lab.memories",
    "TextMemory": "memory_lab.memories",
    "build_memory": "memory_lab.memories",
    "memory_factories": "memory_lab.memories",
    "parse_memory_spec": "memory_lab.memories",
    "register_memory": "memory_lab.memories",
    "Results": "memory_lab.results.read",
    "read_results": "memory_lab.results.read",
    "summarize": "memory_lab.results.summary",
    "RunModels": "memory_lab.run.context",
    "ModelSpec": "memory_lab.models.spec",
    "RunSpec": "memory_lab.log.run_spec",
    "replay_dialogue": "memory_lab.run.cell",
    "load_dialogues": "memory_lab.dialogue.sources",
    "validate": "memory_lab.dialogue.sources",
}

# the public names, listed once: the block under TYPE_CHECKING below imports the same names for
# type checkers, and docs/api.md documents each (tests/test_public_api.py checks both)
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory_lab' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from memory_lab.dialogue.model import Dialogue, DialogueError, Probe, Session, Turn
    from memory_lab.dialogue.sources import load_dialogues, validate
    from memory_lab.log.config import RunConfig
    from memory_lab.log.run_spec import RunSpec
    from memory_lab.memories import (
        Exchange,
        Item,
        Memory,
        MemoryResources,
        Query,
        Recall,
        SessionInfo,
        TextMemory,
        build_memory,
        memory_factories,
        parse_memory_spec,
        register_memory,
    )
    from memory_lab.models.spec import ModelSpec
    from memory_lab.results.read import Results, read_results
    from memory_lab.results.summary import summarize
    from memory_lab.run.benchmark import resume_benchmark, run_benchmark
    from memory_lab.run.cell import replay_dialogue
    from memory_lab.run.context import RunModels
    from memory_lab.run.execute import execute
    from memory_lab.run.inspect import MemoryView, inspect_memory
    from memory_lab.run.prepare import prepare_run, resolve_memories
