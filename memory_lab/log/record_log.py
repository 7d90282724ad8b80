"""``records.jsonl`` holds every cell exactly once, whatever runs the cells and wherever it dies.

The protocol, the same for one process, threads, worker processes or any future executor
(``run/executors/`` runs cells; this module owns the files):

1. A cell writes its records, as they happen, to its own part file
   ``parts/cell-<index>.<attempt>.partial``. ``index`` is the cell's place in the run's grid
   (memories x dialogues, the same on every resume); ``attempt`` is unique to one execution, so
   a stray worker of a killed run can never write into a part of the live one.
2. When the cell has ended (its closing ``cell`` record written) the part is synced and renamed
   to ``parts/cell-<index>.jsonl``: a complete part only ever exists whole.
3. The driver, and only the driver, appends complete parts to ``records.jsonl`` in cell order,
   syncs, then deletes the part (a new records.jsonl begins with its format's header record,
   ``log/formats.py``). Each cell is thus one contiguous block closed by its ``cell``
   record, and a cell's records become visible only once it has ended.
4. On resume ``records.jsonl`` is read as blocks: the first block of each cell closed by an
   ``ok`` cell record is kept; a block cut short (a kill while appending), a failed cell and any
   second copy are dropped. A complete part of a cell not kept is adopted (appended in cell
   order like a fresh one); every other part is deleted. Then the remaining cells run.

A kill at any moment leaves each cell either whole in records.jsonl, or whole in a part to
adopt, or nothing of it that outlives the next resume: never twice, never lost.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memory_lab.log.faults import fault_point
from memory_lab.log.formats import stream_header
from memory_lab.log.records import record_problem
from memory_lab.log.safe_files import check_folder, open_fd, open_new
from memory_lab.text.limits import MAX_RECORDS_BYTES, open_regular

PARTS_DIR = "parts"
APPEND_CHUNK = 4096  # bytes per write when a part is appended to records.jsonl
CellKey = tuple[str, str]  # (memory label, dialogue id): unique within a run
_COMPLETE = re.compile(r"cell-(\d+)\.jsonl")


@contextmanager
def naming_file(path: str | Path) -> Iterator[None]:
    """An OSError in the block that names no file (a failed write or sync: a full disk, an I/O
    error) is raised again naming ``path``, so its one line says which file."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def cell_key(record: dict[str, Any]) -> CellKey:
    return (record["memory"], record["dialogue"])


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dump_record(record: dict[str, Any]) -> str:
    """One record as its line in records.jsonl (the same bytes wherever it is written). A lone
    surrogate (half a UTF-16 pair: a provider's reply can carry one as JSON ``\\ud800``) is no
    text UTF-8 can hold: it is written as U+FFFD, the replacement character."""
    line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = _LONE_SURROGATE.sub("\ufffd", line)
    return line


def complete_part(parts_dir: Path, index: int) -> Path:
    return parts_dir / f"cell-{index:05d}.jsonl"


def _sync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartWriter:
    """One cell's records, written to its own part file, completed by ``finish``."""

    def __init__(self, parts_dir: Path, index: int, attempt: str):
        self.parts_dir = parts_dir
        self.final = complete_part(parts_dir, index)
        self.path = parts_dir / f"cell-{index:05d}.{attempt}.partial"
        self._fh = open_new(self.path)  # never through a link; closed in finish

    def write(self, record: dict[str, Any]) -> None:
        with naming_file(self.path):
            self._fh.write(dump_record(record))
        fault_point("record")

    def finish(self) -> Path:
        """Sync the part and rename it complete (atomic: readers see all of it or none)."""
        with naming_file(self.path):
            self._fh.flush()
            os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self.path, self.final)
        _sync_dir(self.parts_dir)
        fault_point("part")
        return self.final

    def discard(self) -> None:
        """The cell did not end (the run is stopping): its part is worth nothing."""
        self._fh.close()
        self.path.unlink(missing_ok=True)


class RecordLog:
    """The driver's handle on ``records.jsonl``: complete parts are appended whole, in order."""

    def __init__(self, path: Path):
        self.path = path
        self._fd = open_fd(path, os.O_APPEND)  # never through a link (log/safe_files.py)
        if os.fstat(self._fd).st_size == 0:  # a new stream begins with its format's header
            with naming_file(path):
                os.write(self._fd, dump_record(stream_header()).encode())

    def append_part(self, part: Path) -> None:
        """Append a complete part, sync it, then delete the part.

        Written in chunks of ``APPEND_CHUNK`` bytes: a kill midway leaves the cell's block cut
        short, perhaps in the middle of a line, which a resume drops (``ended_cells``). A write
        that fails (a full disk: an OSError naming records.jsonl) leaves the same, and the
        part, for a resume to adopt.
        """
        with open(part, "rb") as src:
            while chunk := src.read(APPEND_CHUNK):
                while chunk:
                    with naming_file(self.path):
                        chunk = chunk[os.write(self._fd, chunk) :]
                fault_point("append")
        with naming_file(self.path):
            os.fsync(self._fd)
        fault_point("commit")
        part.unlink()

    def close(self) -> None:
        os.close(self._fd)


def cell_blocks(
    records: Iterable[dict[str, Any]],
) -> Iterator[tuple[CellKey, list[dict[str, Any]], dict[str, Any] | None]]:
    """Records as cell blocks: ``(key, records, closing cell record or None if cut short)``."""
    key: CellKey | None = None
    block: list[dict[str, Any]] = []
    for record in records:
        if key is not None and cell_key(record) != key:
            yield key, block, None  # another cell began before this one was closed
            block = []
        key = cell_key(record)
        block.append(record)
        if record["type"] == "cell":
            yield key, block, record
            key, block = None, []
    if key is not None:
        yield key, block, None


def ended_cells(
    records: Iterable[dict[str, Any]], statuses: tuple[str, ...] = ("ok", "failed")
) -> list[dict[str, Any]]:
    """The records of the first block of each cell closed with one of ``statuses``."""
    return list(ended_records(records, statuses))


def ended_records(
    records: Iterable[dict[str, Any]], statuses: tuple[str, ...] = ("ok", "failed")
) -> Iterator[dict[str, Any]]:
    """``ended_cells`` one record at a time: a reader that streams holds one cell's block."""
    seen: set[CellKey] = set()
    for key, block, closing in cell_blocks(records):
        if closing is not None and closing["status"] in statuses and key not in seen:
            seen.add(key)
            yield from block


def read_part(path: Path, key: CellKey) -> dict[str, Any] | None:
    """The closing record of a complete part of cell ``key`` that ended ok, else None (a part
    with a line that is no record, ``records.record_problem``, too; one that is no regular file
    or is larger than ``MAX_RECORDS_BYTES``, never waited on nor read)."""
    try:
        with open_regular(path, MAX_RECORDS_BYTES, follow=False) as fh:
            data = fh.read(MAX_RECORDS_BYTES + 1)  # a part that grew since it was looked at
        if len(data) > MAX_RECORDS_BYTES:
            return None
        records = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    except (OSError, UnicodeDecodeError, ValueError):  # ValueError: JSON, an over-long int
        return None
    if any(record_problem(r) for r in records):
        return None
    if not records or any(cell_key(r) != key for r in records):
        return None
    closing = records[-1]
    if closing["type"] != "cell" or closing["status"] != "ok":
        return None
    if sum(r["type"] == "cell" for r in records) != 1:
        return None
    return closing


def prepare_parts(parts_dir: Path, wanted: dict[int, CellKey]) -> dict[int, dict[str, Any]]:
    """Adopt the complete parts of ``wanted`` cells (index -> key); delete every other part.

    Returns the closing cell record of each adopted part by cell index.
    """
    check_folder(parts_dir)  # made if need be; a link there is refused
    adopted = {}
    for path in sorted(parts_dir.iterdir()):
        match = _COMPLETE.fullmatch(path.name)
        index = int(match.group(1)) if match else None
        if index in wanted:
            closing = read_part(path, wanted[index])
            if closing is not None:
                adopted[index] = closing
                continue
        if path.is_dir():
            continue
        path.unlink(missing_ok=True)
    return adopted


class HasIndex(Protocol):
    index: int


Outcome = TypeVar("Outcome", bound=HasIndex)


def commit_in_order(
    outcomes: Iterable[Outcome],
    order: list[int],
    ready: dict[int, Outcome],
    parts_dir: Path,
    log: RecordLog,
) -> Iterator[Outcome]:
    """Append each cell's complete part to the log in ``order`` as cells end in any order.

    ``ready`` holds outcomes already complete (adopted parts); ``outcomes`` yields the rest.
    """
    pending = dict(ready)
    position = 0

    def flush() -> Iterator[Outcome]:
        nonlocal position
        while position < len(order) and order[position] in pending:
            outcome = pending.pop(order[position])
            log.append_part(complete_part(parts_dir, outcome.index))
            position += 1
            yield outcome

    yield from flush()
    for outcome in outcomes:
        pending[outcome.index] = outcome
        yield from flush()
