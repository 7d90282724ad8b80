"""Follow the run configuration from the command line into a run, and print how it travels.

A small offline run (one built-in dialogue, ``buffer``, one process) is made by
``memory-lab run`` in this process under a profiler. Every call of a function of the package that
receives the configuration as an argument (not as ``self``: an object's own methods are not a
trip) is noted: the parsed command line (``Namespace``), the
``RunConfig``, the ``RunSpec``, a ``ModelSpec`` or ``ClientSettings``, or the run-wide context the
cells share. Consecutive calls in one module are one visit. Printed:

- **modules passed**: the package's modules the configuration visits;
- **re-entries**: visits to a module it had already visited and left (per module, the largest);
- **climbs back up**: moves from a module to one that is higher in the dependency order (it
  imports, directly or not, the module the configuration is leaving), i.e. the configuration
  going back up to a caller before it goes down again.

The order is read from the package's own imports (module level and inside functions), so the
script measures any layout of the package, before or after a reorganisation.

    python benchmarks/follow_config.py [--show]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_code_shape import import_graph  # noqa: E402

CARRIERS = {
    "Namespace",
    "RunConfig",
    "RunSpec",
    "ModelSpec",
    "ClientSettings",
    "RunModels",
    "RunContext",
    "RunPlan",
}


def reaches(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module -> every module it imports directly or through others."""
    closure: dict[str, set[str]] = {}
    for start in graph:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        closure[start] = seen - {start}
    return closure


def trace_run(out: Path) -> list[str]:
    """The modules, in call order, of the package's functions that receive the configuration."""
    from memory_lab.cli import main

    calls: list[str] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("memory_lab"):
            return
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        names = [n for n in code.co_varnames[:count] if n not in ("self", "cls")]
        values = [frame.f_locals.get(n) for n in names]
        if any(type(v).__name__ in CARRIERS for v in values):
            if not calls or calls[-1] != module:
                calls.append(module)

    dialogue = ROOT / "memory_lab" / "dialogues" / "classic" / "trip-portugal-changes.yaml"
    argv = [
        "run",
        "--dialogues",
        str(dialogue),
        "--memory",
        "buffer",
        "--out",
        str(out),
        "--no-cache",
        "--quiet",
    ]
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        code = main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    if code:
        raise SystemExit(f"the run failed with exit code {code}")
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print the path itself too")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = trace_run(Path(folder) / "run")
    graph = import_graph(deferred=True)  # the package's own imports, as the shape test reads them
    above = reaches({m: t - {"memory_lab"} for m, t in graph.items()})
    climbs = sum(1 for a, b in zip(path, path[1:], strict=False) if a in above.get(b, set()))
    visits = Counter(path)
    if options.show:
        print(" -> ".join(m.removeprefix("memory_lab.") for m in path))
    print(f"modules passed: {len(visits)}")
    print(f"visits: {len(path)}, climbs back up: {climbs}")
    print(
        "re-entries: "
        + ", ".join(
            f"{m.removeprefix('memory_lab.')} {n - 1}" for m, n in visits.most_common() if n > 1
        )
    )


if __name__ == "__main__":
    main()
