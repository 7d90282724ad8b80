"""A loopback HTTP server speaking the OpenAI chat-completions and embeddings API.

The real ``langchain-openai``/``openai`` client code runs against it. Responses can be scripted
per endpoint (status, body, headers); unscripted requests get a well-formed success with fixed
usage numbers, so tests can check those numbers arrive in the records (the text is ``reply``: a
string, or a function of the request body). With ``tool_calls`` set
(a function of the request body giving ``(name, args)`` pairs), a chat request that offers
``tools`` and does not end with tool results is answered with those tool calls
(``finish_reason: tool_calls``) and ``TOOL_CALL_USAGE``; ``tool_calls_after_results`` answers
tool results with tool calls too (a model that never stops calling). ``delay`` seconds are
added to every request (a provider's latency; ``max_in_flight`` counts how many overlapped);
``echo`` answers each chat request with its prompt's line before the last (the question, above
"AI:") and usage that depends on its length, so a reply or usage given to the wrong request
shows in the records.

``rpm`` makes it a provider with a rate limit: a token bucket of ``burst`` requests (default one
second's worth, at least 1) refilled at ``rpm`` a minute; a request over it is answered at once
with 429 and ``Retry-After`` (whole seconds until a request would be taken; ``retry_after_ms``
adds ``retry-after-ms``), and counted (``throttled``). Every request is recorded with when it
arrived (``at``, ``time.monotonic()``) and the status it got (``status``); ``served`` gives when
each request answered 200 arrived.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHAT_USAGE = {"prompt_tokens": 111, "completion_tokens": 7, "total_tokens": 118}
TOOL_CALL_USAGE = {"prompt_tokens": 222, "completion_tokens": 33, "total_tokens": 255}
EMBED_DIM = 16


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [b / 255 - 0.5 for b in digest[:EMBED_DIM]]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    return [x / norm for x in raw]


class OpenAIMock:
    """Start with ``with OpenAIMock() as mock:``; ``mock.base_url`` goes to the client."""

    def __init__(
        self,
        delay: float = 0.0,
        echo: bool = False,
        rpm: float | None = None,
        burst: float | None = None,
        retry_after_ms: bool = False,
    ) -> None:
        self.delay = delay
        self.echo = echo
        self.rpm = rpm
        self.burst = burst if burst is not None else max(1.0, (rpm or 0) / 60)
        self.retry_after_ms = retry_after_ms
        self.throttled = 0
        self._tokens = self.burst
        self._filled = time.monotonic()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self.requests: list[dict] = []
        self.scripts: dict[str, deque] = {"chat": deque(), "embeddings": deque()}
        self.always: dict[str, tuple[int, str, dict] | None] = {"chat": None, "embeddings": None}
        self.reply = "Mock reply."
        self.tool_calls: Callable[[dict], list[tuple[str, dict]]] | None = None
        self.tool_calls_after_results = False
        mock = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with mock._lock:  # in flight: from its arrival until its reply is ready
                    mock.in_flight += 1
                    mock.max_in_flight = max(mock.max_in_flight, mock.in_flight)
                try:
                    status, payload, headers = self.answer(body)
                finally:
                    with mock._lock:
                        mock.in_flight -= 1
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def answer(self, body):
                arrived = time.monotonic()
                limited = mock.over_limit(arrived)
                if mock.delay and limited is None:  # a provider refuses at once
                    time.sleep(mock.delay)
                kind = "chat" if self.path.endswith("/chat/completions") else "embeddings"
                request = {
                    "kind": kind,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                    "at": arrived,
                }
                mock.requests.append(request)  # list.append: safe from the server's threads
                scripted = limited or mock.always[kind]
                if scripted is None and mock.scripts[kind]:
                    scripted = mock.scripts[kind].popleft()
                status, text, headers = scripted or (200, mock.success(kind, body), {})
                request["status"] = status
                return status, text.encode(), headers

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def over_limit(self, now: float) -> tuple[int, str, dict] | None:
        """Take a request from the bucket, or the 429 that answers it when there is none."""
        if not self.rpm:
            return None
        rate = self.rpm / 60
        with self._lock:
            self._tokens = min(self.burst, self._tokens + (now - self._filled) * rate)
            self._filled = now
            if self._tokens >= 1:
                self._tokens -= 1
                return None
            self.throttled += 1
            wait = (1 - self._tokens) / rate
        headers = {"retry-after": str(max(1, math.ceil(wait)))}
        if self.retry_after_ms:
            headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        error = {"error": {"message": "Rate limit reached", "type": "requests"}}
        return 429, json.dumps(error), headers

    def served(self) -> list[float]:
        """When each request answered 200 arrived, in order."""
        return sorted(r["at"] for r in list(self.requests) if r.get("status") == 200)

    def tool_call_reply(self, body: dict) -> str | None:
        """Tool calls for a request offering tools, or None (a plain reply)."""
        messages = body.get("messages") or [{}]
        if self.tool_calls is None or not body.get("tools"):
            return None
        if messages[-1].get("role") == "tool" and not self.tool_calls_after_results:
            return None
        calls = self.tool_calls(body)
        if not calls:
            return None
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{len(self.requests)}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(calls)
            ],
        }
        return json.dumps(
            {
                "id": "chatcmpl-mock-tools",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "mock"),
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": TOOL_CALL_USAGE,
            }
        )

    def success(self, kind: str, body: dict) -> str:
        if kind == "chat":
            tools = self.tool_call_reply(body)
            if tools is not None:
                return tools
            reply, usage = self.reply(body) if callable(self.reply) else self.reply, CHAT_USAGE
            if self.echo:
                prompt = str(body["messages"][-1]["content"])
                lines = prompt.strip().splitlines() or [""]
                reply = lines[-2] if len(lines) > 1 else lines[-1]  # the line before "AI:"
                usage = {"prompt_tokens": len(prompt), "completion_tokens": len(reply)}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            return json.dumps(
                {
                    "id": "chatcmpl-mock",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "mock"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            vec = _vector(str(text))
            if body.get("encoding_format") == "base64":
                packed = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
                data.append({"object": "embedding", "index": i, "embedding": packed})
            else:
                data.append({"object": "embedding", "index": i, "embedding": vec})
        tokens = sum(len(str(t).split()) for t in texts)
        return json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "mock"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def calls(self, kind: str) -> int:
        return sum(1 for r in self.requests if r["kind"] == kind)

    def __enter__(self) -> OpenAIMock:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
