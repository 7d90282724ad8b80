"""A total deadline on a provider's response, its body included.

httpx's timeouts bound each wait (connect, one read, ...): a server that sends its headers and
then a byte a second never trips them, and held ``run --request-timeout 5`` for 200 s. The
OpenAI-compatible clients memory-lab builds send their requests through ``deadline_client``: a
response whose body is not in within ``seconds`` of the request (the run's request timeout)
raises httpx's ``ReadTimeout``, which the client retries and then reports as any timeout. A
body larger than ``MAX_RESPONSE_BYTES`` is cut off too (``ReadError``): a provider's 6 GB
reply is never held.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx

# The most a response's body may hold: a chat reply is kilobytes, a batch of 2,048 embeddings of
# 3,072 floats as JSON text about 100 MB
MAX_RESPONSE_BYTES = 256 * 1024**2


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, deadline: float, seconds: float, request):
        self.inner, self.deadline, self.seconds, self.request = inner, deadline, seconds, request

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self.inner:
            received += len(chunk)
            if received > MAX_RESPONSE_BYTES:
                raise httpx.ReadError(
                    f"the response is larger than {MAX_RESPONSE_BYTES:,} bytes "
                    "(MAX_RESPONSE_BYTES)",
                    request=self.request,
                )
            if time.monotonic() > self.deadline:
                raise httpx.ReadTimeout(
                    f"the response was not in within {self.seconds:g} s (the request timeout, "
                    "its body included)",
                    request=self.request,
                )
            yield chunk

    def close(self) -> None:
        self.inner.close()


_STARTED = "memory_lab_started"  # the request's extension holding when it was sent


def _mark(request: httpx.Request) -> None:
    request.extensions[_STARTED] = time.monotonic()


def deadline_client(seconds: float, throttle: Any = None) -> httpx.Client:
    """An httpx client whose every response must be in, body included, within ``seconds`` of
    its request (its transport, proxies from the environment included, as httpx's own: the
    deadline is set by event hooks around it). ``throttle`` (``throttle.Throttle``): its hooks
    run around every request too, its wait for the run's rate limits before the deadline
    starts."""

    def wrap(response: httpx.Response) -> None:
        started = response.request.extensions.get(_STARTED, time.monotonic())
        stream = response.stream
        if isinstance(stream, httpx.SyncByteStream):
            response.stream = _DeadlineStream(stream, started + seconds, seconds, response.request)

    hooks: dict[str, list[Any]] = {"request": [_mark], "response": [wrap]}
    if throttle is not None and throttle.active:
        hooks["request"].insert(0, throttle.on_request)
        hooks["response"].append(throttle.on_response)
    return httpx.Client(timeout=seconds, event_hooks=hooks)
