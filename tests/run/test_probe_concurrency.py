"""Probes after the same exchange answered concurrently: the records of asking one by one."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_lab import load_dialogues, resolve_memories, run_benchmark
from memory_lab.run.pool import in_threads

from ..fault_runs import records_of, write_dialogues
from ..models.openai_mock import OpenAIMock


@pytest.fixture
def mock(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-probes")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    with OpenAIMock(delay=0.05, echo=True) as server:
        yield server


def run(
    folder: Path, dialogues: str, base_url: str, concurrency: int, memories: list[str]
) -> list[dict]:
    run_benchmark(
        resolve_memories(memories),
        load_dialogues(dialogues),
        folder,
        llm="openai:gpt-4o-mini",
        base_url=base_url,
        cache=False,
        concurrency=concurrency,
        progress=False,
    )
    return records_of(folder)


def test_probes_answered_concurrently_give_the_records_of_asking_one_by_one(tmp_path, mock):
    dialogues = write_dialogues(tmp_path / "dialogues")
    memories = ["buffer", "window:k=1", "summary"]
    one_by_one = run(tmp_path / "one", dialogues, mock.base_url, 1, memories)
    assert mock.max_in_flight == 1
    at_once = run(tmp_path / "four", dialogues, mock.base_url, 4, memories)
    probes = [r for r in one_by_one if r["type"] == "probe"]
    assert len(probes) == 3 * 6
    # the echoing mock replies with each prompt's question: a reply given to the wrong probe
    # would show here, and in the records compared below
    assert all(r["reply"] == f"Human: {r['question']}" for r in probes)
    assert at_once == one_by_one


def test_the_probes_of_one_cell_overlap(tmp_path, mock):
    cafe = write_dialogues(tmp_path / "dialogues") + "/cafe.yaml"  # 3 probes after its end
    records = run(tmp_path / "run", cafe, mock.base_url, 8, ["buffer"])  # one cell
    assert mock.max_in_flight == 3
    assert [r["probe_id"] for r in records if r["type"] == "probe"] == [
        "q-beans",
        "q-opening",
        "q-cake",
        "q-rent",
    ]


def test_in_threads_yields_in_order_and_raises_an_error_in_its_turn():
    def job(thread: int, i: int) -> int:
        if i == 3:
            raise RuntimeError("probe 3 failed")
        return i * i

    results = in_threads(job, 6, 3)
    assert [next(results) for _ in range(3)] == [0, 1, 4]
    with pytest.raises(RuntimeError, match="probe 3 failed"):
        next(results)
