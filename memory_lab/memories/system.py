"""What a field system is, declared once: ``SYSTEM = System(...)`` in its package's ``__init__``.

A field system (mem0, LangMem, Graphiti, Hindsight, Cognee, A-Mem) is one sub-package of
``memory_lab/memories/systems/``: its adapter (the module that registers its memories), its
worker where it runs in an environment of its own, its offline rule script, and this
declaration. ``memory-lab list``, ``make setup`` (``python -m memory_lab.memories.environments``),
the telemetry guard, the offline memory model and the docs read the declaration; nothing keeps a
list of systems by hand. An installed package declares a system the same way and names it in the
``memory_lab.systems`` entry-point group (``name = "package:SYSTEM"``).

The declaration imports nothing of the system: reading it costs a dataclass, so ``import
memory_lab`` reads every built-in declaration (for its telemetry switches) in a millisecond.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]  # where `make setup` makes environments


@dataclass(frozen=True)
class Environment:
    """A system that runs in a virtual environment of its own (its pins are not the project's):
    made beside the project by ``make setup`` from ``requirement`` pinned by ``constraints``."""

    folder: str  # ".venv-hindsight", beside the project
    requirement: str  # what pip installs there: "hindsight-api-slim[embedded-db]"
    constraints: str  # the pins, beside the project: "constraints-hindsight.txt"
    resource: str  # --resource NAME=PATH (or $MEMORY_LAB_<NAME>) names another environment's Python
    pins: tuple[str, ...] = ()  # requirements installed with it, beyond its constraints

    def pip_command(self, folder: str = "DIR") -> str:
        """How to make the environment by hand."""
        pins = "".join(f" '{p}'" for p in self.pins)
        return (
            f"python3 -m venv {folder} && {folder}/bin/pip install -c {self.constraints} "
            f"'{self.requirement}'{pins}"
        )

    def default_python(self) -> Path:
        return PROJECT / self.folder / "bin" / "python"

    def python(self, given: str | None = None) -> Path:
        """The environment's Python: ``given`` (the resource), else ``$MEMORY_LAB_<RESOURCE>``,
        else the project's ``folder``."""
        chosen = given or os.environ.get(f"MEMORY_LAB_{self.resource.upper()}")
        return Path(chosen) if chosen else self.default_python()


@dataclass(frozen=True)
class System:
    """One field system: what it is, where it comes from, what it needs, what it turns off."""

    name: str  # the package's name, and the name of its main memory
    title: str  # how the docs and tables name it ("mem0", "Graphiti")
    upstream: str  # the distribution its authors publish ("mem0ai")
    version: str  # the version this adapter is pinned to and tested with
    licence: str  # the upstream's licence (SPDX)
    reference: str  # its paper or repository
    adapter: str  # the module that registers its memories (``@register_memory(..., system=)``)
    memories: tuple[str, ...] = ()  # the memories it registers (``memory-lab list`` without it)
    # modules that must import in the project's environment, and the extra that brings them
    requires: tuple[str, ...] = ()
    extra: str | None = None
    # the install command where the extra cannot bring it (a package no index carries)
    install: str | None = None
    environment: Environment | None = None  # or an environment of its own
    telemetry: dict[str, str] = field(default_factory=dict)  # its opt-outs, set for every run
    rules: str | None = None  # ``module:Class`` of its offline rule script
    docs: str | None = None  # its page under docs/

    def install_command(self) -> str:
        """What a user runs to get what this system needs."""
        if self.environment is not None:
            return "make setup"
        if self.install:
            return self.install
        return f"pip install 'memory-lab[{self.extra}]'" if self.extra else "pip install memory-lab"

    def missing(self) -> str | None:
        """None when this environment can build the system's memories; else one line naming
        what is missing and the command that installs it (an environment of its own is checked
        by the memory's own preflight, which knows its ``--resource``)."""
        absent = [m for m in self.requires if not _importable(m)]
        if not absent:
            return None
        return (
            f"memory '{self.name}' needs {self.upstream} {self.version} "
            f"(module {', '.join(absent)} is not installed): {self.install_command()}"
        )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
