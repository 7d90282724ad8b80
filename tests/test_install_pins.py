"""Installs are pinned: constraints.txt covers every dependency and matches what is installed."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
CONSTRAINTS = ROOT / "constraints.txt"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not NAME==VERSION"
            out[canonical(name)] = version
    return out


def declared() -> list[str]:
    """Every requirement of the core and of the dev extra, the extras it names expanded (dev
    brings every system's, ``memory-lab[systems,...]``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = project["optional-dependencies"]
    requirements, pending, seen = list(project["dependencies"]), ["dev"], set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for r in extras[extra]:
            own = re.match(r"memory-lab\[([^\]]+)\]", r)
            if own:
                pending += [e.strip() for e in own.group(1).split(",")]
            else:
                requirements.append(r)
    return [canonical(re.match(r"[A-Za-z0-9_.-]+", r).group()) for r in requirements]


def test_every_declared_dependency_is_pinned():
    missing = sorted(set(declared()) - set(pins()))
    assert not missing, f"not in constraints.txt (run make lock): {missing}"


def test_installed_versions_are_the_pinned_ones():
    """A venv made by make setup holds exactly the pins (a drifted venv: rerun make setup)."""
    wanted = pins()
    if "memory-lab" in wanted:
        pytest.fail("constraints.txt pins memory-lab itself")
    drift = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"])
        if name in wanted and dist.version.split("+")[0] != wanted[name]:
            drift[name] = (wanted[name], dist.version)
    assert not drift, f"installed versions differ from constraints.txt: {drift}"
