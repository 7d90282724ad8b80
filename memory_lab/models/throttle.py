"""A provider client's side of the run's limits (``rate_limit.py``): wait for the shared
bucket before each request, settle its tokens after, pause everyone on a 429.

OpenAI-compatible clients (chat and embeddings: the clients ``providers.py`` builds, which
mem0's and LangMem's calls go through too) run ``Throttle``'s httpx event hooks around every
HTTP request, the SDK's own retries included (``deadline.deadline_client``): before it, the
request takes 1 from the provider's rpm bucket and its estimated tokens from the tpm bucket
(``estimate_tokens``: the prompt counted with the bundled tokenizer plus its ``max_tokens``, or
``DEFAULT_OUTPUT``) and sleeps until its slot; a 200's ``usage.total_tokens`` gives back what the
estimate held beyond it (or charges what it held short); a 429 pauses the provider's buckets for
its ``retry-after-ms``/``Retry-After`` (seconds or an HTTP-date; ``DEFAULT_PAUSE`` without one)
for every thread and process of the run, and is counted. The client then retries as it always
did (the openai SDK waits the same Retry-After, up to 120 s, ``MEMORY_LAB_MAX_RETRIES`` times),
and its retry waits for the bucket again. Other providers' chat models (Anthropic, Ollama) get
the rpm limit through LangChain's ``rate_limiter`` hook (``ChatRateLimiter``: once per call;
their tokens and 429s are their SDK's).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from langchain_core.rate_limiters import BaseRateLimiter

from memory_lab.models.rate_limit import DEFAULT_PAUSE, RateLimits, open_bucket, retry_after
from memory_lab.models.tokens import count_tokens

DEFAULT_OUTPUT = 512  # tokens a chat request without max_tokens is assumed to answer with
PER_MESSAGE = 4  # tokens a chat message costs beyond its text (role, separators)
MAX_USAGE_BODY = 1 << 20  # a reply body read for its usage (larger: its estimate stands)
_TOKENS = "memory_lab_tokens"  # the request's extension holding its estimate


def _texts(value: Any) -> list[str]:
    """Every string in a JSON value (message contents, tool calls and schemas)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def estimate_tokens(body: dict[str, Any]) -> int:
    """The tokens a request will count against a tokens-per-minute limit: its input counted
    with the bundled tokenizer, plus its output budget for a chat request."""
    if "messages" in body:
        messages = body.get("messages") or []
        prompt = sum(count_tokens(t) for t in _texts(messages) + _texts(body.get("tools")))
        output = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_OUTPUT
        return prompt + PER_MESSAGE * len(messages) + int(output) * int(body.get("n") or 1)
    inputs = body.get("input", body.get("prompt", ""))
    if isinstance(inputs, list) and inputs and all(isinstance(x, int) for x in inputs):
        return len(inputs)  # one input as token ids
    items = inputs if isinstance(inputs, list) else [inputs]
    return sum(len(x) if isinstance(x, list) else count_tokens(str(x)) for x in items)


class Throttle:
    """One provider's side of the run's shared bucket (``open_bucket``, opened on first use)."""

    def __init__(self, limits: RateLimits, provider: str):
        self.limits = limits
        self.provider = provider
        rpm, tpm = limits.rate("rpm", provider), limits.rate("tpm", provider)
        self.rpm = rpm / 60 if rpm else None  # per second
        self.tpm = tpm / 60 if tpm else None
        self._bucket: Any = None

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm)

    @property
    def bucket(self) -> Any:
        if self._bucket is None:
            self._bucket = open_bucket(self.limits)
        return self._bucket

    def keys(self) -> list[str]:
        return [f"{self.provider}:{kind}" for kind in ("rpm", "tpm")]

    def wait(self, tokens: float = 0) -> float:
        """Take a slot for a request of ``tokens`` and sleep until it; the seconds slept."""
        costs = []
        if self.rpm:
            costs.append((f"{self.provider}:rpm", self.rpm, 1.0))
        if self.tpm and tokens > 0:
            costs.append((f"{self.provider}:tpm", self.tpm, float(tokens)))
        if not costs:
            return 0.0
        delay = self.bucket.reserve(costs)
        if delay > 0:
            time.sleep(delay)
        return delay

    def throttled(self, headers: Any) -> float:
        """A 429 came back: pause the provider for its Retry-After; the seconds paused."""
        seconds = retry_after(headers)
        seconds = DEFAULT_PAUSE if seconds is None else seconds
        self.bucket.pause(self.keys(), seconds)
        return seconds

    def settle(self, estimated: float, used: float) -> None:
        if self.tpm and used >= 0:
            self.bucket.settle(f"{self.provider}:tpm", self.tpm, estimated - used)

    # -- httpx event hooks (``deadline_client``) ---------------------------------------------

    def on_request(self, request: Any) -> None:
        tokens = 0
        if self.tpm:
            try:
                tokens = estimate_tokens(json.loads(request.content or b"{}"))
            except Exception:  # noqa: BLE001 - a body not JSON or not read: its bytes / 4
                try:
                    tokens = max(1, len(request.content) // 4)
                except Exception:  # noqa: BLE001 - a streamed body: its tokens are unknown
                    tokens = DEFAULT_OUTPUT
            request.extensions[_TOKENS] = tokens
        self.wait(tokens)

    def on_response(self, response: Any) -> None:
        if response.status_code == 429:
            self.throttled(response.headers)
            return
        estimated = response.request.extensions.get(_TOKENS)
        if not estimated or response.status_code != 200:
            return
        if "json" not in response.headers.get("content-type", ""):
            return  # a stream (server-sent events): its estimate stands
        response.stream = _UsageStream(response.stream, self, estimated)


class _UsageStream(httpx.SyncByteStream):
    """A response body passed on as it comes, read at its end for ``usage.total_tokens``."""

    def __init__(self, inner: Any, throttle: Throttle, estimated: float):
        self.inner, self.throttle, self.estimated = inner, throttle, estimated

    def __iter__(self):
        chunks, size = [], 0
        for chunk in self.inner:
            size += len(chunk)
            if size <= MAX_USAGE_BODY:
                chunks.append(chunk)
            yield chunk
        if size <= MAX_USAGE_BODY:
            try:
                usage = json.loads(b"".join(chunks)).get("usage") or {}
                used = usage.get("total_tokens")
            except (ValueError, AttributeError):
                return
            if isinstance(used, int | float):
                self.throttle.settle(self.estimated, used)

    def close(self) -> None:
        self.inner.close()


class ChatRateLimiter(BaseRateLimiter):
    """LangChain's ``rate_limiter`` hook onto the run's bucket (rpm only; once per call)."""

    def __init__(self, throttle: Throttle):
        self.throttle = throttle

    def acquire(self, *, blocking: bool = True) -> bool:
        self.throttle.wait()
        return True

    async def aacquire(self, *, blocking: bool = True) -> bool:
        import asyncio

        await asyncio.to_thread(self.throttle.wait)
        return True
