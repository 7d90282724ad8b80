"""Where memories and systems are found: by looking, never by a list kept by hand.

- The built-in memories: every module of ``memory_lab/memories/builtin/``, in name order
  (``classic`` first: buffer, window, summary, summary_buffer, vector).
- The field's systems: every sub-package of ``memory_lab/memories/systems/`` with its
  ``SYSTEM`` declaration (``memories/system.py``), in name order; then the systems installed
  packages declare in the ``memory_lab.systems`` entry-point group (``name = "module:SYSTEM"``).

Finding them imports declarations only (a dataclass each); a system's adapter, and with it its
library, is imported when the registry is first asked (``lookup.registered``).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from memory_lab.entry_points import declared_in
from memory_lab.memories.system import System

BUILTIN_PACKAGE = "memory_lab.memories.builtin"
SYSTEMS_PACKAGE = "memory_lab.memories.systems"
SYSTEM_GROUP = "memory_lab.systems"


def _children(package: str, packages: bool) -> list[str]:
    module = importlib.import_module(package)
    return sorted(
        f"{package}.{info.name}"
        for info in pkgutil.iter_modules(module.__path__)
        if info.ispkg == packages and not info.name.startswith("_")
    )


@cache
def builtin_modules() -> tuple[str, ...]:
    """The built-in memory modules, ``classic`` first, then in name order."""
    found = _children(BUILTIN_PACKAGE, packages=False)
    first = f"{BUILTIN_PACKAGE}.classic"
    return tuple(sorted(found, key=lambda m: (m != first, m)))


@cache
def builtin_systems() -> tuple[System, ...]:
    """The field systems memory-lab ships, by name."""
    out = []
    for package in _children(SYSTEMS_PACKAGE, packages=True):
        system = getattr(importlib.import_module(package), "SYSTEM", None)
        if not isinstance(system, System):
            raise TypeError(f"{package}: a system's package declares SYSTEM = System(...)")
        out.append(system)
    return tuple(out)


def installed_systems() -> tuple[System, ...]:
    """The systems installed packages declare (``memory_lab.systems`` entry points); one that
    cannot be read is skipped with a warning naming it."""
    return tuple(declared_in(SYSTEM_GROUP, System, "system"))


def systems() -> tuple[System, ...]:
    """Every system: memory-lab's, then installed packages' (a name declared twice: the first)."""
    seen: dict[str, System] = {}
    for system in (*builtin_systems(), *installed_systems()):
        seen.setdefault(system.name, system)
    return tuple(seen.values())


def system_named(name: str) -> System | None:
    return next((s for s in systems() if s.name == name), None)


def telemetry_switches() -> dict[str, str]:
    """The telemetry opt-outs memory-lab's systems declare (declarations only: nothing loads)."""
    out: dict[str, str] = {}
    for system in builtin_systems():
        out.update(system.telemetry)
    return out
