"""records.jsonl holds each cell once: parts committed whole, cut blocks dropped, parts adopted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.log.records import without_timings as drop_timings
from memory_lab.memories import (
    Item,
    MemoryResources,
    Query,
    Recall,
    register_memory,
    unregister_memory,
)
from memory_lab.results.read import RECORDS_FILE, ResultsError

from ..conftest import FIXTURES

SOURCES = [str(FIXTURES / "dialogues")]
MEMORIES = ["buffer", "window:k=1", "window:k=2"]


def lines(folder: Path) -> list[str]:
    return (folder / RECORDS_FILE).read_text("utf-8").splitlines(keepends=True)


def without_timings(folder: Path) -> list[dict]:
    return [drop_timings(json.loads(x)) for x in lines(folder)]


def blocks(folder: Path) -> list[list[str]]:
    """records.jsonl as one list of lines per cell (each closed by its cell record)."""
    out, current = [], []
    for line in lines(folder):
        current.append(line)
        if '"type": "cell"' in line:
            out.append(current)
            current = []
    return out


@pytest.fixture(scope="module")
def complete_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("record-log") / "complete"
    outcome = run_benchmark(
        resolve_memories(MEMORIES), load_dialogues(*SOURCES), out, sources=SOURCES, progress=False
    )
    assert outcome.failed_cells == 0
    return out


def copy_run(complete: Path, to: Path, records: list[str]) -> Path:
    to.mkdir()
    (to / "run.json").write_text((complete / "run.json").read_text())
    (to / RECORDS_FILE).write_text("".join(records))
    return to


class Peeking:
    """A memory that fails its cell if records.jsonl shows any of its cell's records."""

    def __init__(self, res: MemoryResources):
        self.records = Path(res.cell_dir).parent.parent / RECORDS_FILE

    def observe(self, exchange) -> None:
        text = self.records.read_text("utf-8") if self.records.exists() else ""
        if '"memory": "peeking"' in text:
            raise AssertionError("records of a running cell are visible in records.jsonl")

    def end_session(self, session) -> None: ...

    def recall(self, query: Query) -> Recall:
        return Recall((Item("nothing"),))

    def snapshot(self) -> dict:
        return {}

    def close(self) -> None: ...


@pytest.fixture
def peeking():
    @register_memory("peeking", "fails if its own records are visible while it runs")
    def peeking(res: MemoryResources) -> Peeking:
        return Peeking(res)

    yield "peeking"
    unregister_memory("peeking")


@pytest.mark.parametrize("executor", [{}, {"concurrency": 2}])
def test_a_cells_records_become_visible_only_when_it_has_ended(peeking, tmp_path, executor):
    outcome = run_benchmark(
        resolve_memories(["buffer", peeking]),
        load_dialogues(*SOURCES),
        tmp_path / "run",
        progress=False,
        **executor,
    )
    assert outcome.failed_cells == 0
    assert read_results(outcome.path).cells["memory"].tolist() == ["buffer", "peeking"]


def test_resume_keeps_each_cell_once_dropping_copies_and_a_block_cut_short(complete_run, tmp_path):
    first, second, third = blocks(complete_run)
    # an old run's duplicated cell, then a kill while appending the third: a torn last line
    broken = first + second + second + third[:3] + [third[3][:40]]
    out = copy_run(complete_run, tmp_path / "broken", broken)
    # a reader refuses the copy, naming both lines and the repair
    closed, copy = len(first) + len(second), len(first) + len(second) + 1
    with pytest.raises(ResultsError, match=f"line {copy}: .*which closed at line {closed}:"):
        read_results(out)
    with pytest.raises(ResultsError, match="run --resume"):
        read_results(out)
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert without_timings(out) == without_timings(complete_run)
    info = json.loads((out / "run.json").read_text())
    assert info["resumed"][-1]["cells_kept"] == 2 and info["resumed"][-1]["cells_redone"] == 1


def test_resume_adopts_a_complete_part_and_deletes_every_other_part(complete_run, tmp_path):
    first, second, third = blocks(complete_run)
    out = copy_run(complete_run, tmp_path / "parts", first)
    parts = out / "parts"
    parts.mkdir()
    marked = json.loads(second[-1])
    marked["seconds"] = 1234.5  # tells the adopted cell record from a recomputed one
    (parts / "cell-00001.jsonl").write_text("".join(second[:-1]) + json.dumps(marked) + "\n")
    (parts / "cell-00002.jsonl").write_text("".join(second))  # another cell's records
    (parts / "cell-00002.1a2b.partial").write_text("".join(third[:2]))  # a cell cut short
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert without_timings(out) == without_timings(complete_run)
    assert json.loads(blocks(out)[1][-1])["seconds"] == 1234.5
    info = json.loads((out / "run.json").read_text())
    assert info["resumed"][-1]["cells_adopted"] == 1 and info["resumed"][-1]["cells_redone"] == 1
    assert not parts.exists()


def test_a_complete_part_of_a_cell_already_in_the_records_is_not_appended_again(
    complete_run, tmp_path
):
    first, second, third = blocks(complete_run)
    out = copy_run(complete_run, tmp_path / "committed", first + second)
    (out / "parts").mkdir()
    # killed after appending cell 1 but before deleting its part
    (out / "parts" / "cell-00001.jsonl").write_text("".join(second))
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert without_timings(out) == without_timings(complete_run)


@pytest.mark.parametrize("bad", ["[]", "null", '{"type": "turn"}', '{"type": "cell", "memory": 1}'])
def test_a_complete_part_with_a_line_that_is_no_record_is_redone_not_adopted(
    complete_run, tmp_path, bad
):
    first, second, third = blocks(complete_run)
    out = copy_run(complete_run, tmp_path / "bad-part", first)
    (out / "parts").mkdir()
    (out / "parts" / "cell-00001.jsonl").write_text("".join(second[:1]) + bad + "\n" + second[-1])
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert without_timings(out) == without_timings(complete_run)
    info = json.loads((out / "run.json").read_text())
    assert info["resumed"][-1]["cells_adopted"] == 0 and info["resumed"][-1]["cells_redone"] == 2


def test_a_part_that_cannot_be_written_names_its_file(tmp_path, monkeypatch):
    import errno
    import os

    from memory_lab.log.record_log import PartWriter

    writer = PartWriter(tmp_path, 0, "a1")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    writer.write({"type": "cell"})
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as caught:
        writer.finish()
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(writer.path)
