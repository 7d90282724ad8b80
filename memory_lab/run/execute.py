"""Executing a run: every (memory, dialogue) cell into one results folder, then the summary.

``execute`` runs a new run's spec (``prepare.prepare_run``) or a resume's
(``RunSpec.load(folder).resumed(...)``): it holds the folder's lock, keeps the cells a resumed
run had ended, runs the rest through the chosen executor with a progress bar, writes run.json's
status as it goes and the summary tables at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from memory_lab.dialogue.model import Dialogue
from memory_lab.log.formats import stream_header
from memory_lab.log.record_log import (
    PARTS_DIR,
    RecordLog,
    cell_key,
    commit_in_order,
    dump_record,
    ended_cells,
    naming_file,
    prepare_parts,
)
from memory_lab.log.run_guard import hold_folder
from memory_lab.log.run_spec import (
    RunSpec,
)
from memory_lab.log.safe_files import open_new, private_folder
from memory_lab.memories.registry import (
    MemorySpec,
)
from memory_lab.models.providers import client_settings
from memory_lab.models.rate_limit import COUNTS, FileBucket
from memory_lab.results.read import (
    CATEGORY_SUMMARY_FILE,
    RECORDS_FILE,
    SUMMARY_FILE,
    read_records,
    read_results,
)
from memory_lab.results.summary import summarize, summarize_by_category
from memory_lab.run.cell import cell_id_for
from memory_lab.run.context import RunModels
from memory_lab.run.executors import CellOutcome, CellTask, choose_executor
from memory_lab.run.prepare import prepare_out_dir
from memory_lab.run.progress import RunProgress
from memory_lab.text.redact import remember_resources

CELLS_DIR = "cells"  # memories' files: a folder per execution of a cell (``run/cell.py``)
_DRAWN = re.compile(r"(.+)[0-9a-f]{12}")  # ``cell_id_for``: 12 hex digits drawn per execution


@dataclass
class RunOutcome:
    path: Path
    summary: pd.DataFrame
    failed_cells: int
    rate_limits: dict[str, Any] | None = None  # run.json's: what --rpm/--tpm did


def grid(memories: list[MemorySpec], dialogues: list[Dialogue]) -> list[CellTask]:
    """Every (memory, dialogue) cell of a run, indexed in the same order on every resume."""
    cells = [(m, d) for m in memories for d in dialogues]
    return [CellTask(i, m, d) for i, (m, d) in enumerate(cells)]


def execute(
    spec: RunSpec, *, progress: bool = True, locked: bool = False, overwrite: bool = False
) -> RunOutcome:
    """Run a prepared (``prepare_run``) or resumed (``RunSpec.resumed``) spec in its folder.

    The folder is held (``run_guard.hold_folder``; ``locked``: the caller holds it) from
    before its first write to its last. A new run refuses a folder that holds a run; a resumed
    one keeps the cells that ended ok and redoes the rest; ``overwrite``: a new run empties a
    folder that holds a run (``prepare_out_dir``).
    """
    folder = Path(spec.folder)
    remember_resources(spec.resource_values, spec.run_config.base_url)
    with client_settings(spec.client):  # every provider client of this process and its threads
        models = RunModels.for_spec(spec)
        if locked:
            return _start(spec, folder, models, progress, overwrite)
        private_folder(folder)  # 0700 where it is made
        with hold_folder(folder):
            return _start(spec, folder, models, progress, overwrite)


def _start(
    spec: RunSpec, folder: Path, models: RunModels, progress: bool, overwrite: bool = False
) -> RunOutcome:
    if spec.resuming:
        spec, cells = _keep_ended_cells(spec, folder)
    else:
        prepare_out_dir(folder, overwrite)
        spec.save(folder)
        cells = grid(list(spec.memory_specs), list(spec.dialogue_set))
    return _execute(folder, spec, cells, models, progress)


def _keep_ended_cells(spec: RunSpec, folder: Path) -> tuple[RunSpec, list[CellTask]]:
    """Each cell's first block closed by an ok cell record is kept; a block cut short by a
    kill, a failed cell and any second copy are dropped (``log/record_log.py``). Returns the spec
    with this resume noted and the cells still to run."""
    # copied as stored: a kept block is whole, so its prompt deltas decode as before
    records = (
        read_records(folder, prompts="stored", copies=True)
        if (folder / RECORDS_FILE).exists()
        else []
    )
    keep = ended_cells(records, statuses=("ok",))
    done = {cell_key(r) for r in keep if r["type"] == "cell"}
    tmp = folder / (RECORDS_FILE + ".tmp")
    with naming_file(tmp):
        try:
            with open_new(tmp) as fh:  # never through a link (log/safe_files.py)
                fh.write(dump_record(stream_header()))  # kept records read in this format
                fh.writelines(dump_record(r) for r in keep)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            tmp.unlink(missing_ok=True)  # records.jsonl is as it was
            raise
    tmp.replace(folder / RECORDS_FILE)
    memories, dialogues = list(spec.memory_specs), list(spec.dialogue_set)
    cells = [c for c in grid(memories, dialogues) if (c.spec.label, c.dialogue.id) not in done]
    entry = {"at": datetime.now(UTC).isoformat(), "cells_kept": len(done)}
    spec = spec.replace(resume_history=(*spec.resume_history, entry), errors=())
    return spec.without("errors"), cells


def _folder_stem(task: CellTask) -> str:
    """The name of each folder of ``task``'s executions under cells/, less the id drawn for it."""
    drawn = _DRAWN.fullmatch(cell_id_for(task.spec, task.dialogue))
    assert drawn is not None
    return drawn.group(1)


def _remove_leftovers(folder: Path, to_run: list[CellTask], every: list[CellTask]) -> None:
    """Before a resume redoes ``to_run``, remove the folders their interrupted executions left
    under cells/ (a killed ``hindsight`` cell leaves its PostgreSQL: 100 MB and more).

    A folder is named for its cell's memory and dialogue and an id drawn per execution, so the
    folders of a cell that ended and of a redone cell with the same memory name and dialogue
    (``hindsight`` beside ``hindsight:keep=true``) cannot be told apart: those are all kept."""
    root = folder / CELLS_DIR
    if not to_run or not root.is_dir():
        return
    redone = {t.index for t in to_run}
    ended = {_folder_stem(c) for c in every if c.index not in redone}
    stems = {_folder_stem(t) for t in to_run} - ended
    for path in root.iterdir():
        drawn = _DRAWN.fullmatch(path.name)
        if drawn is not None and drawn.group(1) in stems and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def _execute(
    folder: Path, spec: RunSpec, cells: list[CellTask], models: RunModels, progress: bool
) -> RunOutcome:
    """Run ``cells``, appending their records; run.json says how the run ended."""
    state = _RunState(spec)
    limits = spec.rate_limits_setting
    if limits is not None:
        FileBucket(limits.file).reset()  # this execution's counts
    try:
        failed = _run_cells(folder, state, cells, models, progress)
    except BaseException as exc:  # an interrupt (Ctrl-C, SIGTERM) or an error (a full disk)
        state.end("interrupted", 0, stopped_by=exc)  # leaves the run resumable
        raise
    if limits is not None:
        state.spec = state.spec.replace(rate_limits=_rate_limit_counts(spec, limits.file))
    state.end("failed" if failed else "complete", failed)
    results = read_results(folder, prompts=False)  # the summary needs no prompt text
    summary = summarize(results)
    tables = {SUMMARY_FILE: summary, CATEGORY_SUMMARY_FILE: summarize_by_category(results)}
    for name, table in tables.items():
        with naming_file(folder / name), open_new(folder / name) as fh:  # never through a link
            table.to_csv(fh, index=False)
    return RunOutcome(folder, summary, failed, state.spec.rate_limits)


def _rate_limit_counts(spec: RunSpec, file: str) -> dict[str, Any]:
    """run.json's ``rate_limits``: the limits and what keeping them took (requests sent, 429s
    answered, seconds waited for the bucket and paused by 429s), from the run's bucket."""
    counts = FileBucket(file).stats()
    config = spec.run_config
    out: dict[str, Any] = {"rpm": config.rpm, "tpm": config.tpm}
    for key in COUNTS:
        value = counts.get(key, 0)
        out[key] = round(value, 1) if key.endswith("seconds") else int(value)
    return out


class _RunState:
    """The spec of the run as it goes: each change is written to run.json at once."""

    def __init__(self, spec: RunSpec):
        self.spec = spec

    def update(self, **changes: Any) -> None:
        self.spec = self.spec.replace(**changes)
        self.spec.save()

    def end(self, status: str, failed: int, stopped_by: BaseException | None = None) -> None:
        """run.json says how the run ended. When ``stopped_by`` (what stopped the run) is
        raised on and run.json cannot be written either (a full disk), the error that stopped
        the run stays the one raised, with a note saying so."""
        try:
            self.update(finished=datetime.now(UTC).isoformat(), status=status, failed_cells=failed)
        except OSError as exc:
            if stopped_by is None:
                raise
            stopped_by.add_note(
                f"{self.spec.run_file} could not be updated either: {exc.strerror or exc}; "
                f"its status was not set to {status!r}"
            )


def _run_cells(
    folder: Path, state: _RunState, cells: list[CellTask], models: RunModels, progress: bool
) -> int:
    """Adopt complete parts left by an interrupted run, run the other cells and append every
    cell's records in cell order (``log/record_log.py``). Returns the number of failed cells."""
    parts_dir = folder / PARTS_DIR
    adopted = prepare_parts(parts_dir, {c.index: (c.spec.label, c.dialogue.id) for c in cells})
    to_run = [c for c in cells if c.index not in adopted]
    spec = state.spec
    if spec.resuming:
        _remove_leftovers(folder, to_run, grid(list(spec.memory_specs), list(spec.dialogue_set)))
        history = spec.resume_history
        entry = {**history[-1], "cells_adopted": len(adopted), "cells_redone": len(to_run)}
        spec = spec.replace(resume_history=(*history[:-1], entry))
        if progress:
            print(
                f"resuming {folder}: {entry['cells_kept']} cell(s) kept, "
                f"{len(adopted)} adopted from parts, {len(to_run)} to run",
                file=sys.stderr,
            )
    executor = choose_executor(spec, models, len(to_run), parts_dir, uuid.uuid4().hex[:12])
    state.spec = spec
    state.update(status="running")
    failed = 0
    progress_bar = RunProgress(
        ((c.index, c.dialogue) for c in cells), executor.description, progress
    )
    for index in adopted:
        progress_bar.cell_done(index)
    if to_run:
        progress_bar.start()
    on_exchange = progress_bar.exchange

    ready = {i: CellOutcome(i, record, None) for i, record in adopted.items()}
    log = RecordLog(folder / RECORDS_FILE)
    try:
        with closing(executor.run(to_run, on_exchange)) as outcomes:
            order = [c.index for c in cells]
            for outcome in commit_in_order(outcomes, order, ready, parts_dir, log):
                progress_bar.cell_done(outcome.index)  # all of it, for executors of whole cells
                record = outcome.record
                if record["status"] != "ok":
                    failed += 1
                    progress_bar.write(
                        f"cell {record['memory']} × {record['dialogue']} failed: {record['error']}"
                    )
                    error = {
                        "memory": record["memory"],
                        "dialogue": record["dialogue"],
                        "traceback": outcome.traceback,
                    }
                    state.spec = state.spec.replace(errors=(*state.spec.errors, error))
    finally:
        progress_bar.close()
        log.close()
    shutil.rmtree(parts_dir, ignore_errors=True)  # complete: every part was appended
    return failed
