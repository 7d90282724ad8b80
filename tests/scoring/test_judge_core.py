"""The judge core every judge stands on: reply text and lenient JSON reading, the protocols'
prompt SHA-256, verdict records, models through the call cache, meters and the judge's bill."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage

from memory_lab.errors import ConfigError, ProviderFailure
from memory_lab.models.accounting import Meter, Price, Usage
from memory_lab.models.cache import CallCache
from memory_lab.models.tokens import count_tokens
from memory_lab.scoring.judge import BUILTIN_TEMPLATE, JudgeTemplate
from memory_lab.scoring.judge_core import (
    Judge,
    JudgeProtocol,
    JudgeVerdict,
    json_object,
    judge_models,
    prompts_sha256,
    reply_text,
)

from ..models.openai_mock import CHAT_USAGE


@dataclass(frozen=True)
class YesNo(JudgeProtocol):
    """A protocol in a few lines: one prompt, filled with a claim, read as yes (1) or no (0)."""

    name: ClassVar[str] = "yes-no"
    empty_reply: ClassVar[str] = "(silence)"

    text: str = "Is it true that {claim}? Answer yes or no."

    @property
    def prompts(self) -> Mapping[str, str]:
        return {"question": self.text}

    def fill(self, claim: str) -> str:
        return self.text.format(claim=claim)

    def read(self, raw: str) -> tuple[bool | None, float | None]:
        word = raw.strip().lower()
        said = True if word.startswith("yes") else False if word.startswith("no") else None
        return said, None if said is None else float(said)


def test_reply_text_reads_strings_and_content_parts():
    assert reply_text(AIMessage(content="plain")) == "plain"
    parts = AIMessage(content=["a", {"type": "text", "text": "b"}, {"type": "image_url"}])
    assert reply_text(parts) == "ab"
    assert reply_text(type("Msg", (), {"content": "duck"})()) == "duck"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a score mentioned in prose before the object: the object's own score is read
        ('I\'d give 0.5... {"score": 1}', 1),
        ('"score": 0.5 at first; then {"score": 1, "reason": "uses {braces}"}', 1),
        ('Score: 0.5 would be harsh. {"score": 1.0, "reason": "cut sho', 1.0),
        # inside a string or a nested object of the object: never its own score
        ('{"reason": "a score: 0.5 is too low", "score": 1, "x": "{', 1.0),
        ('{"detail": {"score": 0}, "score": 1, "reason": "cut', 1.0),
        ("{'score': 0.5, 'reason': 'single quotes'}", 0.5),
        ("{score: 0, reason: bare keys}", 0.0),
        ('{score: 0.5} was my first thought; {"score": 1}', 1),  # a whole JSON object first
        ('{"reason": "no score here"}', None),
        ('{"score": "high"}', "high"),
        ("no object at all", None),
    ],
)
def test_json_object_reads_the_objects_own_field(text, expected):
    found = json_object(text, "score")
    assert (found or {}).get("score") == expected
    assert found is None or "score" in found


def test_a_protocols_prompt_sha256_names_its_text():
    assert BUILTIN_TEMPLATE.prompt_sha256 == BUILTIN_TEMPLATE.sha256  # as run.json names it
    two = {"b": "second", "a": "first"}
    joined = json.dumps(two, sort_keys=True, ensure_ascii=False)
    assert prompts_sha256(two) == hashlib.sha256(joined.encode()).hexdigest()
    assert YesNo().prompt_sha256 == hashlib.sha256(YesNo.text.encode()).hexdigest()


def test_a_verdict_is_a_typed_record_with_its_usage_counted_when_unreported():
    model = FakeListChatModel(responses=["Yes, it is.", "  ", "perhaps"])
    judge = Judge(model, "fake:judge")
    protocol = YesNo()
    prompts = [protocol.fill(claim) for claim in ("the sky is blue", "x", "y")]
    first, empty, unsure = (judge.verdict(protocol, p) for p in prompts)
    assert isinstance(first, JudgeVerdict) and first.judge == "fake:judge"
    assert (first.parsed, first.score, first.cache_hit) == (True, 1.0, False)
    assert first.prompt_sha256 == protocol.prompt_sha256
    assert first.input_tokens == count_tokens(prompts[0])  # no usage reported: counted here
    assert first.output_tokens == count_tokens("Yes, it is.")
    assert set(first.to_dict()) == {
        "judge",
        "prompt_sha256",
        "raw",
        "score",
        "input_tokens",
        "output_tokens",
        "cache_hit",
    }
    assert empty.raw == "(silence)" and empty.score is None  # the protocol's empty reply
    assert unsure.parsed is None and unsure.score is None  # unreadable
    used = judge.usage()
    assert used.llm_calls == 3 and used.input_tokens == sum(count_tokens(p) for p in prompts)


def test_offline_is_the_protocols_own_judge_or_refused():
    with pytest.raises(ConfigError, match="needs a model"):
        judge_models("offline")
    made = judge_models("offline", 3, offline=lambda: FakeListChatModel(responses=["no"]))
    assert len(made) == 3 and made[0] is made[2]  # one deterministic judge for every run


def test_a_provider_judge_goes_through_the_call_cache_and_its_bill_counts_hits(tmp_path, mock):
    mock.reply = "yes"
    cache = CallCache(tmp_path / "cache")
    protocol = YesNo()
    for attempt in range(2):  # a second judge on the same cache: every call a hit
        (model,) = judge_models(
            "openai:gpt-4o-mini", base_url=mock.base_url, max_tokens=64, cache=cache
        )
        price = Price(0.15, 0.60)
        judge = Judge(model, "openai:gpt-4o-mini", price=price, price_model="gpt-4o-mini")
        verdicts = [judge.verdict(protocol, protocol.fill(c)) for c in ("a", "b", "a")]
        assert [v.score for v in verdicts] == [1.0] * 3
        assert mock.calls("chat") == 2  # "a" asked twice: once sent, once from the cache
        account = judge.account([protocol])
        hits = 3 if attempt else 1
        used = account.usage
        assert (used.llm_calls, used.cache_hits, account.requests) == (3, hits, 3 - hits)
        assert used.input_tokens == 3 * CHAT_USAGE["prompt_tokens"]  # hits keep their usage
        assert account.est_cost_usd == pytest.approx((333 * 0.15 + 21 * 0.60) / 1e6)
        assert account.prompts == {"yes-no": protocol.prompt_sha256} and account.cached
        assert f"{hits} from the call cache" in account.describe()
    body = mock.requests[0]["body"]
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 64
    # repeated runs of one judge: run 1 is a call of its own, found again by a rerun
    runs = judge_models("openai:gpt-4o-mini", 2, base_url=mock.base_url, max_tokens=64, cache=cache)
    for model in runs:
        Judge(model).verdict(protocol, protocol.fill("a"))
    assert mock.calls("chat") == 3


def test_an_unreachable_provider_is_one_line(monkeypatch):
    from memory_lab.models.providers import provider_chat_model

    from ..results.test_beam_prompt_reader import _closed_port

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    judge = Judge(provider_chat_model("openai:core-x", base_url=url, max_retries=0, timeout=5))
    with pytest.raises(ProviderFailure) as caught:
        judge.ask("hello")
    assert "\n" not in str(caught.value) and "core-x" in str(caught.value)
    assert judge.usage() == Usage()  # a failed call is not charged


@pytest.mark.parametrize(
    "body",
    ['{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}',
     "<html>oops</html>"],
)  # fmt: skip
def test_a_provider_reply_that_cannot_be_read_is_one_line(mock, body):
    """choices: [] (IndexError) and a non-JSON 200 (JSONDecodeError) had been tracebacks."""
    mock.always["chat"] = (200, body, {})
    (model,) = judge_models("openai:core-y", base_url=mock.base_url)
    with pytest.raises(ProviderFailure, match="the provider's reply could not be read") as caught:
        Judge(model).ask("hello")
    assert "\n" not in str(caught.value) and "core-y" in str(caught.value)


def test_meters_and_prices_add_up():
    meter = Meter()
    meter.add_llm(10, 2)
    before = meter.peek()
    meter.add_llm(5, 1, cached=True)
    assert meter.peek() - before == Usage(1, 1, 5, 1)
    assert meter.take().llm_calls == 2 and meter.peek() == Usage()
    assert Price(1.0, 2.0).cost(1_000_000, 500_000) == 2.0


def test_the_probe_template_is_a_protocol():
    template = JudgeTemplate("p1", "builtin", "Q: {question} A: {reply}")
    assert template.fill("q?", [], "r", abstention=False) == "Q: q? A: r"
    assert template.read("CORRECT") == (True, 1.0)
    assert template.read("WRONG") == (False, 0.0)
    assert template.read("unsure") == (None, None)
    assert template.prompts == {"p1": template.text}
