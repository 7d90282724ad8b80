"""The one redaction: no password, key or token reaches a file or a message.

Everything a run writes or prints that may hold a URL, a DSN or a model's parameters goes
through here: ``run.json`` (all of it, argv, config, models, judge and errors included), failed
cells' errors and tracebacks in the records, the cache file's keys, and one-line error messages.

``redact(text)`` masks with ``MARK``:

- credentials in URLs: ``scheme://user:pass@host`` (also ``scheme://:pass@host``, a token as
  the user, percent-encoded parts) becomes ``scheme://***@host``;
- secret-named settings: keyword DSNs (``password=...``, ``password='quoted value'``), query
  strings (``?password=``, ``&sslpassword=``, ``&api_key=``, ``&token=``, ``&access_token=``,
  ``&key=``), ``'api_key': '...'`` pairs and ``Bearer ...`` tokens;
- known secret values, wherever they appear: the password parts of the run's resources
  (``--resource``, ``MEMORY_LAB_<NAME>``) and base URLs, API keys and other secret-named
  environment variables (``OPENAI_API_KEY``, ``PGPASSWORD``, ...), and values ``remember``-ed.
  Values shorter than ``MIN_SECRET_LENGTH`` are only masked where their form shows them, and a
  bare value (an opaque resource, an environment variable) only if it may be a token (8 or more
  characters, no spaces, not a path: ``_opaque``).

``redact_value`` does the same through dicts and lists and masks every value whose key is
secret-named (``is_secret_name``: ``*key``, ``*secret``, ``*token``, ``*password``, ...; never
``max_tokens``). Cache keys use the structural part only (``known=False``), so they name the
provider without credentials and do not depend on which secrets a process knows.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

MARK = "***"
MIN_SECRET_LENGTH = 4

_SECRET_WORDS = r"password|passwd|passphrase|secret|apikey|api[_-]key|credentials?"
# a setting's name that says its value is a secret (``max_tokens`` is not one)
# (not ``pwd``: the environment's PWD is the working directory)
_SECRET_NAME = re.compile(rf"(?:{_SECRET_WORDS})$|(?:^|[_.-])(?:key|token)$", re.I)
_NAME_CHARS = r"[A-Za-z0-9_.-]"
# a quoted value (its closing quote may be missing: libpq's error then quotes the rest), or a word
_VALUE = r"'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&#'\"]+"
# name=value: keyword DSNs, query strings, Python reprs; a bare key/token only in a query
_ASSIGNED = re.compile(
    rf"(?<!{_NAME_CHARS})(?P<name>{_NAME_CHARS}*(?:{_SECRET_WORDS}|[_.-](?:key|token))"
    rf"|(?<=[?&;])(?:key|token))(?P<eq>\s*=\s*)(?P<value>{_VALUE})",
    re.I,
)
# 'name': value (dict reprs, JSON text)
_PAIRED = re.compile(
    rf"(?P<q>['\"])(?P<name>{_NAME_CHARS}+)(?P=q)(?P<eq>\s*:\s*)"
    rf"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,}}\]]+)"
)
# scheme://userinfo@ (the last @ before the host's end)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/?#'\"<>]*)@")
_BEARER = re.compile(r"\b(?P<kind>bearer)(?P<sp>\s+)[A-Za-z0-9._~+/=-]{8,}", re.I)

_known: set[str] = set()
_known_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    """Whether a setting named ``name`` holds a secret (api_key, sslpassword, access_token...)."""
    return bool(_SECRET_NAME.search(name))


def _unquote(value: str) -> str:
    if value[:1] in ("'", '"'):
        closed = len(value) >= 2 and value[-1] == value[0]
        return re.sub(r"\\(.)", r"\1", value[1:-1] if closed else value[1:])
    return value


def secrets_in(value: str | None) -> set[str]:
    """The secret parts of a URL, DSN or query string: passwords and secret-named values
    (raw, unquoted and percent-decoded), never hosts or user names."""
    found: set[str] = set()
    if not value:
        return found
    for match in _USERINFO.finditer(value):
        user, sep, password = match["userinfo"].partition(":")
        found.update({password, unquote(password)} if sep else set())
    for match in _ASSIGNED.finditer(value):
        raw = match["value"]
        found.update({raw, _unquote(raw), unquote(_unquote(raw))})
    for match in _PAIRED.finditer(value):
        if is_secret_name(match["name"]):
            found.update({match["value"], _unquote(match["value"])})
    return {s for s in found if len(s) >= MIN_SECRET_LENGTH and s != MARK}


def remember(*values: str | None) -> None:
    """Mask these secret values (whole) in everything redacted from now on, in this process."""
    with _known_lock:
        _known.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH and v != MARK)


def remember_resources(resources: Mapping[str, str] | None, base_url: str | None = None) -> None:
    """Mask the secret parts of a run's resources and base URL from now on: passwords in URL
    and keyword forms; a value with neither form (an opaque token) is masked whole."""
    for value in (resources or {}).values():
        parts = secrets_in(value)
        remember(*parts)
        if not parts and "://" not in value and "=" not in value and _opaque(value):
            remember(value)
    remember(*secrets_in(base_url))


def _opaque(value: str) -> bool:
    """Whether a bare value may be a token, masked whole: not a word-sized value, a path or a
    sentence (masking those everywhere would also mask file names in run.json)."""
    return (
        len(value) >= 8
        and not any(c.isspace() for c in value)
        and value[0] not in "/~."
        and not os.path.exists(value)
    )


def known_secrets() -> set[str]:
    """Every secret value this process knows: remembered ones, secret-named environment
    variables' values, and the secret parts of other environment values (URLs, DSNs)."""
    with _known_lock:
        found = set(_known)
    for name, value in os.environ.items():
        if is_secret_name(name) and _opaque(value):
            found.add(value)
        elif "://" in value or "=" in value:
            found |= secrets_in(value)
    return found


def redact(text: str, *, extra: Iterable[str] = (), known: bool = True) -> str:
    """``text`` with every credential masked (see the module). ``extra``: more secret values;
    ``known=False``: by form only (no known values), as cache keys are."""
    if not text:
        return text
    values = set(extra) | (known_secrets() if known else set())
    for value in sorted(values, key=len, reverse=True):
        if len(value) >= MIN_SECRET_LENGTH and value != MARK:
            text = text.replace(value, MARK)
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MARK}@", text)
    text = _ASSIGNED.sub(lambda m: f"{m['name']}{m['eq']}{MARK}", text)
    text = _PAIRED.sub(_mask_pair, text)
    return _BEARER.sub(lambda m: f"{m['kind']}{m['sp']}{MARK}", text)


def _mask_pair(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]):
        return match[0]
    value = match["value"]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['q']}{match['name']}{match['q']}{match['eq']}{quote}{MARK}{quote}"


def redact_value(value: Any, *, extra: Iterable[str] = (), known: bool = True) -> Any:
    """``value`` (dicts, lists, strings, scalars) with every string redacted and every value
    under a secret-named key masked; a new object, the input is left as it was."""
    if known:  # the environment is read once for the whole value
        extra, known = set(extra) | known_secrets(), False
    extra = tuple(extra)
    if isinstance(value, str):
        return redact(value, extra=extra, known=known)
    if isinstance(value, Mapping):
        return {
            k: MARK
            if isinstance(k, str) and is_secret_name(k) and value[k] not in (None, "")
            else redact_value(value[k], extra=extra, known=known)
            for k in value
        }
    if isinstance(value, (list, tuple)):
        items = [redact_value(v, extra=extra, known=known) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    return value


def has_redacted_credentials(url: str | None) -> bool:
    """Whether a recorded URL lost its credentials to redaction (cannot be used as it is)."""
    return bool(url) and MARK in url


class RedactingFilter(logging.Filter):
    """A log handler's filter: the record's message and traceback redacted (``redact``), so no
    log line carries a credential (a URL with userinfo such as httpx's request lines, a DSN
    password, an API key)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def redact_logs() -> None:
    """Put a ``RedactingFilter`` on every log handler there is: the root's, every logger's
    (uvicorn's own) and Python's last-resort handler (what prints a library's warning when no
    handler is configured, as in ``memory-lab run``). Call it again after adding handlers."""
    loggers = [logging.getLogger(), *logging.root.manager.loggerDict.values()]
    handlers = [h for lg in loggers for h in getattr(lg, "handlers", ())]
    for handler in [*handlers, logging.lastResort]:
        if handler is not None and not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
