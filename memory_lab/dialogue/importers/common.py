"""What every importer uses: the import report and result, dialogue
ids, the probe-metadata keys two benchmarks share, and the checks and errors that name the file,
the record and the field of a malformed dataset."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory_lab.dialogue.model import DialogueError, Problem
from memory_lab.text.limits import InputError, bounds_problem, decode, parse_json, printable


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


# Probe-metadata keys two benchmarks write (each lists the keys it writes in its declaration's
# ``probe_keys``); readers import these names rather than spell the keys again.
MISSING_EVIDENCE_KEY = "missing_evidence"  # list: evidence ids as given that name no turn
REFERENCE_ANSWER_KEY = "reference_answer"  # str: the dataset's reply, where no answer is matched


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
