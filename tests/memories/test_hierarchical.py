"""The ``hierarchical`` memory: short-term, working summary, scored long-term on dialogue time."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memory_lab import parse_memory_spec
from memory_lab.memories.builtin.hierarchical import (
    LONG_TERM_HEADER,
    RECENT_HEADER,
    SUMMARY_HEADER,
    DialogueClock,
    LongTermEntry,
    ScoreWeights,
    date_hours,
)
from memory_lab.memories.protocol import Query
from memory_lab.run.exchanges import exchanges

from .replay import replayed

BUILTIN = Path(__file__).parents[2] / "memory_lab" / "dialogues" / "classic"


def test_the_composite_score_matches_the_guides_formula_by_hand():
    weights = ScoreWeights()  # 0.4 importance, 0.35 recency, 0.25 frequency, 0.5 similarity
    entry = LongTermEntry("lt-0", "x", importance=8, created=4.0, last_access=10.0, turn_ids=())
    entry.accesses = 3
    # 24 dialogue hours since last access: recency exp(-0.01 * 24) = 0.786628
    assert weights.recency_of(entry, now=34.0) == pytest.approx(0.7866279)
    # 0.4 * 0.8 + 0.35 * 0.786628 + 0.25 * 3/10 = 0.32 + 0.275320 + 0.075
    assert weights.composite(entry, now=34.0) == pytest.approx(0.6703198)
    # half similarity, half composite
    assert weights.score(entry, similarity=0.6, now=34.0) == pytest.approx(0.6351599)
    # frequency saturates at frequency_cap accesses; a faster decay forgets sooner
    entry.accesses = 25
    assert weights.composite(entry, now=10.0) == pytest.approx(0.32 + 0.35 + 0.25)
    fast = ScoreWeights(decay_rate=0.1)
    assert fast.recency_of(entry, now=34.0) == pytest.approx(math.exp(-2.4))


def test_dialogue_time_comes_from_session_dates_and_turn_order_never_the_clock():
    assert date_hours("1970-01-02") == 24.0
    assert date_hours("1:56 pm on 8 May, 2023") == date_hours("2023-05-08T13:56")
    assert date_hours("someday") is None
    clock = DialogueClock(minutes_per_exchange=30, session_gap_hours=24)
    day = date_hours("2026-03-02")
    from memory_lab.memories.protocol import Exchange

    def ex(i, session, date):
        return Exchange(i, "hi", "hello", f"u{i}", (), session, date)

    times = [
        clock.advance(ex(0, "s1", "2026-03-02")),
        clock.advance(ex(1, "s1", "2026-03-02")),
        clock.advance(ex(2, "s2", "2026-03-05")),  # dated: starts at its date
        clock.advance(ex(3, "s3", None)),  # undated: a gap after the last exchange
        clock.advance(ex(4, "s4", "2026-03-01")),  # dated before now: time never runs back
    ]
    assert times == [day, day + 0.5, day + 72, day + 96, day + 120]
    assert clock.at(Query("q", "s4")) == day + 120  # a probe in the same session: now
    assert clock.at(Query("q", "s5", "2026-03-20")) == date_hours("2026-03-20")


def test_overflow_consolidates_exactly_the_two_oldest_exchanges(nurse, run_models):
    spec = "hierarchical:short_term_limit=3"
    cell = replayed(spec, nurse, run_models, upto=4, recall=True)
    state = cell.memory.snapshot()
    assert state["short_term"] == [["hike", "s1.t6"], ["city-v2", "s2.t2"]]
    (entry,) = state["long_term"]
    assert entry["turn_ids"] == ["city-v1", "s1.t2", "job-v1", "s1.t4"]
    assert "Seoul" in entry["text"] and "nurse" in entry["text"] and 1 <= entry["importance"] <= 10
    cell.memory.observe(exchanges(nurse)[4])  # 3 in short-term: no overflow yet
    assert len(cell.memory.snapshot()["long_term"]) == 1
    cell.memory.observe(exchanges(nurse)[5])  # 4 > 3: the next two oldest move
    state = cell.memory.snapshot()
    cell.close()
    assert [e["turn_ids"] for e in state["long_term"]][1] == ["hike", "s1.t6", "city-v2", "s2.t2"]
    assert state["short_term"] == [["hike-again", "s2.t4"], ["job-v2", "s2.t6"]]


def test_long_term_entries_age_and_are_accessed_on_dialogue_time(nurse, run_models):
    spec = "hierarchical:short_term_limit=2,minutes_per_exchange=30"
    cell = replayed(spec, nurse, run_models, recall=True)
    memory = cell.memory
    day = date_hours("2026-03-02")
    first, second, third = memory.entries.values()
    # created when the newer of its two exchanges happened: s1's second exchange
    assert first.created == day + 0.5 and first.turn_ids[0] == "city-v1"
    assert third.created == date_hours("2026-04-10") + 1.0  # job-v2, s2's third exchange
    now = memory.clock.now  # s2's last exchange: its date + 3 half-hours
    assert now == date_hours("2026-04-10") + 1.5
    scored = {e.id: (score, sim) for score, sim, e in memory.ranked("Which city?", now)}
    # similarity rescaled over the candidates: the nearest 1, the farthest 0
    assert max(s for _, s in scored.values()) == 1.0 and min(s for _, s in scored.values()) == 0.0
    weights = memory.weights
    for entry in (first, third):
        recency = math.exp(-0.01 * (now - entry.last_access))
        composite = 0.4 * entry.importance / 10 + 0.35 * recency + 0.25 * entry.accesses / 10
        score, similarity = scored[entry.id]
        assert score == pytest.approx(0.5 * similarity + 0.5 * composite)
        assert weights.composite(entry, now) == pytest.approx(composite)
    # recalled for a user turn, then that turn saved: the entries shown count an access then
    before = {e.id: e.accesses for e in memory.entries.values()}
    shown = memory.recall(Query("Where do I work now?", "s2"))
    ids = memory._pending[1]
    assert ids and shown.items[0].text == LONG_TERM_HEADER
    memory.recall(Query("a probe in between", "s2"))  # a probe changes nothing
    assert {e.id: e.accesses for e in memory.entries.values()} == before
    cell.close()


def test_a_user_turn_recall_marks_its_entries_accessed_at_that_exchanges_time(nurse, run_models):
    cell = replayed("hierarchical:short_term_limit=2,k=1", nurse, run_models, upto=6, recall=True)
    memory = cell.memory
    nxt = exchanges(nurse)[6]
    before = {e.id: e.accesses for e in memory.entries.values()}
    memory.recall(Query(nxt.user, nxt.session_id, nxt.session_date))
    (entry_id,) = memory._pending[1]
    memory.observe(nxt)
    entry = memory.entries[entry_id]
    cell.close()
    assert entry.accesses == before[entry_id] + 1 and entry.last_access == memory.clock.now


def test_the_context_has_three_sections_and_reports_source_turns(nurse, run_models):
    cell = replayed("hierarchical:short_term_limit=2,k=2", nurse, run_models, recall=True)
    recall = cell.memory.recall(Query("Which city do I live in?", "s2"))
    usage, by_role = cell.maintenance()
    cell.close()
    texts = [i.text for i in recall.items]
    long_term, summary, recent = (
        texts.index(h) for h in (LONG_TERM_HEADER, SUMMARY_HEADER, RECENT_HEADER)
    )
    assert long_term == 0 < summary < recent
    facts = recall.items[1:summary]
    assert len(facts) == 2 and all(i.kind == "summary" and len(i.turn_ids) == 4 for i in facts)
    # 7 exchanges, 3 consolidations of 2: one left in short-term
    assert [i.turn_ids for i in recall.items[recent + 1 :]] == [("s2.t7", "s2.t8")]
    assert "Human: [2026-04-10] The weather is nice." in texts[-1]
    # every model call and embedding was metered as memory-maintenance: 7 exchanges, one summary
    # update each, and 3 consolidations of a summary and an importance call each
    assert [(role, u.llm_calls) for role, _, u in by_role] == [("memory", 7 + 3 * 2)]
    assert usage.input_tokens > 0 and usage.output_tokens > 0 and usage.embedding_tokens > 0


def test_a_bad_parameter_is_refused_when_the_spec_is_parsed():
    from memory_lab.memories import MemorySpecError

    for bad in ("short_term_limit=1", "recency_weight=1.5", "decay_rate=-1", "k=0"):
        with pytest.raises(MemorySpecError, match="hierarchical"):
            parse_memory_spec(f"hierarchical:{bad}")


def test_hierarchical_and_profile_run_offline_from_the_command_line(tmp_path, capsys):
    """``memory-lab run --memory hierarchical profile`` on a built-in dialogue, offline."""
    from memory_lab import read_results
    from memory_lab.cli import main

    source = BUILTIN / "student-finals-schedule.yaml"
    out = tmp_path / "run"
    argv = ["run", "--memory", "hierarchical", "profile", "--dialogues", str(source)]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0  # 0: every cell succeeded
    results = read_results(out)
    spent = results.turns.groupby("memory")["memory_tokens"].sum()
    assert spent["hierarchical"] > 0 and spent["profile"] > 0
    recall = results.probes.groupby("memory")["evidence_recall"].mean()
    assert recall["hierarchical"] > 0.5  # long-term entries credit their source turns
    assert "hierarchical" in capsys.readouterr().out
