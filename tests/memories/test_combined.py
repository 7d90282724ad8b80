"""combined: registered memories side by side, each part's context and cost reported apart."""

from __future__ import annotations

import pytest

from memory_lab import inspect_memory, load_dialogues, replay_dialogue
from memory_lab.memories import MemorySpecError, parse_memory_spec

from ..conftest import FIXTURES

SPEC = "combined:parts=summary+vector:k=2"


@pytest.fixture(scope="module")
def hana():
    return load_dialogues(FIXTURES / "memories" / "sister-hana.yaml")[0]


def test_each_parts_maintenance_tokens_are_reported_under_its_label(hana, run_models):
    records = []
    replay_dialogue(parse_memory_spec(SPEC), hana, run_models, records.append)
    turns = [r for r in records if r["type"] == "turn"]
    usage = [r for r in records if r["type"] == "usage"]
    assert {(u["part"], u["role"]) for u in usage} == {
        ("summary", "memory"),  # the summary part's LLM calls
        ("vector:k=2", "embeddings"),  # the vector part's embedded text
    }
    for turn in turns:  # the turn's maintenance is the sum of its parts' rows
        rows = [u for u in usage if u["exchange"] == turn["exchange"]]
        assert {u["part"] for u in rows} == {"summary", "vector:k=2"}
        spent = sum(u["input_tokens"] + u["output_tokens"] + u["embedding_tokens"] for u in rows)
        assert spent == turn["memory_tokens"] > 0
        assert turn["embedding_tokens"] == sum(u["embedding_tokens"] for u in rows)


def test_the_context_holds_each_part_under_a_heading_with_its_label(hana, run_models):
    view = inspect_memory(
        "combined:parts=window:k=1+kg", hana, "hana-v2", query="Where is Hana?", models=run_models
    )
    assert view.context.split("\n")[0] == "## window:k=1"
    window, kg = view.context.split("\n## kg\n")
    assert window.endswith(
        "Human: [2026-04-01] Big news: Hana is a teacher in Daejeon now.\nAI: What a change!"
    )
    assert kg.startswith("On Hana: ")
    assert "Hi! My sister" not in window  # k=1: the part's own parameter applies
    assert set(view.snapshot["parts"]) == {"window:k=1", "kg"}
    assert view.snapshot["parts"]["kg"]["triples"]
    empty = inspect_memory(
        "combined:parts=window+kg", hana, "hana-v2", query="What is my job?", models=run_models
    )
    assert "## kg" not in empty.context  # a part with nothing to show is left out


def test_a_part_with_several_parameters_separates_them_with_a_slash():
    spec = parse_memory_spec("combined:parts=window:k=3+entity:store=sqlite/k=2")
    assert spec.params == {"parts": ["window:k=3", "entity:store=sqlite/k=2"]}
    assert spec.label == "combined:parts=window:k=3+entity:store=sqlite/k=2"
    assert parse_memory_spec("combined").params == {"parts": ["window", "vector"]}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("combined:parts=window", "two or more memories"),
        ("combined:parts=window+windw", "part 'windw': unknown memory 'windw'"),
        ("combined:parts=window:k=0+vector", "part 'window:k=0'.*must be at least 1"),
        ("combined:parts=window+window", "part given twice: window"),
        ("combined:parts=window+combined", "cannot itself be combined"),
    ],
)
def test_bad_parts_are_refused_when_the_spec_is_parsed(spec, message):
    with pytest.raises(MemorySpecError, match=message):
        parse_memory_spec(spec)
