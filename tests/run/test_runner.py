"""The laws of the instrument, asserted on the built-in suite (see issue 2)."""

from __future__ import annotations

import pandas as pd

from memory_lab import load_dialogues, parse_memory_spec, replay_dialogue
from memory_lab.log.records import without_timings
from memory_lab.models.prompt import INPUT_KEY
from memory_lab.run.cell import Cell
from memory_lab.run.exchanges import exchanges


def probes_of(results, memory):
    return results.probes[results.probes["memory"] == memory]


def test_buffer_has_every_answer_in_context(classic_run):
    p = probes_of(classic_run, "buffer")
    # derived answers (a sum, a count) are not verbatim anywhere, so only the others can be found
    answerable = p[(p["category"] != "abstention") & ~p["derived"]]
    assert len(answerable) >= 50
    assert answerable["context_hit"].all()


def test_buffer_carries_every_evidence_turn_of_every_answerable_probe(classic_run):
    p = probes_of(classic_run, "buffer")
    answerable = p[p["category"] != "abstention"]
    assert (answerable["evidence_recall"] == 1.0).all()
    assert p[p["category"] == "abstention"]["evidence_recall"].isna().all()


def test_window_of_one_carries_less_evidence_than_buffer(classic_run):
    recall = {
        m: probes_of(classic_run, m)["evidence_recall"].mean() for m in ("buffer", "window:k=1")
    }
    assert recall["window:k=1"] < 0.5 < recall["buffer"]


def test_session_dates_reach_the_prompt(classic_run):
    turns = classic_run.turns
    last = turns[turns["memory"] == "buffer"].groupby("dialogue").tail(1)
    for row in last.itertuples():
        assert f"[{row.session_date}] " in row.prompt  # the latest session's date is shown
    assert turns["session_date"].notna().all()


def test_window_of_one_misses_long_range_facts_that_buffer_keeps(classic_run):
    def long_range_hit(memory):
        p = probes_of(classic_run, memory)
        return p[p["category"] == "long-range"]["context_hit"].mean()

    assert long_range_hit("window:k=1") < long_range_hit("buffer")


def test_prompt_tokens_grow_for_buffer_and_stay_bounded_for_window(classic_run):
    turns = classic_run.turns
    for dialogue, group in turns[turns["memory"] == "buffer"].groupby("dialogue"):
        tokens = group.sort_values("exchange")["prompt_tokens"]
        assert tokens.iloc[-1] > 3 * tokens.iloc[0], dialogue
        assert tokens.corr(group.sort_values("exchange")["exchange"]) > 0.9, dialogue
    window = turns[turns["memory"] == "window:k=1"]
    buffer_max = turns[turns["memory"] == "buffer"]["prompt_tokens"].max()
    assert window["prompt_tokens"].max() < buffer_max / 4
    # a window's context never holds more than k exchanges however long the dialogue runs
    assert (window["context_tokens"] <= window["context_tokens"].quantile(0.5) * 6).all()


def test_only_memories_that_call_models_report_maintenance_tokens(classic_run):
    per_memory = classic_run.turns.groupby("memory")["memory_tokens"].sum()
    assert per_memory["summary"] > 0 and per_memory["summary_buffer"] > 0
    assert per_memory["vector"] > 0  # it embeds every exchange and every query
    assert per_memory["buffer"] == 0 and per_memory["window"] == 0 and per_memory["window:k=1"] == 0
    llm_calls = classic_run.turns.groupby("memory")["memory_llm_calls"].sum()
    assert llm_calls["summary"] == (classic_run.turns["memory"] == "summary").sum()


def test_every_user_turn_and_probe_is_recorded_with_its_prompt(classic_run):
    dialogues = load_dialogues("builtin:classic")
    user_turns = sum(1 for d in dialogues for t in d.turns if t.role == "user")
    n_probes = sum(len(d.probes) for d in dialogues)
    turns = classic_run.turns[classic_run.turns["memory"] == "vector"]
    assert (turns["prompt_tokens"] > 0).sum() == user_turns
    assert len(probes_of(classic_run, "vector")) == n_probes
    assert classic_run.probes["prompt"].str.contains("Current conversation:").all()


def test_memories_differ_in_what_they_recall(classic_run):
    acc = classic_run.probes.groupby("memory")["correct"].mean()
    assert acc["buffer"] > acc["window:k=1"]
    assert 0.3 < acc["buffer"] < 1.0  # a perfect score would mean the instrument is broken


def snapshot(cell: Cell) -> tuple:
    """Everything a memory holds, read without going through the chain."""
    inner = cell.memory.inner  # the langchain-classic memory inside the adapter
    variables = inner.load_memory_variables({INPUT_KEY: "what do you remember?"})
    state = inner.model_dump() if hasattr(inner, "model_dump") else {}
    state.pop("retriever", None)
    return variables, repr(state), cell.snapshot()


def test_asking_a_probe_never_changes_the_memory(run_models):
    dialogue = load_dialogues("builtin:classic")[0]
    exs = exchanges(dialogue)
    for spec in ("buffer", "window:k=2", "summary", "summary_buffer:max_token_limit=100", "vector"):
        cell = Cell(parse_memory_spec(spec), dialogue, run_models)
        try:
            for ex in exs[:12]:
                cell.replay_exchange(ex)
            before = snapshot(cell)
            for probe in dialogue.probes[:3]:
                cell.ask(probe, exs[11])
            assert snapshot(cell) == before, spec
        finally:
            cell.close()


def test_two_runs_give_identical_records_apart_from_timings(run_models):
    dialogues = load_dialogues("builtin:classic")[:2]

    def run() -> list[dict]:
        records: list[dict] = []
        for spec in ("buffer", "summary_buffer", "vector"):
            for d in dialogues:
                replay_dialogue(parse_memory_spec(spec), d, run_models, records.append)
        return [without_timings(r) for r in records]

    first, second = run(), run()
    assert len(first) > 100
    assert first == second


def test_each_cell_gets_its_own_vector_collection(mini_dialogue, run_models):
    spec = parse_memory_spec("vector")
    a, b = Cell(spec, mini_dialogue, run_models), Cell(spec, mini_dialogue, run_models)
    try:
        assert a.resources.cell_id != b.resources.cell_id
        a.replay_exchange(exchanges(mini_dialogue)[0])
        assert a.snapshot()["documents"] == 1
        assert b.snapshot()["documents"] == 0
    finally:
        a.close()
        b.close()


def test_turn_records_are_tidy(classic_run):
    assert isinstance(classic_run.turns, pd.DataFrame)
    for column in ("memory", "dialogue", "turn_id", "prompt_tokens", "memory_tokens", "seconds"):
        assert column in classic_run.turns.columns
    assert not any("," in c for c in classic_run.turns.columns)
