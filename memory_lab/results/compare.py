"""Several results folders at once: finding runs under folders, and one comparison of them.

``find_runs`` lists the results folders under the folders given (what ``memory-lab view``
shows); ``combine`` reads several runs as one :class:`~memory_lab.results.read.Results` whose
memories are labelled ``run/memory``, so the summary, the paired comparison and the charts
(``pairs.paired_comparison``, ``charts``) work on it unchanged; ``compare_summary`` is every
run's own summary (each priced and judged as that run was) under those labels.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memory_lab.errors import BadInput
from memory_lab.log.run_spec import RUN_FILE, RunSpec, read_run_file
from memory_lab.results.read import RECORDS_FILE, Results
from memory_lab.results.summary import summarize
from memory_lab.text.limits import MAX_RUN_FILE_BYTES, not_regular

MAX_DEPTH = 6  # how deep under a given folder results folders are looked for
SKIPPED = {".git", ".venv", "node_modules", "__pycache__", "charts"}


@dataclass
class RunEntry:
    """One results folder as the run list shows it (run.json's fields, or why it is unreadable)."""

    key: str  # the folder as found (a given folder joined with the path under it)
    name: str  # a short label, unique among the runs found
    path: Path
    status: str = "no run.json"
    started: str | None = None
    finished: str | None = None
    dialogues: int = 0
    probes: int = 0
    memories: list[str] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)
    answer_style: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "status": self.status,
            "started": self.started,
            "finished": self.finished,
            "dialogues": self.dialogues,
            "probes": self.probes,
            "memories": self.memories,
            "models": self.models,
            "answer_style": self.answer_style,
            "error": self.error,
        }


def is_results_folder(path: Path) -> bool:
    """A folder with records.jsonl or run.json in it, whatever they are (a run whose files are
    no regular files is listed, and refused in one line when it is read)."""
    return any(os.path.lexists(path / name) for name in (RECORDS_FILE, RUN_FILE))


def _folders_under(root: Path) -> list[Path]:
    """Results folders under ``root`` (itself when it is one), not looking
    inside a results folder, nor deeper than ``MAX_DEPTH``), but never through a
    symbolic link below ``root``: a link can lead out of the folders given, or around in a
    loop (five links to ``.`` would list one run thousands of times)."""
    if is_results_folder(root):
        return [root]
    found: list[Path] = []
    level = [root]
    for _ in range(MAX_DEPTH):
        deeper = []
        for folder in level:
            try:
                with os.scandir(folder) as entries:
                    children = sorted(
                        Path(e.path)
                        for e in entries
                        if e.is_dir(follow_symlinks=False)
                        and e.name not in SKIPPED
                        and not e.name.startswith(".")
                    )
            except OSError:
                continue
            for child in children:
                (found if is_results_folder(child) else deeper).append(child)
        level = deeper
    return sorted(found)


def _run_file_problem(run_file: Path) -> str | None:
    """Why ``run_file`` cannot be read as a run.json (not a regular file, over its limit), or
    None (absent included: the run is listed as it is)."""
    try:
        info = os.stat(run_file, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return not_regular(info.st_mode)
    if info.st_size > MAX_RUN_FILE_BYTES:
        return (
            f"is {info.st_size:,} bytes; the limit is {MAX_RUN_FILE_BYTES:,} (MAX_RUN_FILE_BYTES)"
        )
    return None


def run_names(paths: list[Path]) -> list[str]:
    """Short unique labels: the folder's name, with as many parents as it takes to be unique."""
    depth = 1
    while True:
        names = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(names)) == len(names) or depth > max((len(p.parts) for p in paths), default=1):
            return names
        depth += 1


def find_runs(folders: list[str | Path]) -> list[RunEntry]:
    """Every results folder under ``folders`` (``_folders_under``), each once however many
    ways lead to it (by its real path), described from its run.json. A folder given that does
    not exist or holds no results folder is a BadInput naming it."""
    paths: list[Path] = []
    seen: set[str] = set()
    for given in folders:
        root = Path(given)
        if not root.exists():
            raise BadInput(f"{given}: no such folder")
        if not root.is_dir():
            raise BadInput(f"{given}: not a folder")
        under = _folders_under(root)
        if not under:
            raise BadInput(f"{given}: no results folder (run.json or records.jsonl) under it")
        for path in under:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                paths.append(path)
    return [describe_run(p, n) for p, n in zip(paths, run_names(paths), strict=True)]


def describe_run(path: Path, name: str) -> RunEntry:
    """A run's line in the viewer's list, from its run.json once that is known to be a regular
    file in the folder within ``MAX_RUN_FILE_BYTES`` (else listed as unreadable, saying why)."""
    problem = _run_file_problem(path / RUN_FILE)
    if problem is not None:
        entry = RunEntry(str(path), name, path, status="unreadable")
        entry.error = f"{path / RUN_FILE}: {problem}"
        return entry
    entry = RunEntry(str(path), name, path)
    run_file = path / RUN_FILE
    if not run_file.is_file():
        return entry
    try:
        spec = RunSpec.read(read_run_file(run_file), str(run_file))
    except (ValueError, OSError) as exc:
        entry.status, entry.error = "unreadable", str(exc).splitlines()[0]
        return entry
    models = spec.models
    entry.status = "unknown" if "status" in spec.absent else spec.status
    entry.started, entry.finished = spec.started, spec.finished
    entry.dialogues = len(spec.dialogues)
    entry.probes = sum(d.probes or 0 for d in spec.dialogues)
    entry.memories = list(spec.memories)
    entry.models = {
        "llm": f"{models.llm} ({models.llm_model})" if models.llm_model else str(models.llm),
        "memory_llm": str(models.memory_llm),
        "embeddings": str(models.embeddings),
    }
    if spec.judge_model is not None:
        entry.models["judge"] = str(spec.judge_model)
    entry.answer_style = spec.answer_style
    return entry


def _relabelled(frame: pd.DataFrame, name: str, renamed: set[str]) -> pd.DataFrame:
    frame = frame.copy()
    if len(frame):
        frame["memory"] = name + "/" + frame["memory"].astype(str)
        if renamed and "dialogue" in frame:
            frame["dialogue"] = [f"{d}@{name}" if d in renamed else d for d in frame["dialogue"]]
    return frame


def _changed_dialogues(runs: list[Results]) -> set[str]:
    """Dialogue ids whose content differs between runs (their probes are not the same)."""
    hashes: dict[str, set[str]] = {}
    for results in runs:
        for entry in results.run.get("dialogues") or []:
            if isinstance(entry, dict) and entry.get("sha256"):
                hashes.setdefault(str(entry["id"]), set()).add(entry["sha256"])
    return {d for d, seen in hashes.items() if len(seen) > 1}


def combine(runs: list[Results], names: list[str]) -> Results:
    """Several runs as one Results: every memory labelled ``name/memory``; a dialogue whose
    content differs between runs is labelled ``dialogue@name`` so its probes are never paired.
    run.json is the first run's with every run's memories and dialogues, and its price table
    only when every run has the same one (else costs are not estimated). One run: itself."""
    if len(runs) == 1:
        return runs[0]
    renamed = _changed_dialogues(runs)
    frames = {}
    for kind in ("turns", "probes", "cells", "usage"):
        parts = [
            _relabelled(getattr(r, kind), n, renamed) for r, n in zip(runs, names, strict=True)
        ]
        frames[kind] = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    run = json.loads(json.dumps(runs[0].run)) if runs[0].run else {}
    specs, memories, dialogues = [], [], []
    for results, name in zip(runs, names, strict=True):
        for spec in results.run.get("memory_specs") or []:
            specs.append({**spec, "label": f"{name}/{spec['label']}"})
        memories += [f"{name}/{m}" for m in results.memory_order()]
        for entry in results.run.get("dialogues") or []:
            entry = {**entry, "id": f"{entry['id']}@{name}"} if entry["id"] in renamed else entry
            if entry not in dialogues:
                dialogues.append(entry)
    run.update(memories=memories, memory_specs=specs, dialogues=dialogues)
    if any(r.run.get("pricing") != runs[0].run.get("pricing") for r in runs):
        run.pop("pricing", None)
    path = Path(runs[0].path)
    return Results(
        path,
        run,
        frames["turns"],
        frames["probes"],
        frames["cells"],
        frames["usage"],
    )


def compare_summary(
    runs: list[Results], names: list[str], summaries: list[pd.DataFrame] | None = None
) -> pd.DataFrame:
    """Every run's own summary (``results.summarize``, or ``summaries`` already made),
    memories labelled ``name/memory``."""
    summaries = summaries or [summarize(r) for r in runs]
    if len(runs) == 1:
        return summaries[0]
    parts = []
    for summary, name in zip(summaries, names, strict=True):
        parts.append(summary.assign(memory=name + "/" + summary["memory"].astype(str)))
    return pd.concat(parts, ignore_index=True)


COMPARED_FIELDS = {
    "answering model": lambda s: f"{s.models.llm} ({s.models.llm_model})",
    "memory LLM": lambda s: str(s.models.memory_llm),
    "embeddings": lambda s: str(s.models.embeddings),
    "answer style": lambda s: str(s.answer_style),
    "judge": lambda s: "none" if s.judge_model is None else str(s.judge_model),
    "priced as": lambda s: f"{s.pricing.llm_model} / {s.pricing.embeddings_model}",
    "mode": lambda s: str(s.mode),
    "context limit": lambda s: s.context_limit_text or "–",
}


def differences(runs: list[Results], names: list[str]) -> list[tuple[str, dict[str, str]]]:
    """The run settings that differ between the runs compared: (setting, {run: value})."""
    specs = [r.spec for r in runs]
    out = []
    for label, value in COMPARED_FIELDS.items():
        values = {n: ("–" if s is None else value(s)) for n, s in zip(names, specs, strict=True)}
        if len(set(values.values())) > 1:
            out.append((label, values))
    return out


def plain(value: Any) -> Any:
    """A value for JSON: NaN and missing as None, numpy scalars as Python ones."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
        if isinstance(value, list):
            return [plain(v) for v in value]
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value
