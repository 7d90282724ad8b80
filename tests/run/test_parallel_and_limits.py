"""--jobs gives the same records as one job; --context-limit caps prompts and says so."""

from __future__ import annotations

import json

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.log.records import without_timings
from memory_lab.results.read import RECORDS_FILE

from ..conftest import FIXTURES


def records_without_timings(folder):
    rows = [json.loads(x) for x in (folder / RECORDS_FILE).read_text().splitlines()]
    return [without_timings(r) for r in rows]


def test_two_jobs_write_the_same_records_as_one(tmp_path):
    memories = resolve_memories(["buffer", "window:k=1", "vector"])
    dialogues = load_dialogues(FIXTURES / "dialogues", "builtin:classic")[:3]
    one = run_benchmark(memories, dialogues, tmp_path / "one", progress=False)
    two = run_benchmark(memories, dialogues, tmp_path / "two", jobs=2, progress=False)
    assert one.failed_cells == two.failed_cells == 0
    assert records_without_timings(one.path) == records_without_timings(two.path)
    assert not (two.path / "parts").exists()


def test_context_limit_drops_the_oldest_context_and_records_truncation(tmp_path):
    dialogues = load_dialogues("builtin:classic")[:1]
    outcome = run_benchmark(
        resolve_memories(["buffer"]), dialogues, tmp_path / "r", context_limit=400, progress=False
    )
    results = read_results(outcome.path)
    turns = results.turns
    assert turns["prompt_tokens"].max() <= 400
    assert turns["truncated"].any() and not turns["truncated"].all()
    assert results.probes["truncated"].any()
    info = json.loads((outcome.path / "run.json").read_text())
    assert info["config"]["limits"]["context_limit"] == 400
    late = turns.sort_values("exchange").iloc[-1]
    first_line = dialogues[0].turns[0].text
    assert first_line not in late["prompt"]  # the oldest part went first


def test_every_memory_runs_with_concurrency_4_as_it_does_alone(tmp_path):
    import json

    from memory_lab import load_dialogues, resolve_memories, run_benchmark

    dialogues = sorted(load_dialogues("builtin:classic"), key=lambda d: len(d.turns))[:2]
    memories = resolve_memories(["all", "vector:k=2"])  # vector cells overlap in time

    def records(folder):
        rows = [json.loads(x) for x in (folder / "records.jsonl").read_text().splitlines()]
        return [without_timings(r) for r in rows]

    alone = run_benchmark(memories, dialogues, tmp_path / "alone", progress=False)
    four = run_benchmark(memories, dialogues, tmp_path / "four", concurrency=4, progress=False)
    assert alone.failed_cells == four.failed_cells == 0
    assert records(four.path) == records(alone.path)
