"""Token accounting: every call a memory makes while saving is charged to the turn that caused it.

A ``Meter`` accumulates counts; ``MeterCallback`` feeds it from LangChain's callback events for a
model, and embeddings report embedded tokens to it directly. The runner reads and resets the meter
around each turn and probe.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult

from memory_lab.errors import BadInput


@dataclass
class Usage:
    """Counts for one turn or probe."""

    llm_calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    embedding_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.embedding_tokens

    def __sub__(self, other: Usage) -> Usage:
        """What accrued between two readings of a meter (``Meter.peek``)."""
        return Usage(
            self.llm_calls - other.llm_calls,
            self.cache_hits - other.cache_hits,
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.embedding_tokens - other.embedding_tokens,
        )


class Meter:
    """Accumulates usage; ``take()`` returns what accrued since the last take and resets."""

    def __init__(self) -> None:
        self._usage = Usage()

    def add_llm(self, input_tokens: int, output_tokens: int, cached: bool = False) -> None:
        self._usage.llm_calls += 1
        self._usage.cache_hits += int(cached)
        self._usage.input_tokens += input_tokens
        self._usage.output_tokens += output_tokens

    def add_embedding(self, tokens: int) -> None:
        self._usage.embedding_tokens += tokens

    def take(self) -> Usage:
        usage, self._usage = self._usage, Usage()
        return usage

    def peek(self) -> Usage:
        """What accrued since the last take, without resetting it (a judge's running bill)."""
        return Usage(**asdict(self._usage))


MAX_TOKENS = 2**63 - 1  # a count of tokens a record holds (``records.MAX_COUNT``)


def _count(value: Any) -> int:
    """A provider's token count as a count: one that is not a whole number from 0 to
    ``MAX_TOKENS`` (-700, 10^300, "many") is none, 0 (the tokenizer's count stands in where a
    reader uses one), never a negative or overflowing figure in a table."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return number if 0 <= number <= MAX_TOKENS else 0


def _usage_of(response: LLMResult) -> list[tuple[int, int]]:
    out = []
    for generations in response.generations:
        for gen in generations:
            meta = getattr(getattr(gen, "message", None), "usage_metadata", None)
            if meta:
                out.append(
                    (_count(meta.get("input_tokens", 0)), _count(meta.get("output_tokens", 0)))
                )
    if not out and response.llm_output:
        tu = response.llm_output.get("token_usage") or {}
        out.append((_count(tu.get("prompt_tokens", 0)), _count(tu.get("completion_tokens", 0))))
    return out


class MeterCallback(BaseCallbackHandler):
    """Charges the usage reported by every call of the model it is attached to."""

    def __init__(self, meter: Meter):
        self.meter = meter
        self.prompts: list[str] = []

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[Any]], **kwargs: Any
    ) -> None:
        for batch in messages:
            self.prompts.append("\n".join(str(m.content) for m in batch))

    def on_llm_start(self, serialized: Any, prompts: list[str], **kwargs: Any) -> None:
        self.prompts.extend(prompts)

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        from memory_lab.models.cache import is_cache_hit

        cached = is_cache_hit(response)  # a cached reply keeps the usage of the original call
        for input_tokens, output_tokens in _usage_of(response):
            self.meter.add_llm(input_tokens, output_tokens, cached)

    def take_prompts(self) -> list[str]:
        prompts, self.prompts = self.prompts, []
        return prompts


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int = 0) -> float:
        """US dollars for these tokens at this price."""
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


# The price entry of a model served on this machine or the user's own server (Ollama, or an
# OpenAI-compatible --base-url such as vLLM, llama.cpp's server or LM Studio) that the price
# table does not know: it costs nothing unless --prices and --price-model price it.
LOCAL_PRICE_MODEL = "local"
LOCAL_PRICE = Price(0.0, 0.0)


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """The shipped price table (``memory_lab/data/prices.json``) or a user file shaped alike."""
    if path is None:
        text = (resources.files("memory_lab") / "data" / "prices.json").read_text("utf-8")
        source = "memory_lab/data/prices.json"
    else:
        text, source = Path(path).read_text("utf-8"), str(path)
    raw = json.loads(text)
    prices = {}
    for name, entry in raw.get("models", {}).items():
        try:
            prices[name] = Price(
                float(entry["input_per_mtok"]), float(entry.get("output_per_mtok", 0))
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInput(
                f"{source}: models.{name}: needs numeric input_per_mtok ({exc})"
            ) from exc
    return prices


def price_dict(price: Price) -> dict[str, float]:
    return asdict(price)
