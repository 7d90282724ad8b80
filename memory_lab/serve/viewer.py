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

Only runs found under the folders given are read (``compare.find_runs``: never through a
symbolic link below a folder given, each run once by its real path), each file as a regular file
in its folder within its limit (``results.read``); a run's frames are read again when its
``records.jsonl`` or ``run.json`` changes. Reading and computing run on a few threads shared by
every request (``Work``): requests for the same thing share one job, and a request waits for
its job at most ``REQUEST_SECONDS`` (then a 503), so one slow run cannot take every thread.
Like ``serve``, it answers on 127.0.0.1 only and refuses requests addressed to another host
(``http.HostCheck``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
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
from memory_lab.results.summary import FIELD_SCORES
from memory_lab.scoring.metrics import compared, metric
from memory_lab.serve.guard import RequestError
from memory_lab.serve.http import HostCheck, add_error_handlers
from memory_lab.views.headline import ranked_by
from memory_lab.views.tables import cost_text, priced_local

MAX_RUNS = 12  # runs compared at once
READERS = 4  # threads reading runs and computing pages, shared by every request
REQUEST_SECONDS = 30.0  # a request waits this long for its reading; the reading goes on
Runs = Annotated[list[str] | None, Query()]  # ?run=KEY&run=KEY


def _stamp(path: Path) -> tuple[float, ...]:
    """When a run's files last changed (0 for one that is not there); never follows a link."""
    stamps = []
    for name in (RECORDS_FILE, RUN_FILE):
        try:
            stamps.append(os.stat(path / name, follow_symlinks=False).st_mtime_ns)
        except OSError:
            stamps.append(0)
    return tuple(stamps)


# ---------------------------------------------------------------------- finding runs


# ---------------------------------------------------------------------- the work of requests


class Work:
    """The viewer's blocking work (finding runs, reading them, the dialogue files, computing a
    page) on ``threads`` threads shared by every request, so no request holds a server thread
    while it waits. A job is named by what it computes: requests for the same thing share one
    job, so a run that is slow to read takes one thread however many ask for it. A request
    waits at most ``seconds`` for its job (then a 503 saying to try again); a job already
    started goes on (a run read is kept for the next request), one nobody waits for any more
    is dropped before it starts."""

    def __init__(self, threads: int = READERS, seconds: float = REQUEST_SECONDS):
        self.seconds = seconds
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="memory-lab-view")
        self._lock = threading.RLock()  # a job cancelled under it calls back at once
        self._jobs: dict[Hashable, Future] = {}
        self._waiting: dict[Future, int] = {}  # requests awaiting each job

    def _forget(self, key: Hashable, job: Future) -> None:
        with self._lock:
            if self._jobs.get(key) is job:
                del self._jobs[key]

    async def run(self, key: Hashable, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            job = self._jobs.get(key)
            if job is None:
                job = self._jobs[key] = self._pool.submit(fn, *args)
                job.add_done_callback(lambda done: self._forget(key, done))
            self._waiting[job] = self._waiting.get(job, 0) + 1
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job)), self.seconds)
        except TimeoutError:
            raise RequestError(
                503,
                f"{what}: not ready after {self.seconds:g} s (it goes on); try again shortly",
                {"Retry-After": "5"},
            ) from None
        finally:  # answered, timed out or the client gone
            with self._lock:
                self._waiting[job] -= 1
                if not self._waiting[job]:
                    del self._waiting[job]
                    job.cancel()  # only one not started yet: nobody waits for it

    def close(self) -> None:
        """Start no more jobs (those running finish on their own)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class RunBook:
    """The runs under the folders given, and their results read once per change. Its methods
    block (they read files): requests call them through ``Work``."""

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

    def known(self, key: str) -> bool:
        with self._lock:
            return key in self._runs

    def entry(self, key: str) -> RunEntry:
        with self._lock:
            entry = self._runs.get(key)
        if entry is None:
            raise RequestError(404, f"run {key!r}: no such results folder under the folders given")
        return entry

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

    def stamp(self, keys: list[str]) -> tuple:
        return tuple((k, _stamp(self.entry(k).path)) for k in keys)

    def charts(self, runs: list[Results], names: list[str], stamp: tuple) -> list[dict[str, str]]:
        from memory_lab.results.compare import combine
        from memory_lab.views.report import chart_uris

        with self.charts_lock:
            if stamp not in self._charts:
                self._charts = {stamp: chart_uris(combine(runs, names))}  # the last one only
            return self._charts[stamp]

    def turn_texts(self, results: Results, dialogue: str) -> dict[str, str] | None:
        """Turn id -> text of a dialogue of the run, from its file as recorded in run.json;
        None when that file is gone, is no regular file, or no longer holds what the run read
        (its hash differs)."""
        entry = next(
            (
                d
                for d in results.run.get("dialogues") or []
                if isinstance(d, dict) and str(d.get("id")) == dialogue
            ),
            None,
        )
        if not entry or not entry.get("source"):
            return None
        key = (str(entry["source"]), str(entry.get("sha256")))
        with self._lock:
            if key in self._dialogues:
                return self._dialogues[key]
        texts = _load_turns(str(entry["source"]), dialogue, entry.get("sha256"))
        with self._lock:
            self._dialogues[key] = texts
        return texts


def _load_turns(source: str, dialogue: str, sha256: str | None) -> dict[str, str] | None:
    from memory_lab.dialogue.importers import parse_source
    from memory_lab.dialogue.sources import load_dialogues

    # run.json records each dialogue's own file (or a dataset's ``FORMAT:PATH``, read within its
    # importer's byte budget): a folder named there (/usr) would be parsed whole, every request
    if parse_source(source) is None and not Path(source).is_file():
        return None
    try:  # a source named by run.json: a pipe or a device there is refused, not waited on
        found = [d for d in load_dialogues(source, regular_only=True) if d.id == dialogue]
    except (ValueError, OSError):  # DialogueError is a ValueError
        return None
    if not found or (sha256 and found[0].content_hash != sha256):
        return None
    return {t.id: t.text for t in found[0].turns}


class Viewer:
    """What the routes await: the run book's methods run as ``Work`` jobs."""

    def __init__(self, book: RunBook, work: Work):
        self.book = book
        self.work = work

    async def runs(self) -> list[RunEntry]:
        return await self.work.run(("runs",), "the run list", self.book.runs)

    async def selection(self, keys: list[str]) -> tuple[list[Results], list[str], tuple]:
        """The runs named (each once, in the order given), their names and their stamp."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            raise RequestError(422, "run: name at least one run (?run=KEY, as /api/runs lists)")
        if len(keys) > MAX_RUNS:
            raise RequestError(422, f"run: at most {MAX_RUNS} runs at once, got {len(keys)}")
        if not all(self.book.known(k) for k in keys):
            await self.runs()
        names = [self.book.entry(k).name for k in keys]
        stamp = self.book.stamp(keys)
        runs = await asyncio.gather(
            *(
                self.work.run(("read", k, s), f"run {name}", self.book.results, k)
                for (k, s), name in zip(stamp, names, strict=True)
            )
        )
        return list(runs), names, stamp

    async def compare(self, keys: list[str]) -> dict:
        from memory_lab.views.report import comparison

        runs, names, stamp = await self.selection(keys)

        def compute() -> dict:
            return comparison_json(comparison(runs, names), runs, names)

        return await self.work.run(("compare", stamp), "the comparison", compute)

    async def charts(self, keys: list[str]) -> list[dict[str, str]]:
        runs, names, stamp = await self.selection(keys)
        charts = self.book.charts
        return await self.work.run(("charts", stamp), "the charts", charts, runs, names, stamp)

    async def probe(self, keys: list[str], dialogue: str, probe: str) -> dict:
        runs, names, stamp = await self.selection(keys)
        key = ("probe", stamp, dialogue, probe)
        return await self.work.run(
            key, f"probe {probe!r}", probe_json, self.book, runs, names, dialogue, probe
        )


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [plain(r) for r in frame.to_dict("records")]


@dataclass
class ViewSettings:
    """What ``memory-lab view`` browses: the folders given on the command line; how many
    threads read runs (``readers``) and how long a request waits for its reading
    (``request_seconds``)."""

    folders: list[str]
    readers: int = READERS
    request_seconds: float = REQUEST_SECONDS


def create_view_app(settings: ViewSettings) -> FastAPI:
    app = FastAPI(title="memory-lab view", docs_url=None, redoc_url=None, openapi_url=None)
    book = RunBook(settings.folders)
    viewer = Viewer(book, Work(settings.readers, settings.request_seconds))
    app.state.book = book
    app.state.work = viewer.work
    add_error_handlers(app)
    app.add_middleware(HostCheck)
    page = package_files.files("memory_lab").joinpath("data/viewer.html").read_text("utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/api/runs")
    async def runs() -> dict:
        found = await viewer.runs()
        return {"folders": settings.folders, "runs": [r.to_json() for r in found]}

    @app.get("/api/compare")
    async def compare(run: Runs = None) -> dict:
        return await viewer.compare(run or [])

    @app.get("/api/charts")
    async def charts(run: Runs = None) -> dict:
        return {"charts": await viewer.charts(run or [])}

    @app.get("/api/probe")
    async def probe(dialogue: str, probe: str, run: Runs = None) -> dict:
        return await viewer.probe(run or [], dialogue, probe)

    return app


def _with_cost_text(summary: Any, runs: list[Results]) -> Any:
    """The summary with ``est_cost_text``, its cost as the terminal and the report write it
    (``tables.cost_text``: ``local`` where every run's tokens are priced as a local model's)."""
    local = bool(runs) and all(priced_local(r.spec) for r in runs)
    if "est_cost_usd" not in summary:
        return summary
    texts = [cost_text(x, local=local).removeprefix("$") for x in summary["est_cost_usd"]]
    return summary.assign(est_cost_text=texts)


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
        "ranked_by": ranked_by(parts["ranked_by"]),
        "notes": list(dict.fromkeys(parts["stand_in"] + parts["notes"])),
        "style_note": parts["style_note"],
        "differences": [{"setting": s, "values": v} for s, v in parts["differences"]],
        "summary": _records(_with_cost_text(parts["summary"], runs)),
        "metrics": compared(),  # the summary's columns, as declared (scoring/metrics.py)
        "pairs": _records(parts["pairs"]),
        "probes": grid,
        "failed": _records(combined.failed_cells()),
    }


PROBE_FIELDS = [
    "reply",
    "correct",
    "context_hit",
    "evidence_recall",
    *FIELD_SCORES,
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
        "scores": [{"name": n, "label": metric(n).label} for n in FIELD_SCORES],  # as declared
        "memories": memories,
    }
