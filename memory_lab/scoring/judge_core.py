"""The judge core: how every judge asks its model and keeps what it said, written once.

Every judge stands on it as a ``JudgeProtocol``: the probe judge of ``memory-lab run
--judge`` (``JudgeTemplate``, ``scoring/judge.py``) and the judges of the dataset scorers that
work on finished runs (``results/``), which grade with a benchmark's own prompts, read from the
user's checkout of it (``scoring/prompt_source.py``). A protocol says only what is its own:
its prompt text(s) (``prompts``, by name), how they are filled for one verdict (``fill``) and
how a reply is read (``read``: what it says and its score). The core does the rest:

- **the model** (``judge_models``): ``PROVIDER:MODEL`` built by the providers
  (``provider_chat_model``, under the client settings in force: a run's request timeout and
  retries), at most ``max_tokens`` out where asked, through the run's call cache
  (``models/cache.py``; run ``i`` > 0 of a repeated judge under a key of its own,
  ``RunKeyedCache``); ``offline`` is the protocol's own deterministic judge, never cached;
- **the call** (``Judge.ask``): a provider that cannot be reached or refuses the request is a
  one-line ``ProviderFailure`` naming the model and its base URL (``invoke_judge``); the reply's
  text (``reply_text``), its usage (the provider's, else counted with the bundled tokenizer) and
  whether the cache answered it, charged to the judge's ``Meter`` (``models/accounting.py``);
- **the verdict** (``Judge.verdict``): a ``JudgeVerdict`` record (judge model, the protocol's
  prompt SHA-256, raw output, what it reads as, its score, tokens, cache hit), written as JSON by
  ``to_dict``;
- **the bill** (``Judge.account``): what a judge's side file records of it (``JudgeAccount``:
  the model, each protocol's prompt SHA-256, calls and cache hits, tokens in and out, and their
  estimated cost at the model's list price);
- **reply parsing** shared by protocols: ``reply_text`` and ``json_object`` (the first JSON
  object in a reply that has a key, read leniently but as the object says, never a key mentioned
  in prose before it).

A new judge is one module: a ``JudgeProtocol`` subclass (its ``prompts``, ``fill`` and
``read``), asked with ``Judge.verdict(protocol, protocol.fill(...))`` by a ``Judge`` from
``judge_models`` (after a run: ``results.judge_costs.RunJudging.judge``, which brings the run's
cache, client settings and prices).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from memory_lab.errors import ConfigError, ProviderFailure
from memory_lab.models.accounting import Meter, Price, Usage
from memory_lab.models.spec import OFFLINE
from memory_lab.models.tokens import count_tokens
from memory_lab.text.redact import redact

# A prompt as a judge receives it: one text, or chat messages ({"role": ..., "content": ...}).
JudgePrompt = str | list[dict[str, str]]

# What providers' clients raise when the provider cannot be reached or refuses a request (the
# clients' modules as imported once a model of theirs is built), besides the socket's errors.
_PROVIDER_ERRORS = (
    ("openai", "APIError"),
    ("anthropic", "APIError"),
    ("httpx", "HTTPError"),
    ("httpx2", "HTTPError"),
    ("ollama", "ResponseError"),
    ("ollama", "RequestError"),
)


# ------------------------------------------------------------------------------ the call


def provider_errors() -> tuple[type[BaseException], ...]:
    """What a provider's client raises when the provider cannot be reached or refuses a request:
    the API errors of the clients imported so far, and the socket's connection errors."""
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, name in _PROVIDER_ERRORS:
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            found.append(kind)
    return tuple(found)


def model_name(model: Any) -> str:
    """A chat model's name as its client holds it (else its class name)."""
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return str(name) if isinstance(name, str) and name else type(model).__name__


def model_label(model: Any) -> str:
    """A chat model's name and base URL (credentials redacted), for a message."""
    urls = (getattr(model, a, None) for a in ("openai_api_base", "base_url", "anthropic_api_url"))
    url = next((str(u) for u in urls if u), None)
    where = f"at {redact(url)}" if url else "at its provider's default URL"
    return f"{model_name(model)} {where}"


def invoke_judge(model: Any, prompt: Any) -> Any:
    """``model.invoke(prompt)``; ProviderFailure, one line naming the model and its base URL,
    when its provider cannot be reached or refuses the request."""
    try:
        return model.invoke(prompt)
    except provider_errors() as exc:
        detail = " ".join(redact(str(exc)).split())[:300] or type(exc).__name__
        raise ProviderFailure(
            f"judge {model_label(model)}: the provider could not be reached or refused the "
            f"request: {detail}"
        ) from exc
    except (json.JSONDecodeError, IndexError, KeyError) as exc:  # the client reading its reply
        detail = " ".join(redact(str(exc)).split())[:200] or type(exc).__name__
        raise ProviderFailure(
            f"judge {model_label(model)}: the provider's reply could not be read (not JSON, or "
            f"no choice in it: {type(exc).__name__}: {detail})"
        ) from exc


def reply_text(message: Any) -> str:
    """The text of a chat model's reply: its ``content`` as a string, or its text parts joined
    (a part is a string or a ``{"text": ...}`` block)."""
    content = getattr(message, "content", message)
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) if isinstance(p, dict) else str(p)
            for p in content
        )
    return str(content)


def prompt_text(prompt: JudgePrompt) -> str:
    """A prompt's text, for counting its tokens: the text, or the messages' contents a line
    each."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(m.get("content", "")) for m in prompt)


# ------------------------------------------------------------------------------ reply parsing

_DECODER = json.JSONDecoder()
# A lenient object's tokens: strings (cut short: to the end), structure, bare words and numbers.
_TOKEN = re.compile(
    r""""(?:[^"\\]|\\.?)*(?:"|\Z)|'(?:[^'\\]|\\.?)*(?:'|\Z)|[{}\[\]:,]|[^\s"'{}\[\]:,]+""", re.S
)
_MISSING = object()


def _unquoted(token: str) -> str:
    if token[:1] in "\"'":
        closed = len(token) > 1 and token.endswith(token[0])
        return token[1:-1] if closed else token[1:]
    return token


def _value(token: str) -> Any:
    """A lenient object's scalar value: a number where it reads as one, else its text."""
    text = _unquoted(token)
    try:
        return float(text)
    except ValueError:
        return text


def _lenient_field(text: str, start: int, key: str) -> tuple[Any, int]:
    """(the scalar value of ``key`` at the top level of the object opening at ``start``, or
    ``_MISSING``; where the object ends, or the text's end when it is cut short). Keys may be
    quoted either way or bare; strings, nested objects and arrays are stepped over whole."""
    depth, state, name, found = 0, "key", None, _MISSING
    for match in _TOKEN.finditer(text, start):
        token = match.group()
        if token in ("{", "["):
            depth += 1
            state = "key" if depth == 1 else state
            continue
        if token in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return found, match.end()
            state = "after" if depth == 1 else state
            continue
        if depth != 1:
            continue
        if token == ",":
            state = "key"
        elif token == ":":
            state = "value" if state == "colon" else state
        elif state == "key":
            name, state = _unquoted(token), "colon"
        elif state == "value":
            if name == key:
                found = _value(token)
            state = "after"
    return found, len(text)


def json_object(text: str, key: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that has ``key`` at its top level, as ``json_repair``
    would recover it but reading only the object's own field: a whole object is read as JSON
    (braces inside its strings, nested objects: as JSON reads them); failing any, the first
    object cut short or malformed (single quotes, bare keys) that has ``key``, read field by
    field, as ``{key: value}``. A key mentioned in prose before the object, inside one of its
    strings or in a nested object is never read. None when no object has it."""
    partial = None
    pos = 0
    while (start := text.find("{", pos)) >= 0:
        value, end = _lenient_field(text, start, key)
        try:
            whole, _ = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            whole = None
        if isinstance(whole, dict) and key in whole:
            return whole
        if whole is None and partial is None and value is not _MISSING:
            partial = {key: value}
        pos = max(end, start + 1)
    return partial


# ------------------------------------------------------------------------------ protocols


def prompts_sha256(prompts: Mapping[str, str]) -> str:
    """The SHA-256 naming a protocol's prompt text(s): of the text itself when there is one
    (as run.json names a grading prompt), else of the named texts as canonical JSON."""
    texts = dict(prompts)
    if len(texts) == 1:
        data = next(iter(texts.values()))
    else:
        data = json.dumps(texts, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class JudgeProtocol(ABC):
    """One kind of judge: its prompt text(s) (``prompts``, by name: what ``prompt_sha256``
    names), how they are filled for one verdict (``fill``, with the protocol's own arguments,
    into a text or chat messages) and how a reply is read (``read``: what it says, as the
    protocol reads it, and its score, None when unreadable). ``empty_reply`` is what an empty
    reply reads as (a benchmark's own client may return a placeholder such as ``(empty)``)."""

    name: ClassVar[str] = "judge"
    empty_reply: ClassVar[str] = ""

    @property
    @abstractmethod
    def prompts(self) -> Mapping[str, str]:
        """The protocol's prompt texts by name."""

    @abstractmethod
    def fill(self, *args: Any, **kwargs: Any) -> JudgePrompt:
        """The prompt for one verdict, exactly as the judge receives it."""

    @abstractmethod
    def read(self, raw: str) -> tuple[Any, float | None]:
        """(what the reply says, its score; None when it cannot be read)."""

    @property
    def prompt_sha256(self) -> str:
        return prompts_sha256(self.prompts)


# ------------------------------------------------------------------------------ records


@dataclass(frozen=True)
class JudgeReply:
    """One call's reply: its text (stripped), its usage and whether the cache answered it."""

    raw: str
    input_tokens: int
    output_tokens: int
    cache_hit: bool = False


@dataclass(frozen=True)
class JudgeVerdict:
    """One verdict as a record: the judge model (``PROVIDER:MODEL``, ``offline`` or the client's
    model name), the SHA-256 of the protocol's prompt text(s), the raw output, what the protocol
    reads it as (``parsed``: a label, a JSON object, a yes/no; not written) and its score (None:
    unreadable), with the call's tokens and whether the cache answered it."""

    judge: str
    prompt_sha256: str
    raw: str
    parsed: Any
    score: float | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_hit: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The record as written with a run's results (JSON)."""
        return {
            "judge": self.judge,
            "prompt_sha256": self.prompt_sha256,
            "raw": self.raw,
            "score": self.score,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_hit": self.cache_hit,
        }


@dataclass(frozen=True)
class JudgeAccount:
    """What a judge's side file records of it: the judge model, each protocol's prompt SHA-256
    (by protocol name), what its calls used (``usage``: calls, ``cache_hits`` of them answered
    by the call cache, the rest requests to the provider; tokens in and out, cache hits at their
    original usage, as a run's estimate counts them), the list price used (None: the price table
    has no entry for the model) and the estimated cost at it, and whether calls went through a
    cache."""

    judge: str
    prompts: dict[str, str]
    usage: Usage
    price: Price | None = None
    price_model: str | None = None
    price_source: str | None = None
    cached: bool = False

    @property
    def requests(self) -> int:
        """The calls the provider was sent (the cache answered the rest)."""
        return self.usage.llm_calls - self.usage.cache_hits

    @property
    def est_cost_usd(self) -> float | None:
        if self.price is None:
            return None
        return self.price.cost(self.usage.input_tokens, self.usage.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        price = None
        if self.price is not None:
            price = {
                "model": self.price_model,
                "input_per_mtok": self.price.input_per_mtok,
                "output_per_mtok": self.price.output_per_mtok,
                "source": self.price_source,
            }
        return {
            "judge": self.judge,
            "prompt_sha256": self.prompts,
            "calls": self.usage.llm_calls,
            "cache_hits": self.usage.cache_hits,
            "requests": self.requests,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
            "est_cost_usd": self.est_cost_usd,
            "price": price,
            "cached": self.cached,
        }

    def describe(self) -> str:
        """One line: the judge, its calls and requests, its tokens and estimated cost."""
        cost = self.est_cost_usd
        if self.price_model == "local":  # accounting.LOCAL_PRICE_MODEL
            priced = "local (a model on your own machine or server: priced at 0)"
        elif cost is not None:
            priced = f"est. ${cost:.4f} ({self.price_model} list price)"
        else:
            priced = "no list price for this model"
        cache = (
            f"{self.usage.cache_hits} from the call cache, {self.requests} sent"
            if self.cached
            else f"{self.requests} sent, no call cache"
        )
        used = self.usage
        return (
            f"judge {self.judge}: {used.llm_calls} call(s), {cache}; {used.input_tokens:,} tokens "
            f"in, {used.output_tokens:,} out; {priced}"
        )


# ------------------------------------------------------------------------------ the judge


@dataclass
class Judge:
    """A judge model (``model``, named ``name``: its model string) and what its calls cost:
    ``ask`` sends one prompt, ``verdict`` reads the reply by a protocol; every call's usage goes
    on ``meter`` (None: not metered here); ``price`` (with its table entry's name and source) is
    what ``account`` prices the tokens at."""

    model: Any
    name: str = ""
    meter: Meter | None = field(default_factory=Meter)
    price: Price | None = None
    price_model: str | None = None
    price_source: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            self.name = model_name(self.model)

    @classmethod
    def of(cls, model: Any) -> Judge:
        """``model`` as a judge (a Judge stays as it is)."""
        return model if isinstance(model, Judge) else cls(model)

    def ask(self, prompt: JudgePrompt) -> JudgeReply:
        """One call: the reply's text, its usage (the provider's, else counted with the bundled
        tokenizer) and whether the cache answered it; charged to ``meter``."""
        from memory_lab.models.cache import is_cache_hit

        message = invoke_judge(self.model, prompt)
        raw = reply_text(message).strip()
        usage = getattr(message, "usage_metadata", None) or {}
        if usage:
            input_tokens = int(usage.get("input_tokens", 0))
            output_tokens = int(usage.get("output_tokens", 0))
        else:
            input_tokens, output_tokens = count_tokens(prompt_text(prompt)), count_tokens(raw)
        hit = is_cache_hit(message)
        if self.meter is not None:
            self.meter.add_llm(input_tokens, output_tokens, hit)
        return JudgeReply(raw, input_tokens, output_tokens, hit)

    def verdict(self, protocol: JudgeProtocol, prompt: JudgePrompt) -> JudgeVerdict:
        """Ask ``prompt`` (``protocol.fill``'s) and read the reply by ``protocol``."""
        reply = self.ask(prompt)
        raw = reply.raw or protocol.empty_reply
        parsed, score = protocol.read(raw)
        return JudgeVerdict(
            self.name,
            protocol.prompt_sha256,
            raw,
            parsed,
            score,
            reply.input_tokens,
            reply.output_tokens,
            reply.cache_hit,
        )

    def usage(self) -> Usage:
        """What the calls so far used (nothing when not metered)."""
        return self.meter.peek() if self.meter is not None else Usage()

    def account(self, protocols: Sequence[JudgeProtocol]) -> JudgeAccount:
        """The judge's account of every call so far, naming ``protocols``' prompts."""
        cache = getattr(self.model, "cache", None)
        prompts = {p.name: p.prompt_sha256 for p in protocols}
        priced = (self.price, self.price_model, self.price_source)
        cached = cache is not None and cache is not False
        return JudgeAccount(self.name, prompts, self.usage(), *priced, cached=cached)


def judge_models(
    spec: str,
    runs: int = 1,
    *,
    base_url: str | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    cache: Any = None,
    callbacks: list[Any] | None = None,
    offline: Callable[[], Any] | None = None,
) -> list[Any]:
    """``runs`` chat models judging as ``spec``, each sending its calls' events to
    ``callbacks``.

    ``offline``: the protocol's deterministic judge (``offline()``), the same model for every
    run, never cached (ConfigError when the protocol has none). A provider's model
    (``PROVIDER:MODEL``; ProviderError when it cannot be built) at ``temperature``, at most
    ``max_tokens`` out where its client takes a limit; run 0 through ``cache`` as is (the key a
    single judge call always had), run ``i`` > 0 a shallow copy of the same client through
    ``RunKeyedCache(cache, i)``, so repeated runs are distinct calls a rerun still finds.
    """
    if spec == OFFLINE:
        if offline is None:
            raise ConfigError(f"--judge {spec}: this judge needs a model (PROVIDER:MODEL)")
        base = offline()
        base.callbacks = list(callbacks or [])
        return [base] * runs
    from memory_lab.models.cache import RunKeyedCache, cached_chat_model
    from memory_lab.models.providers import provider_chat_model

    base = provider_chat_model(spec, base_url=base_url, temperature=temperature)
    if max_tokens is not None and "max_tokens" in type(base).model_fields:
        base.max_tokens = max_tokens
    base.callbacks = list(callbacks or [])
    if cache is None:
        return [base] * runs
    models = []
    for run in range(runs):
        model = base if run == 0 else base.model_copy()
        models.append(cached_chat_model(model, cache if run == 0 else RunKeyedCache(cache, run)))
    return models
