"""``benchmarks/graph_scale.py``'s parts: the scales it parses, the doubling bands it puts each
exchange in, the ratio per doubling it fits, the cost it prices, the command it resumes with
and its tables over a real small run (the sweep itself runs by hand: it takes many hours)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pytest

from ..small_run import small_run  # noqa: F401 - a fixture

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import graph_scale  # noqa: E402


def test_scales_are_a_folder_and_its_conversations():
    assert graph_scale.parse_scale("1M:10") == ("1M", "10")
    assert graph_scale.parse_scale("100K:1-20") == ("100K", "1-20")
    for bad in ("1M", ":3", "1M:"):
        with pytest.raises(argparse.ArgumentTypeError, match="SCALE:CONVERSATIONS"):
            graph_scale.parse_scale(bad)


def test_bands_double_from_twelve_and_a_half_thousand_tokens():
    assert graph_scale.band_of(12_499) == -1
    assert graph_scale.band_of(12_500) == 0
    assert graph_scale.band_of(24_999) == 0
    assert graph_scale.band_of(25_000) == 1
    assert graph_scale.band_of(1_000_000) == 6  # 800K-1.6M
    assert graph_scale.band_label(0) == "12.5K-25K"
    assert graph_scale.band_label(6) == "800K-1.6M"


def test_the_ratio_per_doubling_is_fitted_on_log_axes():
    assert graph_scale.per_doubling({0: 1.0, 1: 1.0, 2: 1.0}) == pytest.approx(1.0)
    assert graph_scale.per_doubling({0: 1.0, 1: 2.0, 2: 4.0, 3: 8.0}) == pytest.approx(2.0)
    assert graph_scale.per_doubling({2: 3.0, 3: 4.5}) == pytest.approx(1.5)
    assert math.isnan(graph_scale.per_doubling({0: 5.0}))
    assert math.isnan(graph_scale.per_doubling({0: 0.0, 1: 0.0}))


def test_history_before_each_exchange_excludes_the_exchange():
    assert graph_scale.history_before([5, 7, 1]) == [0, 5, 12]
    assert graph_scale.history_before([]) == []


def test_metered_tokens_are_priced_at_gpt_4o_mini_and_small_embeddings():
    # 1M LLM input tokens at $0.15, 1M output at $0.60, 1M embedded at $0.02, over 1,000
    # exchanges: $0.77 per 1,000 exchanges; over 500 exchanges twice that
    assert graph_scale.cost_per_thousand(1e6, 1e6, 1e6, 1000) == pytest.approx(0.77)
    assert graph_scale.cost_per_thousand(1e6, 1e6, 1e6, 500) == pytest.approx(1.54)


def test_a_folder_with_a_run_is_resumed_and_a_new_one_started(tmp_path):
    new = graph_scale.command_of(tmp_path / "1M", "beam:B#scale=1M,conversations=10", ["a"], 2)
    assert new[new.index("--dialogues") + 1] == "beam:B#scale=1M,conversations=10"
    assert new[new.index("--cache-dir") + 1] == str(tmp_path / "cache")
    assert "--no-prompts" in new and "--resume" not in new
    (tmp_path / "1M").mkdir()
    (tmp_path / "1M" / "run.json").write_text("{}")
    again = graph_scale.command_of(tmp_path / "1M", "ignored", ["a"], 2)
    assert again[-2:] == ["--resume", str(tmp_path / "1M")] and "--dialogues" not in again


def test_tables_over_a_small_run(small_run):  # noqa: F811 - the fixture
    folder = small_run.path
    rows = {r.memory: r for r in graph_scale.scale_rows(folder)}
    assert set(rows) == set(small_run.memory_order())
    assert all(r.cells == "2/2" for r in rows.values())  # two dialogues each
    assert rows["buffer"].evidence_recall == pytest.approx(1.0)
    assert all(r.prompt_tokens > 0 for r in rows.values())
    assert rows["buffer"].maintenance_tokens == 0 and rows["buffer"].cost == 0
    assert rows["summary"].maintenance_tokens > 0 and rows["summary"].cost > 0
    # each conversation's recall on its own: the pooled figure lies between the extremes
    assert rows["buffer"].recall_low == rows["buffer"].recall_high == pytest.approx(1.0)
    for r in rows.values():
        assert r.recall_low - 1e-9 <= r.evidence_recall <= r.recall_high + 1e-9
    one = small_run.cells["dialogue"].iloc[0]
    narrowed = graph_scale.by_conversation(small_run, one)
    assert set(narrowed.turns["dialogue"]) == {one} and set(narrowed.probes["dialogue"]) == {one}
    assert graph_scale.recall_range(narrowed) == {}  # one conversation: no range
    assert "lowest-highest conversation (%)" in graph_scale.scale_table(list(rows.values()), True)
    # bands of 10 tokens: the small dialogues' exchanges spread over several doublings
    found, unfinished = graph_scale.growth([folder], first=10)
    assert unfinished == {}
    assert set(found) == set(small_run.memory_order())
    turns = small_run.turns
    for memory, per in found.items():
        counted = sum(n for n, _, _ in per.values())
        assert 0 < counted <= int((turns["memory"] == memory).sum())
    assert all(tokens == 0 for _, _, tokens in found["buffer"].values())
    text = graph_scale.growth_tables((found, unfinished), markdown=True, first=10)
    assert "× per doubling (fit)" in text and "| buffer |" in text


def test_growth_counts_the_turns_of_a_cell_a_dead_run_left_unfinished(small_run, tmp_path):  # noqa: F811
    import json
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(small_run.path, folder)
    whole, _ = graph_scale.growth([folder], first=10)
    turns = [
        json.loads(line)
        for line in (folder / "records.jsonl").read_text().splitlines()
        if '"type": "turn"' in line and '"memory": "buffer"' in line
    ]
    dialogue = turns[0]["dialogue"]
    left = [t for t in turns if t["dialogue"] == dialogue][:3]
    part = folder / "parts" / "cell-00099.dead.partial"
    part.parent.mkdir(exist_ok=True)
    part.write_text("".join(json.dumps(t) + "\n" for t in left) + '{"type": "tu')  # cut short
    found, unfinished = graph_scale.growth([folder], first=10)
    counted = {m: sum(n for n, _, _ in per.values()) for m, per in found.items()}
    before = {m: sum(n for n, _, _ in per.values()) for m, per in whole.items()}
    assert before["buffer"] < counted["buffer"] <= before["buffer"] + 3
    assert unfinished == {
        ("buffer", dialogue): "unfinished (a part file of a run still going or one that died) "
        f"at {left[-1]['exchange']}"
    }
    text = graph_scale.growth_tables((found, unfinished), markdown=False, first=10)
    assert "cells that did not finish" in text and f"buffer on {dialogue}" in text
