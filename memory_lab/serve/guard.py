"""What a request may carry: user ids, message sizes, request rates per user, body sizes."""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from memory_lab.errors import ConfigError

USER_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,62}[A-Za-z0-9])?")
USER_ID_RULE = "1-64 letters, digits, '-' or '_', starting and ending with a letter or digit"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# the names a request to the loopback address may carry in Host (serve binds 127.0.0.1 only)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]@/]+)(?::[0-9]{1,5})?")


class RequestError(Exception):
    """A request the server refuses: the HTTP status and a one-line message for the client."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True)
class Limits:
    """The server's bounds (each an option of ``memory-lab serve``)."""

    max_message_chars: int = 4000
    rate: int = 60  # requests per user per ``rate_window`` seconds
    rate_window: float = 60.0
    max_users: int = 1000
    postgres_pool: int = 10  # connections per PostgreSQL server, shared by every user
    postgres_wait: float = 5.0  # seconds a request waits for one before a 503

    @property
    def max_body_bytes(self) -> int:
        """A chat body: the message and a label. JSON may escape a character as 12 bytes (an
        astral one as two ``\\uXXXX`` escapes), so no message within ``max_message_chars`` is
        refused for its size; the characters are counted after parsing (``check_message``)."""
        return 12 * self.max_message_chars + 4096

    def __post_init__(self) -> None:
        for name in ("max_message_chars", "rate", "max_users", "postgres_pool"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if not self.rate_window > 0:
            raise ConfigError("the rate window must be a positive number of seconds")
        if not self.postgres_wait > 0:
            raise ConfigError("--postgres-wait must be a positive number of seconds")


def check_host(*hosts: str | None) -> None:
    """RequestError 421 unless the request's one Host header names the loopback (with any port,
    or none); 400 when it carries more than one (``hosts``: every Host header it carries).

    A page on another site whose name its DNS points at 127.0.0.1 (DNS rebinding) reaches this
    server from the user's browser with its own name in Host: refused, so no other site reads or
    writes the users' memories. Two Host headers are refused whatever they say (RFC 9112: a
    request with more than one is invalid): a proxy or server in front may read the other.
    """
    if len(hosts) > 1:
        raise RequestError(
            400, f"the request carries {len(hosts)} Host headers; exactly one is allowed"
        )
    host = hosts[0] if hosts else None
    match = _HOST.fullmatch(host or "")
    if match is None or match.group(1).lower() not in LOOPBACK_HOSTS:
        shown = repr(host[:80]) if host else "none"
        raise RequestError(
            421,
            f"the request is addressed to host {shown}; this server answers only requests to "
            f"{', '.join(LOOPBACK_HOSTS[:-1])} or {LOOPBACK_HOSTS[-1]} (a guard against DNS "
            "rebinding)",
        )


def check_user_id(user_id: str) -> str:
    if not USER_ID.fullmatch(user_id):
        shown = user_id if len(user_id) <= 70 else user_id[:67] + "..."
        raise RequestError(400, f"user id {shown!r} is not valid: {USER_ID_RULE}")
    return user_id


def check_text(text: str, what: str) -> str:
    """``text`` if it is well-formed Unicode; RequestError 422 for a lone surrogate.

    JSON may escape half of a UTF-16 pair alone (``"\\ud800"``); Python decodes it to a string
    no UTF-8 encoder (a response, a log, PostgreSQL) can write, so it is refused before any use.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise RequestError(
            422,
            f"{what} is not well-formed text: a lone UTF-16 surrogate (\\u{code:04x}) at "
            f"character {exc.start + 1}; send UTF-8 (an escaped pair must be complete)",
        ) from None
    return text


def check_message(message: str, limits: Limits, what: str = "message") -> str:
    check_text(message, what)
    if len(message) > limits.max_message_chars:
        raise RequestError(
            413,
            f"{what} is {len(message)} characters; the limit is {limits.max_message_chars} "
            "(--max-message-chars)",
        )
    if not message.strip():
        raise RequestError(422, f"{what} must not be empty")
    if _CONTROL.search(message):
        raise RequestError(422, f"{what} holds control characters (only tab and newline may be)")
    return message


class RateLimiter:
    """At most ``rate`` requests per user in any ``window`` seconds (a sliding window).

    Users are kept in the order they were last seen, so those idle for a whole window are at the
    front and are forgotten there as requests come: each check costs O(1) amortised, however
    many users the server has met.
    """

    def __init__(self, rate: int, window: float, clock=time.monotonic):
        self.rate = rate
        self.window = window
        self.clock = clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()  # least recently seen first
        self._lock = threading.Lock()

    def check(self, user_id: str) -> None:
        """Count one request by ``user_id``; RequestError 429 when over the rate."""
        now = self.clock()
        with self._lock:
            while self._seen:  # forget users idle for a whole window
                oldest = next(iter(self._seen.values()))
                if oldest and oldest[-1] > now - self.window:
                    break
                self._seen.popitem(last=False)
            times = self._seen.setdefault(user_id, deque())
            self._seen.move_to_end(user_id)
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.rate:
                wait = max(1, int(times[0] + self.window - now + 0.999))
                raise RequestError(
                    429,
                    f"user {user_id!r} sent {self.rate} requests in {self.window:g} seconds, "
                    f"the most allowed (--rate); retry in {wait} s",
                    {"Retry-After": str(wait)},
                )
            times.append(now)
