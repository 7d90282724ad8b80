"""Growth per doubling of history: the bands, the fitted ratio and the turns counted (dead
runs' part files included), over a real small run."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from memory_lab.sweep import growth
from memory_lab.sweep.report import growth_tables

from ..small_run import small_run  # noqa: F401 - a fixture


def test_bands_double_from_twelve_and_a_half_thousand_tokens():
    assert growth.band_of(12_499) == -1
    assert growth.band_of(12_500) == 0
    assert growth.band_of(24_999) == 0
    assert growth.band_of(25_000) == 1
    assert growth.band_of(1_000_000) == 6  # 800K-1.6M
    assert growth.band_label(0) == "12.5K-25K"
    assert growth.band_label(6) == "800K-1.6M"


def test_the_ratio_per_doubling_is_fitted_on_log_axes():
    assert growth.per_doubling({0: 1.0, 1: 1.0, 2: 1.0}) == pytest.approx(1.0)
    assert growth.per_doubling({0: 1.0, 1: 2.0, 2: 4.0, 3: 8.0}) == pytest.approx(2.0)
    assert growth.per_doubling({2: 3.0, 3: 4.5}) == pytest.approx(1.5)
    assert math.isnan(growth.per_doubling({0: 5.0}))
    assert math.isnan(growth.per_doubling({0: 0.0, 1: 0.0}))


def test_history_before_each_exchange_excludes_the_exchange():
    assert growth.history_before([5, 7, 1]) == [0, 5, 12]
    assert growth.history_before([]) == []


def test_growth_over_a_small_run(small_run):  # noqa: F811 - the fixture
    # bands of 10 tokens: the small dialogues' exchanges spread over several doublings
    found, unfinished = growth.growth([small_run.path], first=10)
    assert unfinished == {}
    assert set(found) == set(small_run.memory_order())
    turns = small_run.turns
    for memory, per in found.items():
        counted = sum(n for n, _, _ in per.values())
        assert 0 < counted <= int((turns["memory"] == memory).sum())
    assert all(tokens == 0 for _, _, tokens in found["buffer"].values())
    assert any(tokens > 0 for _, _, tokens in found["summary"].values())
    text = growth_tables(found, unfinished, markdown=True)
    assert "× per doubling (fit)" in text and "| buffer |" in text


def test_growth_counts_the_turns_of_a_cell_a_dead_run_left_unfinished(small_run, tmp_path):  # noqa: F811
    folder = tmp_path / "run"
    shutil.copytree(small_run.path, folder)
    whole, _ = growth.growth([folder], first=10)
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
    found, unfinished = growth.growth([folder], first=10)
    counted = {m: sum(n for n, _, _ in per.values()) for m, per in found.items()}
    before = {m: sum(n for n, _, _ in per.values()) for m, per in whole.items()}
    assert before["buffer"] < counted["buffer"] <= before["buffer"] + 3
    assert unfinished == {
        ("buffer", dialogue): "unfinished (a part file of a run still going or one that died) "
        f"at {left[-1]['exchange']}"
    }
    text = growth_tables(found, unfinished, markdown=False)
    assert "cells that did not finish" in text and f"buffer on {dialogue}" in text
