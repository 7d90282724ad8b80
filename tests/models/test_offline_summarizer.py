"""The offline summarizer is extractive, budgeted and never copies LangChain's example text."""

from langchain_classic.memory.prompt import SUMMARY_PROMPT

from memory_lab.models import OfflineSummarizer
from memory_lab.models.tokens import count_tokens

NEW_LINES = """Human: Hi there!
AI: Hello! How can I help?
Human: My flight to Lisbon leaves on 14 May at 09:40 from gate B12.
AI: Great, have a safe trip.
Human: ok"""


def test_summary_keeps_the_informative_sentence_and_drops_small_talk():
    llm = OfflineSummarizer(budget_tokens=40)
    out = llm.invoke(SUMMARY_PROMPT.format(summary="", new_lines=NEW_LINES))
    assert "09:40" in out.content and "B12" in out.content
    assert "Hi there" not in out.content
    assert out.usage_metadata["input_tokens"] > count_tokens(NEW_LINES)  # the prompt is billed


def test_summary_never_contains_the_prompt_example():
    llm = OfflineSummarizer()
    out = llm.invoke(SUMMARY_PROMPT.format(summary="", new_lines=NEW_LINES)).content
    assert "artificial intelligence" not in out.lower()
    assert "force for good" not in out.lower()


def test_summary_stays_within_its_budget_as_the_conversation_grows():
    llm = OfflineSummarizer(budget_tokens=60)
    summary = ""
    for i in range(30):
        lines = f"Human: Note number {i}: locker {100 + i} holds my blue bag.\nAI: Noted."
        summary = llm.invoke(SUMMARY_PROMPT.format(summary=summary, new_lines=lines)).content
        assert count_tokens(summary) <= 60
    assert "129" in summary  # ties favour the newest facts


def test_a_prompt_of_another_shape_is_a_loud_error():
    import pytest

    with pytest.raises(ValueError, match="summary prompt layout"):
        OfflineSummarizer().invoke("Summarise this please")
