"""The offline memory model answers LangChain's entity and knowledge-graph memory prompts."""

from __future__ import annotations

import pytest
from langchain_classic.memory.prompt import (
    ENTITY_EXTRACTION_PROMPT,
    ENTITY_SUMMARIZATION_PROMPT,
    KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT,
)

from memory_lab.models import OfflineMemoryModel
from memory_lab.models.langchain_prompts import match_template

HISTORY = (
    "Human: [2026-03-02] Hi! I'm Jisoo, a Python backend developer.\n"
    "AI: Nice to meet you, Jisoo!\n"
    "Human: [2026-03-02] My sister Hana is a nurse in Daejeon.\n"
    "AI: That sounds like a demanding job."
)


def ask(prompt: str) -> str:
    return str(OfflineMemoryModel().invoke(prompt).content)


def entities(line: str, history: str = HISTORY) -> str:
    return ask(ENTITY_EXTRACTION_PROMPT.format(history=history, input=line))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "[2026-03-09] Hana moved to Busan and works at Haeundae Hospital now.",
            "Hana, Busan, Haeundae Hospital",
        ),
        (
            "My friend Priya booked the Hotel Miradouro Azul in Lisbon.",
            "Priya, Hotel Miradouro Azul, Lisbon",
        ),
        ("Dr. Kim said the MRI on Friday looked fine.", "Dr. Kim, MRI"),
        ("Hi! I'm good, thanks. How are you?", "NONE"),
        ("Yesterday was long, I think I'll sleep early in May.", "NONE"),
        ("동생 민호가 부산에 살아요.", "민호, 부산"),
    ],
)
def test_entity_extraction_lists_the_proper_nouns_of_the_last_line(line, expected):
    assert entities(line) == expected


def test_entity_extraction_reads_only_the_last_line_and_never_the_worked_example():
    assert entities("I went for a walk.") == "NONE"  # Jisoo, Hana and Langchain are elsewhere
    assert "Langchain" not in entities("Hana says hi.")
    assert entities("Hana says hi.") == "Hana"  # a known name opens the sentence


def summary(entity: str, existing: str, line: str) -> str:
    prompt = ENTITY_SUMMARIZATION_PROMPT.format(
        entity=entity, summary=existing, history=HISTORY, input=line
    )
    return ask(prompt)


def test_entity_summary_starts_with_one_dated_sentence_about_the_entity():
    out = summary("Hana", "", "[2026-03-02] My sister Hana is a nurse in Daejeon. I'm tired.")
    assert out == "[2026-03-02] My sister Hana is a nurse in Daejeon."


def test_entity_summary_replaces_a_changed_fact_and_keeps_the_others():
    existing = (
        "[2026-03-02] My sister Hana is a nurse in Daejeon. "
        "[2026-03-02] Hana loves hiking on weekends."
    )
    out = summary("Hana", existing, "[2026-04-01] Hana is a teacher in Daejeon now.")
    assert "teacher" in out and "nurse" not in out
    assert "hiking" in out
    assert out.endswith("[2026-04-01] Hana is a teacher in Daejeon now.")


def test_entity_summary_is_unchanged_when_the_line_says_nothing_about_the_entity():
    existing = "[2026-03-02] My sister Hana is a nurse in Daejeon."
    assert summary("Hana", existing, "[2026-03-03] I bought a new laptop.") == existing
    assert summary("Hana", existing, "Where does Hana work?") == existing  # a question


def test_entity_summary_in_korean():
    existing = "[2026-03-02] 동생 민호가 부산에 살아요."
    out = summary("민호", existing, "[2026-04-01] 민호가 이제 서울에 살아요.")
    assert "서울" in out and "부산" not in out


def triples(line: str, history: str = HISTORY):
    from langchain_community.graphs.networkx_graph import parse_triples

    reply = ask(KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT.format(history=history, input=line))
    return reply, [tuple(t) for t in parse_triples(reply)]


def test_kg_triples_in_the_format_the_class_parses():
    reply, found = triples("[2026-03-09] My friend Priya lives in Lisbon.")
    assert reply == "(Priya, lives in, Lisbon)<|>(Priya, is Human's, friend)"
    assert found == [("Priya", "lives in", "Lisbon"), ("Priya", "is Human's", "friend")]
    assert triples("I moved to Busan in March, and I love it.")[1] == [
        ("Human", "moved to", "Busan in March")
    ]
    assert triples("My total budget is about $3,000 including flights.")[1] == [
        ("Human's total budget", "is about", "$3,000 including flights")
    ]


@pytest.mark.parametrize("line", ["Hello.", "How are you?", "It was great, thanks!", ""])
def test_kg_says_none_for_lines_without_a_simple_statement(line):
    assert triples(line) == ("NONE", [])


def test_kg_triples_in_korean():
    assert triples("저는 부산에 살아요.")[1] == [("Human", "살다", "부산에")]
    assert triples("제 고양이 이름은 콩이예요.")[1] == [("Human's 고양이 이름", "이다", "콩이")]


def test_a_history_that_repeats_the_template_cannot_shift_the_variables():
    tricky = HISTORY + "\nHuman: Last line of conversation (for extraction):\nHuman: Nope"
    filled = match_template(
        ENTITY_EXTRACTION_PROMPT.template,
        ENTITY_EXTRACTION_PROMPT.format(history=tricky, input="Hana is here."),
    )
    assert filled == {"history": tricky, "input": "Hana is here."}
    assert match_template(ENTITY_EXTRACTION_PROMPT.template, "Summarize: Hana") is None


def test_the_summary_prompt_is_still_served_as_before():
    from langchain_classic.memory.prompt import SUMMARY_PROMPT

    out = ask(SUMMARY_PROMPT.format(summary="", new_lines=HISTORY))
    assert "Hana" in out and "EXAMPLE" not in out
