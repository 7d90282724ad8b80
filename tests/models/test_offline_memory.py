"""The offline memory model serves every memory prompt deterministically, offline."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from memory_lab.models import OfflineMemoryModel
from memory_lab.models.offline_memory import OfflineMemoryError, ToolRule
from memory_lab.models.tasks import (
    extract_prompt,
    importance_prompt,
    parse_importance,
    parse_json_reply,
    summarize_prompt,
)

TRANSCRIPT = (
    "Human: Hi there!\nAI: Hello!\n"
    "Human: I moved to Busan in March and I work as a nurse at Haeundae Hospital.\n"
    "AI: Congratulations.\nHuman: I really love spicy tteokbokki.\nAI: Yum."
)


def test_summarize_task_keeps_facts_and_drops_small_talk():
    model = OfflineMemoryModel(budget_tokens=40)
    reply = model.invoke(summarize_prompt(TRANSCRIPT, "Human: My flat is number 1204 in Suyeong."))
    text = str(reply.content)
    assert "Busan" in text and "1204" in text
    assert "Hi there" not in text and "Previous summary" not in text


def test_extract_task_returns_json_of_the_schema_with_preferences_marked():
    model = OfflineMemoryModel()
    first = parse_json_reply(str(model.invoke(extract_prompt(TRANSCRIPT)).content))
    again = parse_json_reply(str(model.invoke(extract_prompt(TRANSCRIPT)).content))
    assert first == again  # deterministic
    values = {f["value"]: f["kind"] for f in first["facts"]}
    assert values["I really love spicy tteokbokki."] == "preference"
    assert any("Busan" in v and k == "fact" for v, k in values.items())
    assert not any("Hi there" in v for v in values)


def test_extract_reuses_the_key_of_a_known_fact_it_restates():
    model = OfflineMemoryModel()
    known = [("prefer_aisle_seats", "I prefer aisle seats on long flights."), ("cat", "Mochi")]
    transcript = "Human: These days I prefer window seats on long flights.\nAI: Noted."
    facts = parse_json_reply(str(model.invoke(extract_prompt(transcript, known=known)).content))
    assert [(f["key"], f["kind"]) for f in facts["facts"]] == [("prefer_aisle_seats", "preference")]
    other = "Human: I prefer green tea in the morning.\nAI: Nice."  # a different preference
    facts = parse_json_reply(str(model.invoke(extract_prompt(other, known=known)).content))
    assert [f["key"] for f in facts["facts"]] == ["prefer_green_tea"]


def test_extract_fills_named_fields_of_a_profile_schema():
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "where the user lives, moved to"},
            "hobbies": {"type": "array", "items": {"type": "string"}},
        },
    }
    out = json.loads(str(OfflineMemoryModel().invoke(extract_prompt(TRANSCRIPT, schema)).content))
    assert "Busan" in out["city"] and out["hobbies"] == []


def test_importance_ranks_facts_above_small_talk():
    model = OfflineMemoryModel()
    fact = parse_importance(str(model.invoke(importance_prompt(TRANSCRIPT)).content))
    chat = parse_importance(str(model.invoke(importance_prompt("Human: ok thanks")).content))
    assert 1 <= chat < fact <= 10


def test_an_unfamiliar_prompt_is_summarised_not_refused():
    reply = OfflineMemoryModel().invoke("Please condense this:\n" + TRANSCRIPT)
    assert "Busan" in str(reply.content)


@tool
def archival_memory_insert(content: str) -> str:
    """Save a fact to archival memory."""
    return "ok"


def test_tool_calls_follow_the_declared_rules_and_stop_after_tool_results():
    rules = (ToolRule("archival_memory_insert", r"\bmoved to\b"),)
    model = OfflineMemoryModel(tool_rules=rules).bind_tools([archival_memory_insert])
    message = model.invoke([HumanMessage(TRANSCRIPT)])
    assert [c["name"] for c in message.tool_calls] == ["archival_memory_insert"]
    assert "Busan" in message.tool_calls[0]["args"]["content"]
    done = model.invoke(
        [HumanMessage(TRANSCRIPT), message, ToolMessage("ok", tool_call_id="call_0")]
    )
    assert done.tool_calls == []


def test_a_rule_for_a_tool_that_was_not_bound_names_the_memory_and_the_task():
    model = OfflineMemoryModel(memory_name="memgpt", tool_rules=(ToolRule("nope", "x"),))
    with pytest.raises(OfflineMemoryError, match="memory 'memgpt': task tool call"):
        model.bind_tools([archival_memory_insert]).invoke([HumanMessage("Human: x")])
