"""Foreign datasets -> dialogue documents of format v1 (docs/dialogues.md, docs/importers.md).

Each benchmark's importer lives in its package (``memory_lab/benchmarks/<name>/``), found by its
declaration (``memory_lab.benchmarks.benchmarks``). An importer is one function ``(path, budget=...,
**options) -> ImportResult`` (``budget``: the ``ReadBudget`` its reads draw on): plain dialogue
dicts (the same shape as our YAML, so ``memory-lab import`` can write them out) and a report that
counts what was imported and lists every skipped item with its reason. Nothing is dropped silently.
The parts every importer uses (the report, the checks naming record and field) are in
``memory_lab.dialogue.importers.common``.
Sources are written ``FORMAT:PATH`` with options after ``#``: ``locomo:data/locomo10.json``,
``locomo:data/locomo10.json#categories=swapped``, ``longmemeval:longmemeval_s.json#max_mib=300``,
``beam:BEAM/chats#scale=100K,conversations=1-3`` (a list inside one option is joined with ``+``),
``locomo-plus:Locomo-Plus#seed=0,limit=20``.

Imports are bounded like dialogue files: at most 64 MiB read in all (a file, or all the files of a
folder or entries of a zip together; ``#max_mib=N`` raises it), and each record, which becomes one
dialogue, within the nesting and value-count limits of ``memory_lab.text.limits``.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from memory_lab.benchmarks import benchmarks
from memory_lab.dialogue.importers.common import (  # noqa: F401 - the importers' shared parts, re-exported
    ImportReport,
    ImportResult,
    check_record,
    import_error,
    read_json,
    scalar,
    slug,
)
from memory_lab.errors import BadInput
from memory_lab.text.limits import MAX_FILE_BYTES, ReadBudget, regular_files_only


def formats() -> tuple[str, ...]:
    """The dataset formats ``FORMAT:PATH`` and ``memory-lab import`` accept."""
    return tuple(benchmarks())


def importer_options(fmt: str) -> list[str]:
    """The options ``FORMAT:PATH#key=value`` takes for ``fmt``: its importer's, and ``max_mib``."""
    importer = benchmarks()[fmt].importer
    own = [p for p in inspect.signature(importer).parameters if p not in ("path", "budget")]
    return [*own, "max_mib"]


def parse_source(text: str) -> tuple[str, Path, dict[str, str]] | None:
    """Split ``FORMAT:PATH#key=value`` into its parts; None when not a foreign source.

    DialogueError naming the source when an option is not ``key=value`` or given twice.
    """
    fmt, sep, rest = text.partition(":")
    if not sep or fmt not in formats():
        return None
    path, _, opts = rest.partition("#")
    options: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in opts.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise import_error(text, None, "options", f"expected key=value, got {item!r}")
        if key.strip() in options:
            raise import_error(text, None, "options", f"{key.strip()!r} given twice")
        options[key.strip()] = value.strip()
    return fmt, Path(path), options


def _budget(source: str, raw: str | None) -> ReadBudget:
    hint = "raise it with #max_mib=N"
    if raw is None:
        return ReadBudget(MAX_FILE_BYTES, hint)
    if not re.fullmatch(r"[0-9]{1,7}", raw) or not 1 <= int(raw) <= 1024 * 1024:
        raise import_error(
            source, None, "options", f"max_mib must be a whole number of MiB >= 1, got {raw!r}"
        )
    return ReadBudget(int(raw) * 1024 * 1024, hint)


def import_source(
    fmt: str, path: str | Path, options: dict[str, str] | None = None
) -> ImportResult:
    """Import ``path`` in ``fmt``; DialogueError naming record and field when malformed.

    ``options`` are the importer's keyword options plus ``max_mib`` (the read limit, in MiB).
    """
    declared = benchmarks()
    if fmt not in declared:
        raise BadInput(f"unknown dataset format {fmt!r} (known: {', '.join(declared)})")
    path = Path(path)
    options = dict(options or {})
    budget = _budget(str(path), options.pop("max_mib", None))
    importer = declared[fmt].importer
    known = importer_options(fmt)
    for key in options:
        if key not in known:
            allowed = ", ".join(known)
            raise import_error(
                str(path), None, "options", f"{fmt} has no option {key!r} (options: {allowed})"
            )
    if not path.exists():
        where = f"{declared[fmt].origin}; see {declared[fmt].docs}"
        raise import_error(str(path), None, "source", f"no such file or folder ({where})")
    with regular_files_only():  # a FIFO or a device is refused, never waited on or read
        return importer(path, budget=budget, **options)
