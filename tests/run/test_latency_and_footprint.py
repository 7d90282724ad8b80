"""Latency split per record (memory read, save, answer) and the footprint in records and the
summary. Timings are not deterministic: only their sanity is asserted."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.models.tokens import count_tokens
from memory_lab.results.read import RECORDS_FILE
from memory_lab.results.summary import LATENCY_COLUMNS, percentiles, summarize
from memory_lab.run.exchanges import exchanges, session_ends
from memory_lab.views.tables import format_summary

from ..conftest import FIXTURES

MEMORIES = ["buffer", "window:k=1", "summary", "vector"]
EPS = 1e-6  # perf_counter differences: the parts are measured inside the whole


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    dialogues = load_dialogues(
        FIXTURES / "dialogues" / "mini.yaml", FIXTURES / "memories" / "moving-nurse.yaml"
    )
    folder = tmp_path_factory.mktemp("latency") / "run"
    outcome = run_benchmark(resolve_memories(MEMORIES), dialogues, folder, progress=False)
    assert outcome.failed_cells == 0
    return read_results(outcome.path), {d.id: d for d in dialogues}


def test_turn_records_split_reading_and_saving(run):
    results, _ = run
    t = results.turns
    assert (t["recall_seconds"] >= 0).all() and (t["save_seconds"] >= 0).all()
    assert (t["recall_seconds"] + t["save_seconds"] <= t["seconds"] + EPS).all()
    assert (t[t["prompt_tokens"] > 0]["recall_seconds"] > 0).all()  # a user turn reads memory
    assert (t["save_seconds"] > 0).all()


def test_probe_records_split_search_and_answer(run):
    results, _ = run
    p = results.probes
    assert len(p) and (p["recall_seconds"] > 0).all() and (p["answer_seconds"] > 0).all()
    assert (p["recall_seconds"] + p["answer_seconds"] <= p["seconds"] + EPS).all()


def test_footprint_is_recorded_at_every_session_end_and_the_dialogues_end(run):
    results, dialogues = run
    turns, cells = results.turns, results.cells
    for (memory, dialogue_id), group in turns.groupby(["memory", "dialogue"]):
        dialogue = dialogues[dialogue_id]
        ends = session_ends(dialogue, exchanges(dialogue))
        group = group.sort_values("exchange")
        at_end = [e is not None for e in ends]
        assert group["memory_tokens_held"].notna().tolist() == at_end, (memory, dialogue_id)
        cell = cells[(cells["memory"] == memory) & (cells["dialogue"] == dialogue_id)]
        assert cell["memory_tokens_held"].item() == group["memory_tokens_held"].iloc[-1] > 0
        if memory == "buffer":  # every turn, as it was said (dated), and nothing else
            said = [t for ex in exchanges(dialogue) for t in (ex.dated_user(), ex.assistant) if t]
            assert cell["memory_tokens_held"].item() == sum(count_tokens(t) for t in said)


def test_footprint_grows_for_buffer_and_stays_below_it_for_window(run):
    results, _ = run
    held = results.cells.set_index(["memory", "dialogue"])["memory_tokens_held"]
    for dialogue in results.cells["dialogue"].unique():
        assert held[("window:k=1", dialogue)] < held[("buffer", dialogue)]
    nurse = results.turns[
        (results.turns["memory"] == "buffer") & (results.turns["dialogue"] == "moving-nurse")
    ]
    sessions = nurse["memory_tokens_held"].dropna().tolist()
    assert len(sessions) == 2 and sessions[0] < sessions[1]


def test_summary_has_latency_percentiles_tokens_per_query_and_footprint(run):
    results, _ = run
    summary = summarize(results).set_index("memory")
    for memory in MEMORIES:
        row = summary.loc[memory]
        p = results.probes[results.probes["memory"] == memory]
        search = p["recall_seconds"]
        total = p["recall_seconds"] + p["answer_seconds"]
        assert row["search_seconds_p50"] == pytest.approx(search.quantile(0.5))
        assert row["search_seconds_p95"] == pytest.approx(search.quantile(0.95))
        assert row["total_seconds_p95"] == pytest.approx(total.quantile(0.95))
        assert 0 < row["search_seconds_p50"] <= row["search_seconds_p95"]
        assert row["search_seconds_p50"] < row["total_seconds_p50"] <= row["total_seconds_p95"]
        assert row["tokens_per_query"] == pytest.approx(p["prompt_tokens"].mean())
        cells = results.cells[results.cells["memory"] == memory]
        assert row["memory_tokens_held"] == pytest.approx(cells["memory_tokens_held"].mean())
    assert (
        summary.loc["window:k=1", "memory_tokens_held"]
        < summary.loc["buffer", "memory_tokens_held"]
    )
    assert summary.loc["window:k=1", "tokens_per_query"] < summary.loc["buffer", "tokens_per_query"]
    table = format_summary(summary.reset_index(), results.run)
    assert "search p50 ms" in table and "tokens held" in table and "numpy" in table
    line = next(x for x in table.splitlines()[::-1] if x.startswith("buffer "))
    assert f"{summary.loc['buffer', 'memory_tokens_held']:,.0f}" in line


def test_percentiles_interpolate_linearly_between_ranks():
    assert percentiles(pd.Series([4.0, 1.0, 3.0, 2.0])) == pytest.approx([2.5, 3.85])
    assert percentiles(pd.Series([7.0])) == [7.0, 7.0]
    assert all(math.isnan(x) for x in percentiles(pd.Series([None, None])))


def test_a_run_recorded_before_these_fields_summarises_with_blanks(run, tmp_path):
    results, _ = run
    old = tmp_path / "old"
    old.mkdir()
    new_fields = {"recall_seconds", "save_seconds", "answer_seconds", "memory_tokens_held"}
    with open(results.path / RECORDS_FILE, encoding="utf-8") as src:
        rows = [{k: v for k, v in json.loads(x).items() if k not in new_fields} for x in src]
    (old / RECORDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    (old / "run.json").write_text((results.path / "run.json").read_text("utf-8"), "utf-8")
    summary = summarize(read_results(old))
    assert summary[LATENCY_COLUMNS[:4] + ["memory_tokens_held"]].isna().all().all()
    assert summary["tokens_per_query"].notna().all()
    table = format_summary(summary)
    assert "buffer" in table.split("search p50 ms")[1]  # the block is there, blanks shown as -
