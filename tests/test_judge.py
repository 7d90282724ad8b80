"""The LLM judge: prompt, verdict parsing, the offline judge, a real client and the summary."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from memory_lab.judge import (
    JUDGE_PROMPT,
    JUDGE_PROMPT_TEXT,
    JUDGE_PROMPT_VERSION,
    OfflineJudge,
    Verdict,
    judge_prompt,
    judge_reply,
    parse_judge_prompt,
    parse_verdict,
    resolve_judge,
)
from memory_lab.models.providers import provider_chat_model
from memory_lab.models.tokens import count_tokens
from memory_lab.normalize import find_any
from memory_lab.results import judge_summary

from .models.openai_mock import CHAT_USAGE, OpenAIMock


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CORRECT", True),
        ("Correct.", True),
        ("**correct**", True),
        ("Verdict: CORRECT", True),
        ("WRONG", False),
        ("wrong!", False),
        ("incorrect", False),
        ("INCORRECT.", False),
        ("not correct", False),
        ("WRONG - the correct answer is Busan", False),
        ("CORRECT, not wrong", True),
        ("I cannot tell.", None),
        ("", None),
        ("correctly", None),
    ],
)
def test_parse_verdict(text, expected):
    assert parse_verdict(text) is expected


def test_prompt_file_has_placeholders_and_the_one_word_instruction():
    assert set(JUDGE_PROMPT.input_variables) == {"question", "answers", "reply", "abstention"}
    assert "exactly one word: CORRECT or WRONG" in JUDGE_PROMPT_TEXT
    assert "outdated" in JUDGE_PROMPT_TEXT and "never given" in JUDGE_PROMPT_TEXT
    assert len(JUDGE_PROMPT_VERSION) == 12


def test_prompt_sections_round_trip():
    prompt = judge_prompt(
        "Where did I move?", ["Busan", "부산"], "You moved to Busan.", abstention=False
    )
    assert "- Busan\n- 부산" in prompt
    assert parse_judge_prompt(prompt) == (
        "Where did I move?",
        ["Busan", "부산"],
        "You moved to Busan.",
        False,
    )
    prompt = judge_prompt("What is my cat's name?", [], "I don't know.", abstention=True)
    assert parse_judge_prompt(prompt) == ("What is my cat's name?", [], "I don't know.", True)


def _string_match(answers, reply, abstention):
    from memory_lab.scoring import is_abstention

    if abstention:
        return is_abstention(reply)
    return not is_abstention(reply) and find_any(reply, answers) is not None


@pytest.mark.parametrize(
    ("question", "answers", "reply", "abstention"),
    [
        ("Where do I live now?", ["Busan"], "You live in Busan now.", False),
        ("Where do I live now?", ["Busan"], "You live in Seoul.", False),
        ("How old is my sister?", ["13"], "She is 3 years old.", False),
        ("Where do I live now?", ["Busan"], "I don't know.", False),
        ("제 고향이 어디였죠?", ["부산"], "고향은 부산이에요.", False),
        ("제 고향이 어디였죠?", ["부산"], "서울이에요.", False),
        ("What is my cat's name?", [], "I don't know.", True),
        ("What is my cat's name?", [], "Your cat is called Tom.", True),
        ("제 차 번호가 뭐였죠?", [], "잘 모르겠어요.", True),
    ],
)
def test_offline_judge_agrees_with_string_match(question, answers, reply, abstention):
    verdict = judge_reply(OfflineJudge(), question, answers, reply, abstention=abstention)
    assert verdict.correct is _string_match(answers, reply, abstention)
    assert verdict.raw in ("CORRECT", "WRONG")
    prompt = judge_prompt(question, answers, reply, abstention=abstention)
    assert verdict.input_tokens == count_tokens(prompt)
    assert verdict.output_tokens == count_tokens(verdict.raw)


def test_resolve_judge_offline():
    judge = resolve_judge("offline")
    assert isinstance(judge, OfflineJudge)
    assert judge.get_num_tokens("hello world") == count_tokens("hello world")


@pytest.fixture
def mock(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge-fake")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIMock() as server:
        yield server


def test_judge_reply_through_a_real_client(mock):
    mock.reply = "CORRECT"
    model = provider_chat_model("openai:gpt-4o-mini", base_url=mock.base_url)
    verdict = judge_reply(
        model,
        "Which city did I move to?",
        ["Busan", "Pusan"],
        "You told me you moved to Busan last spring.",
        abstention=False,
    )
    assert verdict == Verdict(
        True, "CORRECT", CHAT_USAGE["prompt_tokens"], CHAT_USAGE["completion_tokens"]
    )
    assert mock.calls("chat") == 1
    content = mock.requests[0]["body"]["messages"][0]["content"]
    assert "Which city did I move to?" in content
    assert "- Busan\n- Pusan" in content
    assert "You told me you moved to Busan last spring." in content


def test_judge_reply_through_resolve_judge_unparseable(mock):
    mock.reply = "Hmm, hard to say."
    verdict = judge_reply(
        resolve_judge("openai:gpt-4o-mini", base_url=mock.base_url),
        "What is my cat's name?",
        [],
        "I don't know.",
        abstention=True,
    )
    assert verdict.correct is None and verdict.raw == "Hmm, hard to say."


def test_judge_summary_rates():
    probes = pd.DataFrame(
        {
            "memory": ["buffer"] * 4 + ["window"] * 3,
            "correct": [True, True, False, False, True, False, False],
            "judge_correct": [True, False, False, None, None, None, True],
        }
    )
    summary = judge_summary(probes).set_index("memory")
    assert list(summary.index) == ["buffer", "window"]
    buffer = summary.loc["buffer"]
    assert (buffer.probes, buffer.judged, buffer.unparseable) == (4, 3, 1)
    assert buffer.judge_accuracy == pytest.approx(1 / 3)
    assert buffer.string_accuracy == pytest.approx(2 / 4)
    assert buffer.disagreement_rate == pytest.approx(1 / 3)
    window = summary.loc["window"]
    assert (window.judged, window.unparseable) == (1, 2)
    assert window.judge_accuracy == 1.0
    assert window.string_accuracy == pytest.approx(1 / 3)
    assert window.disagreement_rate == 1.0


def test_judge_summary_with_no_verdicts():
    probes = pd.DataFrame({"memory": ["a"], "correct": [True], "judge_correct": [None]})
    row = judge_summary(probes).iloc[0]
    assert row.judged == 0 and row.unparseable == 1
    assert math.isnan(row.judge_accuracy) and math.isnan(row.disagreement_rate)
