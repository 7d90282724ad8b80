"""Foreign datasets -> dialogue documents of format v1 (DESIGN.md section 3).

An importer is one function ``(path, **options) -> ImportResult``: plain dialogue dicts (the same
shape as our YAML, so ``memory-lab import`` can write them out) and a report that counts what
was imported and lists every skipped item with its reason. Nothing is dropped silently.
Sources are written ``FORMAT:PATH`` with options after ``#``: ``locomo:data/locomo10.json``,
``locomo:data/locomo10.json#categories=swapped``, ``longmemeval:longmemeval_s.json``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_lab.dialogue import DialogueError, Problem


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
        return "\n".join(lines)

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


def _importers() -> dict[str, Callable[..., ImportResult]]:
    from memory_lab.importers.locomo import import_locomo
    from memory_lab.importers.longmemeval import import_longmemeval

    return {"locomo": import_locomo, "longmemeval": import_longmemeval}


FORMATS = ("locomo", "longmemeval")


def parse_source(text: str) -> tuple[str, Path, dict[str, str]] | None:
    """Split ``FORMAT:PATH#key=value`` into its parts; None when not a foreign source."""
    fmt, sep, rest = text.partition(":")
    if not sep or fmt not in FORMATS:
        return None
    path, _, opts = rest.partition("#")
    options = dict(item.split("=", 1) for item in opts.split(",") if "=" in item)
    return fmt, Path(path), options


def import_source(
    fmt: str, path: str | Path, options: dict[str, str] | None = None
) -> ImportResult:
    """Import ``path`` in ``fmt``; DialogueError naming record and field when malformed."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown dataset format {fmt!r} (known: {', '.join(FORMATS)})")
    path = Path(path)
    if not path.exists():
        raise import_error(str(path), None, "source", "no such file or folder")
    return _importers()[fmt](path, **(options or {}))
