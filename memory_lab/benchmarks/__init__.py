"""The benchmarks memory-lab imports and scores, each one package found by its declaration.

A benchmark is a sub-package of ``memory_lab/benchmarks/`` whose ``__init__`` declares
``BENCHMARK = Benchmark(...)`` (``declaration.py``), or an installed package's declaration in the
``memory_lab.benchmarks`` entry-point group (``name = "module:BENCHMARK"``). Nothing lists them by
hand: ``FORMAT:PATH`` sources, ``memory-lab import``, ``memory-lab list``, ``memory-lab score``,
the summary's categories, the report's sections and the headline all read them from here.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path
from typing import Any

from memory_lab.benchmarks.declaration import (
    Benchmark,
    ScoreOutcome,
    Scorer,
    ScoreRequest,
    Section,
    ViewContext,
)

__all__ = [
    "Benchmark",
    "ScoreOutcome",
    "ScoreRequest",
    "Scorer",
    "Section",
    "ViewContext",
    "benchmark_named",
    "benchmarks",
    "score",
    "set_apart",
]

BENCHMARK_GROUP = "memory_lab.benchmarks"


def benchmarks() -> dict[str, Benchmark]:
    """Every declared benchmark by name: memory-lab's own (by package name), then installed
    packages' (a name declared twice: the first)."""
    return dict(_declared())


def benchmark_named(name: str) -> Benchmark:
    """The benchmark ``name``; BadInput naming the known ones when there is none."""
    found = benchmarks()
    if name not in found:
        from memory_lab.errors import BadInput

        raise BadInput(f"unknown benchmark {name!r} (known: {', '.join(found)})")
    return found[name]


def score(
    benchmark: str,
    results_dir: str | Path,
    judge: str = "offline",
    protocols: str | list[str] | tuple[str, ...] | None = None,
    prompts: str | Path | None = None,
    base_url: str | None = None,
    out: str | Path | None = None,
    export_retrieval: str | Path | None = None,
) -> ScoreOutcome:
    """Score the run in ``results_dir`` as ``benchmark``'s authors do (``memory-lab score``).

    ``judge``: ``offline`` (where the benchmark grades without a model) or ``PROVIDER:MODEL``,
    through the judge core (metered, cached in the run's call cache, billed in an account beside
    the scores); ``protocols``: a name, several, ``all``, or None for the declared default;
    ``prompts``: the user's checkout of the benchmark, where its judge's prompts are read;
    ``export_retrieval``: a folder for the rankings in the authors' own format, where the
    benchmark declares it. BadInput naming the option when one does not apply."""
    from memory_lab.errors import BadInput

    declared = benchmark_named(benchmark)
    scorer = declared.scorer
    if scorer is None:
        raise BadInput(f"{benchmark}: no scorer declared (see {declared.docs})")
    folder = Path(results_dir)
    if not folder.is_dir():
        raise BadInput(f"{folder}: no such results folder")
    if judge == "offline" and not scorer.offline:
        raise BadInput(f"{benchmark}: its judge needs PROVIDER:MODEL (--judge; no offline grading)")
    if export_retrieval is not None and "retrieval" not in scorer.exports:
        raise BadInput(f"{benchmark}: --export-retrieval is not declared by its scorer")
    return scorer.score(
        ScoreRequest(
            results_dir=folder,
            judge=judge,
            protocols=_protocols(declared, protocols),
            prompts=None if prompts is None else Path(prompts),
            base_url=base_url,
            out=None if out is None else Path(out),
            export_retrieval=None if export_retrieval is None else Path(export_retrieval),
        )
    )


def _protocols(declared: Benchmark, asked: str | list[str] | tuple[str, ...] | None) -> tuple:
    scorer = declared.scorer
    assert scorer is not None
    if asked is None:
        return tuple(scorer.default_protocols or scorer.protocols)
    names = [asked] if isinstance(asked, str) else list(asked)
    if names in (["all"], ["both"]):
        return tuple(scorer.protocols)
    unknown = [n for n in names if n not in scorer.protocols]
    if unknown:
        from memory_lab.errors import BadInput

        known = ", ".join((*scorer.protocols, "all"))
        raise BadInput(f"{declared.name}: no protocol {unknown[0]!r} (known: {known})")
    return tuple(dict.fromkeys(names))


def set_apart(metadata: Any) -> str | None:
    """The label of the probes a benchmark summarises apart (``Benchmark.set_apart``: LoCoMo's
    adversarial traps) when ``metadata`` is one of them, else None."""
    if not isinstance(metadata, dict):
        return None
    for declared in benchmarks().values():
        if declared.set_apart is not None and declared.set_apart(metadata):
            return declared.set_apart_note or declared.label
    return None


@cache
def _declared() -> tuple[tuple[str, Benchmark], ...]:
    found: dict[str, Benchmark] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.ispkg or info.name.startswith("_"):
            continue
        package = f"{__name__}.{info.name}"
        declared = getattr(importlib.import_module(package), "BENCHMARK", None)
        if not isinstance(declared, Benchmark):
            raise TypeError(f"{package}: a benchmark's package declares BENCHMARK = Benchmark(...)")
        found.setdefault(declared.name, declared)
    for declared in _installed():
        found.setdefault(declared.name, declared)
    return tuple(found.items())


def _installed() -> list[Benchmark]:
    from memory_lab.entry_points import declared_in

    return declared_in(BENCHMARK_GROUP, Benchmark, "benchmark")
