"""``memory-lab view``'s app: a local browser over results folders (runs, comparison, probes).

Routes (``run``: a run's key as ``GET /api/runs`` lists it; repeat it to compare runs):

- ``GET /``: the page (``memory_lab/data/viewer.html``: no build step, nothing fetched from
  the network).
- ``GET /api/runs``: the results folders under the folders given, rescanned on each request.
- ``GET /api/compare?run=..``: the runs' summary with intervals, the headline, paired
  differences on shared probes and every probe's verdict per memory (``report.comparison``).
- ``GET /api/charts?run=..``: the report's charts as SVG data URIs.
- ``GET /api/probe?run=..&dialogue=..&probe=..``: one probe through every memory: context,
  recalled items, reply, scores and judge output, with the evidence turns' text.

Only runs found under the folders given are read; a run's frames are read again when its
``records.jsonl`` or ``run.json`` changes. Like ``serve``, it answers on 127.0.0.1 only and
refuses requests addressed to another host (``http.HostCheck``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib import resources as package_files
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse

from memory_lab.log.run_spec import RUN_FILE
from memory_lab.results.compare import RunEntry, find_runs, plain
from memory_lab.results.read import RECORDS_FILE, Results, read_results
from memory_lab.serve.guard import RequestError
from memory_lab.serve.http import HostCheck, add_error_handlers

MAX_RUNS = 12  # runs compared at once
Runs = Annotated[list[str] | None, Query()]  # ?run=KEY&run=KEY


def _stamp(path: Path) -> tuple[float, ...]:
    return tuple(
        (path / name).stat().st_mtime_ns if (path / name).exists() else 0
        for name in (RECORDS_FILE, RUN_FILE)
    )


class RunBook:
    """The runs under the folders given, and their results read once per change."""

    def __init__(self, folders: list[str]):
        self.folders = folders
        self._lock = threading.Lock()
        self._runs: dict[str, RunEntry] = {}
        self._read: dict[str, tuple[tuple[float, ...], Results]] = {}
        self._dialogues: dict[tuple[str, str], dict[str, str] | None] = {}
        self.charts_lock = threading.Lock()  # matplotlib's rc settings are global
        self._charts: dict[tuple, list[dict[str, str]]] = {}

    def runs(self) -> list[RunEntry]:
        try:
            found = find_runs(self.folders)
        except ValueError as exc:  # a folder given has gone since the start
            raise RequestError(404, str(exc)) from None
        with self._lock:
            self._runs = {r.key: r for r in found}
        return found

    def entry(self, key: str) -> RunEntry:
        if key not in self._runs:
            self.runs()
        if key not in self._runs:
            raise RequestError(404, f"run {key!r}: no such results folder under the folders given")
        return self._runs[key]

    def results(self, key: str) -> Results:
        entry = self.entry(key)
        stamp = _stamp(entry.path)
        with self._lock:
            cached = self._read.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            results = read_results(entry.path)
        except (ValueError, OSError) as exc:
            raise RequestError(422, f"{entry.name}: {str(exc).splitlines()[0]}") from None
        with self._lock:
            self._read[key] = (stamp, results)
        return results

    def selection(self, keys: list[str]) -> tuple[list[Results], list[str]]:
        """The runs named (each once, in the order given) and their names."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            raise RequestError(422, "run: name at least one run (?run=KEY, as /api/runs lists)")
        if len(keys) > MAX_RUNS:
            raise RequestError(422, f"run: at most {MAX_RUNS} runs at once, got {len(keys)}")
        runs = [self.results(k) for k in keys]
        return runs, [self.entry(k).name for k in keys]

    def stamp(self, keys: list[str]) -> tuple:
        return tuple((k, _stamp(self.entry(k).path)) for k in dict.fromkeys(keys))

    def charts(self, keys: list[str]) -> list[dict[str, str]]:
        from memory_lab.results.compare import combine
        from memory_lab.views.report import chart_uris

        stamp = self.stamp(keys)
        with self.charts_lock:
            if stamp not in self._charts:
                runs, names = self.selection(keys)
                self._charts = {stamp: chart_uris(combine(runs, names))}  # the last one only
            return self._charts[stamp]

    def turn_texts(self, results: Results, dialogue: str) -> dict[str, str] | None:
        """Turn id -> text of a dialogue of the run, from its file as recorded in run.json;
        None when that file is gone or no longer holds what the run read (its hash differs)."""
        entry = next(
            (d for d in results.run.get("dialogues") or [] if str(d.get("id")) == dialogue), None
        )
        if not entry or not entry.get("source"):
            return None
        key = (str(entry["source"]), str(entry.get("sha256")))
        if key not in self._dialogues:
            self._dialogues[key] = _load_turns(entry["source"], dialogue, entry.get("sha256"))
        return self._dialogues[key]


def _load_turns(source: str, dialogue: str, sha256: str | None) -> dict[str, str] | None:
    from memory_lab.dialogue.sources import load_dialogues

    try:
        found = [d for d in load_dialogues(source) if d.id == dialogue]
    except (ValueError, OSError):  # DialogueError is a ValueError
        return None
    if not found or (sha256 and found[0].content_hash != sha256):
        return None
    return {t.id: t.text for t in found[0].turns}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [plain(r) for r in frame.to_dict("records")]


@dataclass
class ViewSettings:
    """What ``memory-lab view`` browses: the folders given on the command line."""

    folders: list[str]


def create_view_app(settings: ViewSettings) -> FastAPI:
    app = FastAPI(title="memory-lab view", docs_url=None, redoc_url=None, openapi_url=None)
    book = RunBook(settings.folders)
    app.state.book = book
    add_error_handlers(app)
    app.add_middleware(HostCheck)
    page = package_files.files("memory_lab").joinpath("data/viewer.html").read_text("utf-8")

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/api/runs")
    def runs() -> dict:
        return {"folders": settings.folders, "runs": [r.to_json() for r in book.runs()]}

    @app.get("/api/compare")
    def compare(run: Runs = None) -> dict:
        from memory_lab.views.report import comparison

        runs, names = book.selection(run or [])
        return comparison_json(comparison(runs, names), runs, names)

    @app.get("/api/charts")
    def charts(run: Runs = None) -> dict:
        return {"charts": book.charts(run or [])}

    @app.get("/api/probe")
    def probe(dialogue: str, probe: str, run: Runs = None) -> dict:
        runs, names = book.selection(run or [])
        return probe_json(book, runs, names, dialogue, probe)

    return app


def comparison_json(parts: dict[str, Any], runs: list[Results], names: list[str]) -> dict:
    """The comparison as JSON: everything the report's sections show, and the probe grid."""
    combined: Results = parts["results"]
    memories = combined.memory_order()
    probes = combined.probes
    grid = []
    if len(probes):
        for (dialogue, probe_id), group in probes.groupby(["dialogue", "probe_id"], sort=False):
            first = group.iloc[0]
            grid.append(
                {
                    "dialogue": dialogue,
                    "probe": probe_id,
                    "category": first["category"],
                    "question": first["question"],
                    "answers": plain(first["answers"]),
                    "correct": {
                        m: bool(c) for m, c in zip(group["memory"], group["correct"], strict=True)
                    },
                }
            )
    return {
        "names": names,
        "memories": memories,
        "headline": parts["headline"],
        "notes": list(dict.fromkeys(parts["stand_in"] + parts["notes"])),
        "style_note": parts["style_note"],
        "differences": [{"setting": s, "values": v} for s, v in parts["differences"]],
        "summary": _records(parts["summary"]),
        "pairs": _records(parts["pairs"]),
        "probes": grid,
        "failed": _records(combined.failed_cells()),
    }


PROBE_FIELDS = [
    "reply",
    "correct",
    "context_hit",
    "evidence_recall",
    "f1_locomo",
    "f1_mem0",
    "bleu1",
    "exact_match",
    "prompt_tokens",
    "context_tokens",
    "abstained",
    "stale",
    "judge_correct",
    "judge_raw",
    "judge_verdicts",
]


def _context(prompt: Any) -> str | None:
    from memory_lab.models.prompt import split_prompt

    if not isinstance(prompt, str) or not prompt:
        return None  # --no-prompts: the context was not recorded
    try:
        return split_prompt(prompt)[0]
    except ValueError:
        return prompt


def probe_json(
    book: RunBook, runs: list[Results], names: list[str], dialogue: str, probe_id: str
) -> dict:
    """One probe through every memory of the runs named, side by side."""
    from memory_lab.results.compare import combine

    combined = combine(runs, names)
    probes = combined.probes
    rows = probes[(probes["dialogue"] == dialogue) & (probes["probe_id"] == probe_id)]
    if rows.empty:
        raise RequestError(404, f"probe {probe_id!r} of dialogue {dialogue!r}: not in these runs")
    order = {m: i for i, m in enumerate(combined.memory_order())}
    rows = rows.assign(_order=rows["memory"].map(order)).sort_values("_order")
    owner = {}  # the run each memory label comes from
    for results, name in zip(runs, names, strict=True):
        for memory in results.probes["memory"].unique() if len(results.probes) else []:
            owner[memory if len(runs) == 1 else f"{name}/{memory}"] = results
    first = rows.iloc[0]
    source_dialogue = dialogue.rsplit("@", 1)[0] if "@" in dialogue else dialogue
    texts = book.turn_texts(owner[first["memory"]], source_dialogue)
    memories = []
    for r in rows.to_dict("records"):
        own = book.turn_texts(owner[r["memory"]], source_dialogue) or {}
        recalled = r.get("recalled_turns")
        memories.append(
            {
                "memory": r["memory"],
                "context": _context(r.get("prompt")),
                "recalled": None
                if not isinstance(recalled, list)
                else [{"id": t, "text": own.get(t)} for t in recalled],
                **{f: plain(r.get(f)) for f in PROBE_FIELDS},
            }
        )
    evidence = plain(first["evidence"]) or []
    return {
        "dialogue": dialogue,
        "probe": probe_id,
        "question": first["question"],
        "answers": plain(first["answers"]),
        "stale_answers": plain(first["stale_answers"]),
        "category": first["category"],
        "after": first["after"],
        "evidence": [{"id": e, "text": (texts or {}).get(e)} for e in evidence],
        "texts_found": texts is not None,
        "memories": memories,
    }
