"""Foreign datasets -> dialogue documents of format v1 (docs/dialogues.md, docs/importers.md).

An importer is one function ``(path, budget=..., **options) -> ImportResult`` (``budget``: the
``ReadBudget`` its reads draw on): plain dialogue dicts (the same shape as our YAML, so
``memory-lab import`` can write them out) and a report that counts what was imported and lists
every skipped item with its reason. Nothing is dropped silently.
Sources are written ``FORMAT:PATH`` with options after ``#``: ``locomo:data/locomo10.json``,
``locomo:data/locomo10.json#categories=swapped``, ``longmemeval:longmemeval_s.json#max_mib=300``.

Imports are bounded like dialogue files: at most 64 MiB read in all (a file, or all the files of a
folder or entries of a zip together; ``#max_mib=N`` raises it), and each record, which becomes one
dialogue, within the nesting and value-count limits of ``memory_lab.limits``.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_lab.dialogue import DialogueError, Problem
from memory_lab.limits import (
    MAX_FILE_BYTES,
    InputError,
    ReadBudget,
    bounds_problem,
    decode,
    parse_json,
    printable,
)


@dataclass
class ImportReport:
    """What an import produced and what it skipped, item by item."""

    format: str
    source: str
    dialogues: int = 0
    turns: int = 0
    probes: int = 0
    derived: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def skip(self, item: str, reason: str) -> None:
        self.skipped.append((item, reason))

    def text(self) -> str:
        lines = [
            f"imported {self.format} {self.source}: {self.dialogues} dialogue(s), "
            f"{self.turns} turn(s), {self.probes} probe(s) "
            f"({self.derived} marked derived: answer not verbatim in its evidence); "
            f"{len(self.skipped)} item(s) skipped"
        ]
        lines += [f"  skipped {item}: {reason}" for item, reason in self.skipped]
        return "\n".join(printable(line) for line in lines)

    def print(self) -> None:
        print(self.text(), file=sys.stderr)


@dataclass
class ImportResult:
    documents: list[dict[str, Any]]
    report: ImportReport


def slug(text: str) -> str:
    """A dialogue id of [a-z0-9-] from any string."""
    out = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return out or "dialogue"


def import_error(source: str, record: str | None, field_: str, message: str) -> DialogueError:
    """A DialogueError naming the file, the record and the field of a malformed dataset."""
    return DialogueError([Problem(source, record, field_, message)])


def read_json(name: str, read: Callable[[], bytes]) -> Any:
    """The parsed JSON of the bytes ``read()`` returns (a ``ReadBudget`` read); DialogueError
    naming ``name`` when they are too many, unreadable or not JSON."""
    try:
        return parse_json(decode(read()))
    except InputError as exc:
        raise import_error(name, None, "file", str(exc)) from None


def scalar(value: Any) -> bool:
    """A string or a number, as a text, answer, date or id may be (not a bool, list or object)."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def check_record(name: str, record: str, value: Any) -> None:
    """DialogueError when one record (one future dialogue) is too deep, too large or holds a
    lone surrogate or a non-finite number, as a dialogue file may not."""
    problem = bounds_problem(value)
    if problem:
        raise import_error(name, record, "record", problem)


def _importers() -> dict[str, Callable[..., ImportResult]]:
    from memory_lab.importers.locomo import import_locomo
    from memory_lab.importers.longmemeval import import_longmemeval

    return {"locomo": import_locomo, "longmemeval": import_longmemeval}


FORMATS = ("locomo", "longmemeval")


def parse_source(text: str) -> tuple[str, Path, dict[str, str]] | None:
    """Split ``FORMAT:PATH#key=value`` into its parts; None when not a foreign source.

    DialogueError naming the source when an option is not ``key=value`` or given twice.
    """
    fmt, sep, rest = text.partition(":")
    if not sep or fmt not in FORMATS:
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
    if fmt not in FORMATS:
        raise ValueError(f"unknown dataset format {fmt!r} (known: {', '.join(FORMATS)})")
    path = Path(path)
    options = dict(options or {})
    budget = _budget(str(path), options.pop("max_mib", None))
    importer = _importers()[fmt]
    known = [p for p in inspect.signature(importer).parameters if p not in ("path", "budget")]
    for key in options:
        if key not in known:
            allowed = ", ".join([*known, "max_mib"])
            raise import_error(
                str(path), None, "options", f"{fmt} has no option {key!r} (options: {allowed})"
            )
    if not path.exists():
        raise import_error(str(path), None, "source", "no such file or folder")
    return importer(path, budget=budget, **options)
