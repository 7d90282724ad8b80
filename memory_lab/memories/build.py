"""From specs to memories at a run: the checks before it starts (``preflight_memories``, and
whether each memory's system is installed here: ``check_installed``), the modules imported up
front (``prepare_memories``) and a fresh memory for each cell (``build_memory``).
"""

from __future__ import annotations

import importlib
from typing import Any

from memory_lab.errors import ConfigError, EnvironmentProblem, MemoryLabError
from memory_lab.memories.factory import MemoryFactory
from memory_lab.memories.protocol import Memory, as_memory, lookup_resource
from memory_lab.memories.specs import MemorySpec


def preflight_memories(specs: list[MemorySpec], resources: dict[str, str] | None = None) -> None:
    """Every memory's ``preflight``, before a run: one error naming the first problem (first
    whether its system is installed here, ``check_installed``). A
    preflight's plain ``ValueError`` (a memory of the user's need not know ``errors.py``) is
    bad input, a ``ConfigError``."""
    for spec in specs:
        factory = spec.factory
        check_installed(factory)
        if factory.preflight is None:
            continue
        try:
            factory.preflight(
                dict(spec.params), lambda name, s=spec: lookup_resource(resources, name, s.label)
            )
        except ValueError as exc:
            if isinstance(exc, MemoryLabError):
                raise
            raise ConfigError(str(exc)) from exc


def prepare_memories(specs: list[MemorySpec]) -> None:
    """Import every memory's ``stack`` in this thread: called before cells run in threads."""
    for spec in specs:
        for module in spec.factory.stack:
            try:
                importlib.import_module(module)
            except ImportError:
                pass  # the cell that needs it reports it


def build_memory(spec: MemorySpec, res: Any) -> Any:
    """A fresh memory for one cell: what the factory returns, made a ``Memory`` for this run
    by ``as_memory`` (a LangChain ``BaseMemory`` wrapped, the run's ``timestamps`` applied)."""
    factory = spec.factory
    check_installed(factory)
    memory = as_memory(factory.build(res, **spec.params), res, spec.name)
    if not isinstance(memory, Memory):
        raise TypeError(
            f"memory '{spec.name}' factory returned {type(memory).__name__}, which has not "
            "observe/end_session/recall/snapshot/close (the Memory protocol) nor is a BaseMemory"
        )
    return memory


def check_installed(factory: MemoryFactory) -> None:
    """EnvironmentProblem (exit 3), one line naming the install command, when the memory's
    system is not installed here."""
    missing = factory.system.missing() if factory.system is not None else None
    if missing:
        raise EnvironmentProblem(missing)
