"""A sweep's figures per memory over a real small run, the rule that picks the answer, and
the tables that write them."""

from __future__ import annotations

import math

import pytest

from memory_lab.sweep import figures
from memory_lab.sweep.report import memory_table, table

from ..small_run import SMALL_MEMORIES, small_run  # noqa: F401 - a fixture


def test_rows_of_a_small_run(small_run):  # noqa: F811 - the fixture
    rows = {r["memory"]: r for r in figures.run_rows(small_run.path, spread=True)}
    assert list(rows) == small_run.memory_order()
    assert set(SMALL_MEMORIES) <= set(rows)
    assert all(r["cells"] == "2/2" for r in rows.values())  # two dialogues each
    assert rows["buffer"]["evidence_recall"] == pytest.approx(1.0)
    assert rows["buffer"]["maintenance_tokens_per_exchange"] == 0
    assert rows["summary"]["maintenance_tokens_per_exchange"] > 0
    assert rows["buffer"]["maintenance_usd_per_1k"] == 0
    assert rows["summary"]["maintenance_usd_per_1k"] > 0
    turns = small_run.turns
    for memory, r in rows.items():
        mine = turns[turns["memory"] == memory]
        assert r["exchanges"] == len(mine)
        assert r["prompt_tokens_per_exchange"] == pytest.approx(
            mine["prompt_tokens"].sum() / len(mine)
        )
        assert r["recall_low"] - 1e-9 <= r["evidence_recall"] <= r["recall_high"] + 1e-9
    text = memory_table(list(rows.values()), markdown=True, spread=True)
    assert "| memory | cells ok | evid-recall | lowest-highest dialogue |" in text
    assert "| buffer | 2/2 | 100.0% | 100.0%-100.0% |" in text


def test_a_per_dialogue_narrowing_adds_up(small_run):  # noqa: F811 - the fixture
    dialogues = list(dict.fromkeys(small_run.turns["dialogue"]))
    whole = {r["memory"]: r for r in figures.rows_of(small_run)}
    parts = [
        {r["memory"]: r for r in figures.rows_of(figures.by_dialogue(small_run, d))}
        for d in dialogues
    ]
    for memory, row in whole.items():
        tokens = sum(
            p[memory]["prompt_tokens_per_exchange"] * p[memory]["exchanges"] for p in parts
        )
        assert tokens == pytest.approx(row["prompt_tokens_per_exchange"] * row["exchanges"])
    assert figures.recall_range(figures.by_dialogue(small_run, dialogues[0])) == {}


def row(memory, recall, prompt, maintenance=0.0, ms=1.0):
    return {
        "memory": memory,
        "exchanges": 10,
        "evidence_recall": recall,
        "prompt_tokens_per_exchange": prompt,
        "maintenance_tokens_per_exchange": maintenance,
        "ms_per_exchange": ms,
    }


def test_the_rule_picks_best_cheapest_within_five_points_and_frugal():
    rows = [
        row("buffer", 1.00, 10_000),
        row("hybrid", 0.97, 900, 100),
        row("vector", 0.96, 800, 100),
        row("cognee", 0.99, 3_000, 50_000),
        row("window", 0.10, 200),
        row("broken", math.nan, 0),
    ]
    picks = figures.pick(rows)
    assert picks["best"]["memory"] == "buffer"
    assert picks["cheapest"]["memory"] == "vector"  # 900 tokens, within 4 points
    # at most 25% of buffer's 10,000 prompt tokens: hybrid, vector, window; the best of them
    assert picks["frugal"]["memory"] == "hybrid"
    assert figures.pick([row("vector", 0.5, 10)])["frugal"] is None  # no buffer measured
    assert figures.pick([row("x", math.nan, 1)]) == {"best": None, "cheapest": None, "frugal": None}


def test_metered_tokens_are_priced_at_gpt_4o_mini_and_small_embeddings():
    # 1M LLM input tokens at $0.15, 1M output at $0.60, 1M embedded at $0.02, over 1,000
    # exchanges: $0.77 per 1,000 exchanges; over 500 exchanges twice that
    assert figures.maintenance_cost(1e6, 1e6, 1e6, 1000) == pytest.approx(0.77)
    assert figures.maintenance_cost(1e6, 1e6, 1e6, 500) == pytest.approx(1.54)


def test_the_sweeps_figures_are_declared_metrics_with_units():
    names = [m.name for m in figures.SWEEP_METRICS]
    assert names[0] == "evidence_recall" and names[-1] == "est_cost_usd"
    from memory_lab.views.tables import metric_text

    ms = figures.BY_NAME["ms_per_exchange"]
    assert metric_text(ms, {"ms_per_exchange": 1234.5678}) == "1,234.57"
    assert metric_text(figures.BY_NAME["evidence_recall"], {"evidence_recall": 0.5}) == "50.0%"


def test_table_plain_and_markdown():
    head, body = ["memory", "recall"], [["window", "4.7"], ["vector", "38.1"]]
    assert table(head, body, markdown=True).splitlines()[:3] == [
        "| memory | recall |",
        "|---|---:|",
        "| window | 4.7 |",
    ]
    plain = table(head, body, markdown=False).splitlines()
    assert plain[0] == "memory  recall" and plain[3] == "vector    38.1"
