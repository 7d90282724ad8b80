"""Packages no reachable index carries, installed for the tests from the folder that holds them.

``MEMORY_LAB_THIRDPARTY`` names the folder; by default ``shared/thirdparty`` beside the
project's checkout. A wheel found there is installed (``--no-deps``: its dependencies come
with the project's extras) into a folder of the test session's own and put on ``sys.path``;
where it is absent the tests that need it skip, saying where it was looked for and how a user
installs the package.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def folder() -> Path:
    given = os.environ.get("MEMORY_LAB_THIRDPARTY")
    return Path(given) if given else ROOT.parent / "shared" / "thirdparty"


def install(module: str, wheel: str) -> str | None:
    """Make ``module`` importable, installing ``wheel`` from the third-party folder first where
    it is not installed; None when it imports, else why not."""
    try:
        importlib.import_module(module)
        return None
    except ImportError:
        pass
    path = folder() / wheel
    if not path.is_file():
        return (
            f"{module} is not installed and {path} is absent (set MEMORY_LAB_THIRDPARTY to the "
            f"folder holding {wheel})"
        )
    target = tempfile.mkdtemp(prefix=f"memory-lab-{module}-")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
         target, str(path)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    sys.path.insert(0, target)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (target, os.environ.get("PYTHONPATH")) if p
    )
    importlib.invalidate_caches()
    try:
        importlib.import_module(module)
    except ImportError as exc:  # its dependencies: the project's extra
        return f"{module} installed from {path} does not import: {exc}"
    return None


# The packages of the field's systems that no index carries: (module, wheel) by memory
WHEELS = {"amem": ("agentic_memory.memory_system", "agentic_memory-0.0.1-py3-none-any.whl")}


def installed_memories(names: list[str]) -> list[str]:
    """``names`` less the memories whose system this machine lacks (an extra not installed,
    a wheel absent from the third-party folder); those in ``WHEELS`` installed from it first."""
    from memory_lab.memories import memory_factories

    factories = memory_factories()
    for name in names:
        if name in WHEELS:
            install(*WHEELS[name])
    return [
        n for n in names
        if factories[n].system is None or factories[n].system.missing() is None
    ]  # fmt: skip


def require(module: str, wheel: str, how: str) -> None:
    """Import ``module`` (``install``); skip the calling test module, with the reason, where it
    cannot be."""
    why = install(module, wheel)
    if why is not None:
        pytest.skip(f"{why}; a user installs it with: {how}", allow_module_level=True)
