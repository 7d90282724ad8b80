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


def require(module: str, wheel: str, how: str) -> None:
    """Import ``module``, installing ``wheel`` from the third-party folder first where it is
    not installed; skip the calling test module, with the reason, where neither works."""
    try:
        importlib.import_module(module)
        return
    except ImportError:
        pass
    path = folder() / wheel
    if not path.is_file():
        pytest.skip(
            f"{module} is not installed and {path} is absent (set MEMORY_LAB_THIRDPARTY to the "
            f"folder holding {wheel}); a user installs it with: {how}",
            allow_module_level=True,
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
        pytest.skip(
            f"{module} installed from {path} does not import: {exc}", allow_module_level=True
        )
