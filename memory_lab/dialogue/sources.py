"""Dialogue sources: files, folders, built-in suites and foreign datasets -> validated dialogues.

A source is a YAML/JSON file, a folder of them, ``builtin:NAME``, or a foreign dataset
``FORMAT:PATH`` (``locomo:``, ``longmemeval:``; see ``memory_lab.dialogue.importers``). Parsing and
validation of one document live in ``memory_lab.dialogue.model``; this module finds the documents.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from importlib import resources
from pathlib import Path

from memory_lab.dialogue.importers import import_source, parse_source
from memory_lab.dialogue.model import Dialogue, DialogueError, Problem, check_file, parse_documents
from memory_lab.errors import BadInput
from memory_lab.text.limits import regular_files_only

BUILTIN_PREFIX = "builtin:"
DIALOGUE_SUFFIXES = (".yaml", ".yml", ".json")


def builtin_suites() -> list[str]:
    """Names of the built-in suites, usable as ``builtin:NAME``."""
    root = resources.files("memory_lab") / "dialogues"
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))


SOURCE_KINDS = (
    "a source is a dialogue file or folder, builtin:NAME such as builtin:classic, or "
    "FORMAT:PATH for your copy of a dataset, e.g. locomo:data/locomo10.json; see "
    "docs/importers.md"
)


def _expand(source: str | Path) -> tuple[list[Path], list[Problem]]:
    text = str(source)
    if text.startswith(BUILTIN_PREFIX):
        name = text[len(BUILTIN_PREFIX) :]
        if name not in builtin_suites():
            known = ", ".join(BUILTIN_PREFIX + s for s in builtin_suites())
            return [], [Problem(text, None, "source", f"unknown built-in suite (known: {known})")]
        root = Path(str(resources.files("memory_lab") / "dialogues" / name))
        return sorted(p for p in root.iterdir() if p.suffix in DIALOGUE_SUFFIXES), []
    path = Path(text)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in DIALOGUE_SUFFIXES)
        if not files:
            return [], [Problem(text, None, "source", "folder holds no .yaml/.yml/.json files")]
        return files, []
    if path.is_file():
        return [path], []
    return [], [Problem(text, None, "source", f"no such file or folder ({SOURCE_KINDS})")]


def validate(sources: Iterable[str | Path]) -> tuple[list[Dialogue], list[Problem]]:
    """Check every file of every source; return valid dialogues and all problems found.

    A source is a file, a folder, ``builtin:NAME``, or a foreign dataset ``FORMAT:PATH``
    (``locomo:``, ``longmemeval:``; see ``memory_lab.dialogue.importers``).
    """
    dialogues: list[Dialogue] = []
    problems: list[Problem] = []
    for source in sources:
        try:
            foreign = parse_source(str(source))
            result = import_source(*foreign) if foreign is not None else None
        except DialogueError as exc:
            problems.extend(exc.problems)
            continue
        if result is not None:
            result.report.print()
            ds, errs = parse_documents(result.documents, str(source))
            dialogues.extend(ds)
            problems.extend(errs)
            continue
        files, errs = _expand(source)
        problems.extend(errs)
        for f in files:
            ds, errs = check_file(f)
            dialogues.extend(ds)
            problems.extend(errs)
    seen: dict[str, str] = {}
    for d in dialogues:
        if d.id in seen:
            problems.append(
                Problem(d.source, d.id, "id", f"duplicate dialogue id, also in {seen[d.id]}")
            )
        seen.setdefault(d.id, d.source)
    return dialogues, problems


def load_dialogues(*sources: str | Path, regular_only: bool = False) -> list[Dialogue]:
    """Load dialogues from files, folders or ``builtin:NAME``; DialogueError on any problem.

    ``regular_only``: every file read must be a regular file (``limits.regular_files_only``):
    a pipe or a device is refused, never waited on, as for a source named by a file someone
    else wrote (a results folder's run.json, read by ``memory-lab view``).
    """
    if not sources:
        raise BadInput("load_dialogues needs at least one source")
    with regular_files_only() if regular_only else nullcontext():
        dialogues, problems = validate(sources)
    if problems:
        raise DialogueError(problems)
    return dialogues
