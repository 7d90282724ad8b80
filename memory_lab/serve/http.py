"""What every memory-lab web app shares: JSON errors, the Host check, the error handlers.

``serve`` (the chat playground) and ``view`` (the results browser) both answer on 127.0.0.1
only, refuse a request addressed to any other host (``guard.check_host``: DNS rebinding) and
answer every refusal and error as ``{"error": ..., "status": ...}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memory_lab.serve.guard import RequestError, check_host


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status, headers=headers)


def validation_message(exc: RequestValidationError) -> str:
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    if first.get("type") == "json_invalid":
        return "the body is not valid JSON"
    if first.get("type") == "missing":
        return f"{where}: required"
    if first.get("type") == "extra_forbidden":
        return f"{where}: unknown field (allowed: message, memory)"
    return f"{where}: {first.get('msg', 'invalid')}"


class HostCheck:
    """Refuse (421) an HTTP request whose Host header is not the loopback (``check_host``), and
    (400) one with more than one Host header, whichever of them names the loopback."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            hosts = [v for k, v in scope.get("headers") or [] if k.lower() == b"host"]
            try:
                check_host(*(h.decode("latin-1") for h in hosts))
            except RequestError as exc:
                await error_response(exc.status, exc.message)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def add_error_handlers(app: FastAPI) -> None:
    """Every refusal and error as one JSON shape (``error_response``)."""

    @app.exception_handler(RequestError)
    async def refused(request: Request, exc: RequestError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = "no such route" if exc.status_code == 404 else str(exc.detail)
        return error_response(exc.status_code, message)
