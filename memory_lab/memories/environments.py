"""The environments of the systems that run in one of their own, made from their declarations.

``python -m memory_lab.memories.environments [NAME...]`` (what ``make setup`` runs) makes, beside
the project, each declared environment (``SYSTEM.environment``) that is missing or out of date:
a virtual environment with the system's requirement installed under its constraints file. A
stamp in the environment records what it was made from (requirement, pins, the constraints
file's SHA-256), so an unchanged environment is left alone. ``--lock`` re-resolves each one
afresh and rewrites its constraints file (what ``make lock`` runs).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from memory_lab.memories.discover import builtin_systems
from memory_lab.memories.system import PROJECT, Environment, System

STAMP = ".installed"


def declared(names: list[str] | None = None) -> list[tuple[System, Environment]]:
    """The systems with an environment of their own (those named, when names are given)."""
    found = [(s, s.environment) for s in builtin_systems() if s.environment is not None]
    if names:
        unknown = sorted(set(names) - {s.name for s, _ in found})
        if unknown:
            raise SystemExit(
                f"no system with an environment of its own named {', '.join(unknown)} "
                f"(these have one: {', '.join(s.name for s, _ in found)})"
            )
        found = [(s, e) for s, e in found if s.name in names]
    return found


def fingerprint(env: Environment, project: Path = PROJECT) -> str:
    """What an environment is made from: its requirement, pins and constraints file."""
    digest = hashlib.sha256((project / env.constraints).read_bytes()).hexdigest()
    return f"{env.requirement} {' '.join(env.pins)} {env.constraints}={digest}\n"


def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True, cwd=PROJECT)


def make(system: System, env: Environment, base: str = sys.executable) -> bool:
    """Make ``env`` unless its stamp says it is current; whether it was made."""
    folder = PROJECT / env.folder
    stamp, want = folder / STAMP, fingerprint(env)
    if stamp.is_file() and stamp.read_text() == want:
        return False
    print(f"making {env.folder} ({system.title}: {env.requirement})", flush=True)
    subprocess.run([base, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    _pip(python, "-c", env.constraints, "--upgrade", "pip")
    _pip(python, "-c", env.constraints, env.requirement, *env.pins)
    stamp.write_text(want)
    return True


def lock(system: System, env: Environment, base: str = sys.executable) -> None:
    """Resolve ``env``'s requirement afresh in a scratch environment and freeze it into its
    constraints file."""
    scratch = PROJECT / "build" / f"lock-{system.name}"
    shutil.rmtree(scratch, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(scratch)], check=True)
    python = scratch / "bin" / "python"
    _pip(python, "--upgrade", "pip")
    _pip(python, env.requirement, *env.pins)
    frozen = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--all"], check=True, capture_output=True, text=True
    ).stdout
    (PROJECT / env.constraints).write_text(
        f"# Every package of {system.title}'s own environment ({env.folder}, the {system.name} "
        "memory's), pinned.\n# Rewritten by: make lock\n" + frozen
    )
    shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memory_lab.memories.environments",
        description="Make (or --lock) the environments of the systems that run in their own.",
    )
    parser.add_argument("names", nargs="*", help="systems (default: every one with one)")
    parser.add_argument("--lock", action="store_true", help="rewrite their constraints files")
    parser.add_argument("--python", default=sys.executable, help="the Python that makes them")
    args = parser.parse_args(argv)
    for system, env in declared(args.names):
        if args.lock:
            lock(system, env, args.python)
        elif not make(system, env, args.python):
            print(f"{env.folder} is current ({system.title})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
