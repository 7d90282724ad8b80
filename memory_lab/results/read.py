"""Results folders: ``run.json`` + ``records.jsonl`` on disk, read back as tidy DataFrames.

Records are appended and flushed as they happen, so a run that fails keeps everything recorded
before the failure. ``read_results`` turns a folder into one row per event; the figures made
from them are in ``summary`` (per memory and category) and ``judge_metrics``.

A folder may come from anyone: its files are read only as regular files in it (a pipe is never
waited on, a device or a symbolic link never followed) and within the bounds of
``memory_lab.text.limits`` (``open_in_folder``), each refusal a ResultsError naming the file and
the limit.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from memory_lab import heap
from memory_lab.errors import BadInput
from memory_lab.log.formats import FormatError, is_header, migrate_record, stream_version
from memory_lab.log.prompt_store import DELTA_FIELD, PromptDecoder, without_prompt
from memory_lab.log.record_log import cell_key, ended_records
from memory_lab.log.records import RECORD_TYPES, record_problem
from memory_lab.log.run_spec import RUN_FILE, Pricing, RunSpec, read_run_file
from memory_lab.text.limits import (
    MAX_RECORD_LINE_BYTES,
    MAX_RECORDS_BYTES,
    MAX_RESTORED_CHARS,
    MAX_RUN_FILE_BYTES,
    InputError,
    open_regular,
)

RECORDS_FILE = "records.jsonl"
SUMMARY_FILE = "summary.csv"
CATEGORY_SUMMARY_FILE = "summary_by_category.csv"
PROMPT_READINGS = ("restored", "dropped", "stored", "checked")  # read_records(prompts=...)


@dataclass
class Results:
    """A results folder read back: run parameters and tidy frames.

    ``run`` is run.json as read (a dict, as notebooks use it); ``spec`` the same typed
    (``run_spec.RunSpec``), parsed once, when the results are made (from ``run`` unless given);
    None for a folder without run.json.
    """

    path: Path
    run: dict[str, Any]
    turns: pd.DataFrame
    probes: pd.DataFrame
    cells: pd.DataFrame
    usage: pd.DataFrame
    spec: RunSpec | None = None

    def __post_init__(self) -> None:
        if self.spec is None:
            self.spec = spec_of(Path(self.path), self.run)

    @property
    def pricing(self) -> Pricing:
        """The run's price table entries (empty without run.json)."""
        return self.spec.pricing if self.spec is not None else Pricing()

    def memory_order(self) -> list[str]:
        """The memories in run order (run.json's), then any others the records name, in the
        order they first appear: the one order of every table, chart and page."""
        order = list(self.spec.memories) if self.spec is not None else []
        for frame in (self.turns, self.probes):
            if "memory" in frame:
                order += [m for m in dict.fromkeys(frame["memory"]) if m not in order]
        return order

    def failed_cells(self) -> pd.DataFrame:
        """The cells that failed (their records before the failure are in the frames)."""
        cells = self.cells
        return cells[cells["status"] == "failed"] if "status" in cells else cells.iloc[:0]


def spec_of(folder: Path, run: dict[str, Any]) -> RunSpec | None:
    """run.json's content (``run``, as read from ``folder``) typed; None when there is none, a
    RunSpecError naming the file and field when it cannot be read."""
    return RunSpec.read(run, str(folder / RUN_FILE)) if run else None


class ResultsError(BadInput):
    """A results folder's file that cannot be read: not a regular file in the folder, over its
    limit, or a line that is no record; the message names the file, the line and the field."""


def open_in_folder(file: Path, limit: int, limit_name: str) -> IO[bytes]:
    """A results folder's file open for reading, when it is a regular file in the folder (no
    pipe, device or symbolic link: never waited on, never followed out of the folder) of at
    most ``limit`` bytes (``limit_name`` names it in the refusal); ResultsError naming it
    otherwise."""
    try:
        return open_regular(file, limit, limit_name, follow=False)
    except InputError as exc:
        raise ResultsError(f"{file}: {exc}") from None


def read_run_json(folder: Path) -> dict[str, Any]:
    """``run.json`` of a results folder as read (``run_spec.read_run_file``), {} without one;
    ResultsError when it is not a regular file in the folder or is over ``MAX_RUN_FILE_BYTES``."""
    run_file = folder / RUN_FILE
    if not os.path.lexists(run_file):
        return {}
    open_in_folder(run_file, MAX_RUN_FILE_BYTES, "MAX_RUN_FILE_BYTES").close()
    return read_run_file(run_file)


def _lines(fh: IO[bytes], file: Path, limit: int) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line, whether it ended with a newline) of records.jsonl, read one line at
    a time: at most ``limit`` bytes in all (the file may grow while it is read) and
    ``MAX_RECORD_LINE_BYTES`` a line."""
    total = 0
    for n in itertools.count(1):
        line = fh.readline(MAX_RECORD_LINE_BYTES + 1)
        if not line:
            return
        total += len(line)
        if len(line) > MAX_RECORD_LINE_BYTES:
            raise ResultsError(
                f"{file} line {n}: longer than {MAX_RECORD_LINE_BYTES:,} bytes "
                "(MAX_RECORD_LINE_BYTES)"
            )
        if total > limit:
            raise ResultsError(
                f"{file}: grew past the limit of {limit:,} bytes while being read "
                "(MAX_RECORDS_BYTES)"
            )
        yield n, line, line.endswith(b"\n")


def read_records(
    path: str | Path,
    *,
    prompts: str = "restored",
    max_bytes: int | None = None,
    copies: bool = False,
) -> list[dict[str, Any]]:
    """Every record of a results folder, prompts restored (``iter_records`` as a list)."""
    return list(iter_records(path, prompts=prompts, max_bytes=max_bytes, copies=copies))


def iter_records(
    path: str | Path,
    *,
    prompts: str = "restored",
    max_bytes: int | None = None,
    copies: bool = False,
) -> Iterator[dict[str, Any]]:
    """Every record of a results folder, prompts restored, one at a time: the one reader of
    records.jsonl (a reader that streams holds one record, not the file).

    A torn last line (a killed run) is skipped. A record of a cell after its closing record (a
    file holding records twice) is refused, naming both lines, unless ``copies`` (``run
    --resume``, which keeps each cell's first block and so repairs it). A line that is no record
    (``records.record_problem``), or whose prompt does not restore (``prompt_store``), is a
    ResultsError (a ValueError) naming the file, the line and the field. A turn or probe
    record's ``prompt`` is the prompt its cell computed, whether stored whole (runs from before
    deltas too) or as a delta (``prompt_store.PromptDecoder``). ``prompts``: ``"restored"``;
    ``"dropped"``, every prompt None (as with ``--no-prompts``: for readers that show none,
    which then hold no prompt text); ``"stored"``, the records exactly as written, deltas and
    all, for copying whole cells (``run --resume``; its deltas checked all the same), never for
    showing prompts; ``"checked"``, every delta restored to check it, then every prompt None
    (for readers that show no prompt text but must refuse a corrupt folder: the report).

    records.jsonl must be a regular file in the folder (``open_in_folder``) of at most
    ``max_bytes`` (``MAX_RECORDS_BYTES`` unless given), each line at most
    ``MAX_RECORD_LINE_BYTES``, and the prompts restored at most ``MAX_RESTORED_CHARS``
    characters together (``memory_lab.text.limits``).
    """
    if prompts not in PROMPT_READINGS:
        raise BadInput(f"prompts must be one of {', '.join(PROMPT_READINGS)}, got {prompts!r}")
    file = Path(path) / RECORDS_FILE
    if not os.path.lexists(file):
        raise FileNotFoundError(  # naming the folder: a bad input (exit 2), not a bug
            errno.ENOENT, f"no {RECORDS_FILE}; is this a memory-lab results folder?", str(path)
        )
    limit = MAX_RECORDS_BYTES if max_bytes is None else max_bytes
    with open_in_folder(file, limit, "MAX_RECORDS_BYTES") as fh:
        yield from _read_lines(_lines(fh, file, limit), file, prompts, copies)


def _shared(record: dict[str, Any], strings: dict[str, str]) -> dict[str, Any]:
    """``record`` with its strings (labels, ids, dates, a probe's question, which every memory
    asks) shared with the records before it: a million records hold each once, not a million
    times."""
    for key, value in record.items():
        if type(value) is str:
            record[key] = strings.setdefault(value, value)
    return record


def _read_lines(
    lines: Iterable[tuple[int, bytes, bool]], file: Path, prompts: str, copies: bool
) -> Iterator[dict[str, Any]]:
    decoder = PromptDecoder()
    strings: dict[str, str] = {}
    closed: dict[tuple[Any, Any], int] = {}  # each cell's closing record's line
    held = 0  # characters of the prompts restored so far
    version = None  # the stream's format: its header's, else 1 (log/formats.py)
    for n, line, ended in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:  # ValueError: JSON, an over-long int
            if not ended:  # cut short, maybe inside a character: the kill's last write
                break
            raise ResultsError(f"{file} line {n}: not valid JSON: {exc}") from None
        except RecursionError:  # JSON nested deeper than Python's parser recurses
            raise ResultsError(f"{file} line {n}: JSON nested too deeply to read") from None
        if is_header(record):
            if version is not None:
                raise ResultsError(f"{file} line {n}: a format header after the first record")
            try:
                version = stream_version(record, f"{file} line {n}")
            except FormatError as exc:
                raise ResultsError(str(exc)) from None
            continue
        version = version or 1
        problem = record_problem(record)
        if problem:
            raise ResultsError(f"{file} line {n}: {problem}")
        if not copies and cell_key(record) in closed:
            raise ResultsError(
                f"{file} line {n}: a record of cell {record['memory']} x {record['dialogue']}, "
                f"which closed at line {closed[cell_key(record)]}: records held twice; "
                "`memory-lab run --resume FOLDER` keeps each cell once"
            )
        if record["type"] == "cell":
            closed[cell_key(record)] = n
        record = migrate_record(_shared(record, strings), version)
        if prompts == "dropped":
            record = without_prompt(record)
        else:  # a delta that does not restore is refused even when kept as stored
            try:
                restored = decoder.restore(record)
            except ValueError as exc:
                raise ResultsError(f"{file} line {n}: {exc}") from None
            if prompts == "restored" and DELTA_FIELD in record:
                held += len(restored["prompt"])
                if held > MAX_RESTORED_CHARS:
                    raise ResultsError(
                        f"{file} line {n}: its prompts restored come to more than "
                        f"{MAX_RESTORED_CHARS:,} characters (MAX_RESTORED_CHARS); read it "
                        "without prompts (read_results(folder, prompts=False))"
                    )
            record = {"restored": restored, "checked": without_prompt(record)}.get(prompts, record)
        yield record


CHUNK_ROWS = 5_000  # records of a kind held as dicts at a time while frames are made


def _frames(records: Iterable[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """One frame per record kind (without the ``type`` column), made ``CHUNK_ROWS`` rows at a
    time, column by column: a million records are never all held as dicts, nor their columns
    twice. Each column has the dtype one frame of all the rows would give it (ints beside None:
    float; a field missing from a row: NaN)."""
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in RECORD_TYPES}
    columns: dict[str, _Columns] = {kind: _Columns() for kind in RECORD_TYPES}
    for record in records:
        kind = record["type"]
        rows[kind].append(record)
        if len(rows[kind]) >= CHUNK_ROWS:
            columns[kind].add(rows[kind])
            rows[kind] = []
    for kind, held in rows.items():
        columns[kind].add(held)
    return {kind: made.frame() for kind, made in columns.items()}


class _Columns:
    """A kind's columns, chunk by chunk: each chunk's values as one array per field."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[np.ndarray]] = {}
        self.rows = 0

    def add(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        names = dict.fromkeys(k for r in records for k in r if k != "type")
        for name in self.chunks.keys() - names.keys():  # a field no record of this chunk has
            self.chunks[name].append(np.full(len(records), np.nan, dtype=object))
        for name in names:
            values = pd.Series([r.get(name, np.nan) for r in records]).to_numpy()
            earlier = [] if name in self.chunks else [np.full(self.rows, np.nan, dtype=object)]
            self.chunks.setdefault(name, earlier).append(values)
        self.rows += len(records)

    def frame(self) -> pd.DataFrame:
        data = {}
        for name in list(self.chunks):
            pieces = self.chunks.pop(name)
            if len({p.dtype for p in pieces}) == 1:
                data[name] = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
            else:  # as one frame of every row would have it
                joined = np.concatenate([p.astype(object) for p in pieces])
                data[name] = pd.Series(joined).infer_objects().to_numpy()
            del pieces
        return pd.DataFrame(data, copy=False) if data else pd.DataFrame()


def read_results(path: str | Path, *, prompts: bool | str = True) -> Results:
    """Read a results folder into DataFrames: ``turns``, ``probes``, ``cells`` and ``usage``.

    Columns are the fields of the typed records (``memory_lab.log.records``), the same whether or
    not any cell failed, plus one ``param_<name>`` column per memory parameter beside the
    ``memory`` label (from ``run.json``). ``prompts=False``: every ``prompt`` None, not restored
    (``read_records``), for figures that need no prompt text (the summary at a run's end);
    ``prompts="checked"``: the same, with every prompt's delta checked (the report).
    """
    folder = Path(path)
    run = read_run_json(folder)
    spec = spec_of(folder, run)
    params = _memory_params(spec)
    reading = prompts if isinstance(prompts, str) else "restored" if prompts else "dropped"
    # a cell cut short: not shown; read as a stream, CHUNK_ROWS rows of a kind held at a time
    frames = _frames(ended_records(iter_records(folder, prompts=reading)))
    for kind, record_type in RECORD_TYPES.items():
        columns = record_type.columns()
        frame = frames[kind]
        extra = [c for c in frame.columns if c not in columns]  # fields of a newer version
        frame = frame.reindex(columns=columns + extra)
        for name in params:
            frame[f"param_{name}"] = (
                [params[name].get(m) for m in frame["memory"]]
                if len(frame)
                else pd.Series(dtype=object)
            )
        frames[kind] = frame
    heap.trim()  # the records read, dropped as their frames grew, go back to the system
    return Results(
        folder, run, frames["turn"], frames["probe"], frames["cell"], frames["usage"], spec
    )


def _memory_params(run: RunSpec | None) -> dict[str, dict[str, Any]]:
    """parameter name -> {memory label -> value} for every memory of the run."""
    out: dict[str, dict[str, Any]] = {}
    for spec in run.memory_specs if run is not None else ():
        for name, value in spec.params.items():
            shown = "+".join(map(str, value)) if isinstance(value, list) else value
            out.setdefault(name, {})[spec.label] = shown
    return out
