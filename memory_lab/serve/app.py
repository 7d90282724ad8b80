"""The FastAPI app: chat, snapshot and forget per user, the playground page, JSON errors.

Routes (``user_id``: 1-64 of ``[A-Za-z0-9_-]``, see ``guard``):

- ``POST /chat/{user_id}`` ``{"message": ..., "memory": LABEL?}`` -> ``{"reply": ...,
  "memories": [...]}``: every served memory (or the one named) answers and saves the exchange;
  each entry holds its reply, the context its prompt had, token counts, and its ``state`` after.
- ``GET /memory/{user_id}?memory=&query=``: each memory's snapshot and the context it would give
  now (for ``query``, default the user's last message).
- ``DELETE /memory/{user_id}?memory=``: forget the user (on PostgreSQL too).
- ``GET /dialogue/{user_id}?memory=``: the conversation as a format v1 dialogue file.
- ``GET /memories``: the served memories and limits; ``GET /``: the playground.

The lifespan opens one bounded connection pool per PostgreSQL URL the memories use
(``--postgres-pool``) and lends it to every user's thread and Store (``thread_id`` from the
memory and the user id), so conversations survive a restart and users share the connections; a
request that finds none free within ``--postgres-wait`` is refused 503 with ``Retry-After``.
Memory work runs in the threadpool, one request per user at a time. Logs name users, routes,
sizes and timings, never message text unless ``log_messages``.
"""

from __future__ import annotations

import logging
import time
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from importlib import resources as package_files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict

from memory_lab.memories.lg_backends import PoolBusy, lend_pool, open_pool
from memory_lab.memories.registry import MemorySpec
from memory_lab.run.context import RunModels
from memory_lab.serve.chat import Chats, keeps_state, served_spec
from memory_lab.serve.guard import (
    Limits,
    RateLimiter,
    RequestError,
    check_message,
    check_text,
    check_user_id,
)
from memory_lab.serve.http import HostCheck, add_error_handlers, error_response
from memory_lab.text.redact import redact

log = logging.getLogger("memory_lab.serve")


@dataclass
class ServeSettings:
    """What ``memory-lab serve`` serves and how (the CLI's options)."""

    memories: list[MemorySpec]
    models: RunModels
    limits: Limits = field(default_factory=Limits)
    log_messages: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str
    memory: str | None = None


def postgres_urls(specs: list[MemorySpec], resources: dict[str, str]) -> list[str]:
    """The PostgreSQL URLs where the served memories keep their state (``keeps_state``)."""
    from memory_lab.memories.lg_backends import POSTGRES_RESOURCE
    from memory_lab.memories.protocol import lookup_resource

    urls = [
        lookup_resource(resources, POSTGRES_RESOURCE, spec.label)
        for spec in specs
        if keeps_state(spec)
    ]
    return list(dict.fromkeys(urls))


@asynccontextmanager
async def _lifespan(app: FastAPI):
    settings: ServeSettings = app.state.settings
    specs = [served_spec(s) for s in settings.memories]
    async with AsyncExitStack() as stack:
        limits = settings.limits
        for url in postgres_urls(specs, dict(settings.models.resources)):
            pool = stack.enter_context(open_pool(url, limits.postgres_pool, limits.postgres_wait))
            stack.enter_context(lend_pool(url, pool))
        chats = Chats(specs, settings.models, settings.limits.max_users)
        app.state.chats = chats
        try:
            yield
        finally:
            await run_in_threadpool(chats.close)  # before the savers close


class BodyLimit:
    """Refuse (413) a request body over ``limit`` bytes, by its length or as it streams in."""

    def __init__(self, app: Any, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await error_response(413, self._message())(scope, receive, send)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        body = b""  # no length given (chunked): read it all, within the limit, then replay it
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await error_response(413, self._message())(scope, receive, send)
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _message(self) -> str:
        return f"the request body is over {self.limit} bytes (see --max-message-chars)"


def answering_model(llm: str) -> str:
    """How the page names the model that answers (the offline one says what it does)."""
    from memory_lab.models.spec import is_offline

    if is_offline(llm):
        return (
            'offline reader (no LLM: it quotes what the memory gives back, says "Noted." to '
            'a statement and "I don\'t know." when memory holds no answer; --llm sets a real '
            "model)"
        )
    return llm


def create_app(settings: ServeSettings) -> FastAPI:
    """The app serving ``settings``; memories are made per user on first use."""
    app = FastAPI(title="memory-lab serve", lifespan=_lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    add_error_handlers(app)
    _add_access_log(app)
    app.add_middleware(BodyLimit, limit=settings.limits.max_body_bytes)
    app.add_middleware(HostCheck)  # added last: the outermost, before a body is read
    _add_routes(app, settings)
    return app


def _add_access_log(app: FastAPI) -> None:
    @app.middleware("http")
    async def access_log(request: Request, call_next: Any) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        # the path only: a query string may carry text the user typed
        log.info(
            "%s %s %d %.1f ms",
            request.method,
            request.url.path,
            response.status_code,
            1000 * (time.perf_counter() - started),
        )
        return response


def _work(settings: ServeSettings, method: str, path: str, fn: Any, *args: Any) -> Any:
    """Run memory work; a failure becomes a JSON 500 naming its type (no message text)."""
    try:
        return fn(*args)
    except RequestError:
        raise
    except PoolBusy as exc:  # no PostgreSQL connection came free in time: the client retries
        log.warning("%s %s: %s", method, path, exc)
        raise RequestError(503, str(exc), {"Retry-After": "1"}) from None
    except Exception as exc:  # noqa: BLE001 - answered as JSON, logged without text
        log.error("%s %s failed: %s", method, path, type(exc).__name__)
        text = redact(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
        if settings.log_messages and text:
            log.error("  %s", text)
        detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        raise RequestError(500, f"the memory failed: {detail}") from None


def _log_turns(settings: ServeSettings, user_id: str, message: str, turns: list[dict]) -> None:
    for turn in turns:
        log.info(
            "chat user=%s memory=%s turn=%d chars=%d reply_chars=%d context_tokens=%d",
            user_id,
            turn["memory"],
            turn["turn"],
            len(message),
            len(turn["reply"]),
            turn["tokens"]["context"],
        )
        if settings.log_messages:
            log.info("  message=%r reply=%r", message, turn["reply"])


def _add_routes(app: FastAPI, settings: ServeSettings) -> None:
    limits = settings.limits
    rate = RateLimiter(limits.rate, limits.rate_window)
    page = package_files.files("memory_lab").joinpath("data/playground.html").read_text("utf-8")

    def chats() -> Chats:
        return app.state.chats

    def work(method: str, path: str, fn: Any, *args: Any) -> Any:
        return _work(settings, method, path, fn, *args)

    def admit(user_id: str, memory: str | None) -> None:
        """The user id and the memory label a request names are valid; the user within --rate."""
        check_user_id(user_id)
        if memory is not None:
            check_text(memory, "memory")
        rate.check(user_id)

    @app.get("/", response_class=HTMLResponse)
    def playground() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/memories")
    def memories() -> dict:
        return {
            "memories": chats().labels(),
            "answering_model": answering_model(settings.models.config.llm),
            "limits": {
                "max_message_chars": limits.max_message_chars,
                "rate": limits.rate,
                "rate_window_seconds": limits.rate_window,
                "max_users": limits.max_users,
            },
        }

    @app.post("/chat/{user_id}")
    def chat(user_id: str, body: ChatRequest) -> dict:
        admit(user_id, body.memory)
        message = check_message(body.message, limits)
        turns = work("POST", "/chat", chats().chat, user_id, message, body.memory)
        _log_turns(settings, user_id, message, turns)
        return {"user_id": user_id, "reply": turns[0]["reply"], "memories": turns}

    @app.get("/memory/{user_id}")
    def memory(user_id: str, memory: str | None = None, query: str | None = None) -> dict:
        admit(user_id, memory)
        if query:
            check_message(query, limits, "query")
        views = work("GET", "/memory", chats().view, user_id, memory, query)
        return {"user_id": user_id, "memories": views}

    @app.delete("/memory/{user_id}")
    def forget(user_id: str, memory: str | None = None) -> dict:
        admit(user_id, memory)
        labels = work("DELETE", "/memory", chats().delete, user_id, memory)
        log.info("forget user=%s memories=%s", user_id, ",".join(labels))
        return {"user_id": user_id, "forgotten": labels}

    @app.get("/dialogue/{user_id}")
    def dialogue(user_id: str, memory: str | None = None) -> Response:
        admit(user_id, memory)
        text = work("GET", "/dialogue", chats().dialogue, user_id, memory)
        name = f"chat-{user_id}.yaml"
        return Response(
            text,
            media_type="application/yaml",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
