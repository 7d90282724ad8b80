"""Real model providers through LangChain: ``openai:gpt-4o-mini``, ``ollama:llama3.1``, ...

A model string is ``PROVIDER:MODEL``. Chat models are built with LangChain's
``init_chat_model``; OpenAI-compatible servers are reached with a base URL (the ``base_url``
argument or ``OPENAI_BASE_URL``), shown in messages with its credentials redacted. Every model
counts tokens with the bundled offline tokenizer, so counting never downloads anything and never
raises for a model name a provider's own counter does not know (``ChatOpenAI`` raises for
non-OpenAI names behind a compatible URL). Under a run's ``--rpm``/``--tpm`` every client built
here waits for the run's shared bucket before each request (``throttle.py``).

Clients are built one at a time (``_BUILD_LOCK``): building one imports modules on first use
(the provider's package, its HTTP stack), and threads importing the same packages at once can
see a partially initialized module (``module 'httpx' has no attribute 'URL'``).
``prepare_clients`` does those imports in the calling thread before cells start in threads.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from memory_lab.errors import ConfigError
from memory_lab.models.deadline import deadline_client
from memory_lab.models.spec import ClientSettings, ModelSpec
from memory_lab.models.throttle import ChatRateLimiter, Throttle
from memory_lab.models.tokens import count_message_tokens, token_ids
from memory_lab.text.redact import redact

# provider -> (python package, pip package, API-key variable or None)
PROVIDERS: dict[str, tuple[str, str, str | None]] = {
    "openai": ("langchain_openai", "langchain-openai", "OPENAI_API_KEY"),
    "anthropic": ("langchain_anthropic", "langchain-anthropic", "ANTHROPIC_API_KEY"),
    "ollama": ("langchain_ollama", "langchain-ollama", None),
}
EXTRAS = ("ollama",)  # providers with an extra of memory-lab's own (pinned in constraints.txt)


# Client construction imports lazily; one build at a time keeps threads off half-imported modules.
_BUILD_LOCK = threading.RLock()
_PREPARED: set[tuple[tuple[str, ...], str | None]] = set()
# Modules LangChain imports on a chat model's first call (tracer set-up), imported up front; and
# httpx, which openai's client reads from sys.modules (no import lock): a thread importing it
# (chromadb does) must not expose a half-imported module to a thread building a client.
_FIRST_CALL_MODULES = (
    "httpx",
    "langchain_core.env",
    "langchain_core.tracers.context",
    "langchain_core.tracers.langchain",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
    "langchain_core.messages.block_translators.langchain_v0",
)


# Sent as the key to an OpenAI-compatible base URL when OPENAI_API_KEY is unset or empty.
KEYLESS = "not-needed"


class ProviderError(ConfigError):
    """A model string that cannot be served here: one line saying what to install or set."""


def split_model(spec: str) -> tuple[str, str]:
    """``openai:gpt-4o-mini`` -> (``openai``, ``gpt-4o-mini``); ProviderError otherwise."""
    try:
        parsed = ModelSpec.parse(spec)
    except ValueError as exc:
        raise ProviderError(str(exc)) from None
    if parsed.provider not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise ProviderError(
            f"unknown provider {parsed.provider!r} in {spec!r} (known: offline, {known})"
        )
    return parsed.provider, parsed.name


# The settings of the run this process executes (``client_settings``): a run's spec sets them in
# its driver and in each worker; None outside a run (then the environment's, as documented).
_ACTIVE: ClientSettings | None = None


@contextmanager
def client_settings(settings: ClientSettings) -> Iterator[ClientSettings]:
    """Clients built in this process (any thread) use ``settings`` until the block ends."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, settings
    try:
        yield settings
    finally:
        _ACTIVE = previous


def use_client_settings(settings: ClientSettings) -> None:
    """Set this process's client settings for good (a worker process or Ray worker)."""
    global _ACTIVE
    _ACTIVE = settings


def current_client_settings() -> ClientSettings:
    """The running run's settings, else the environment's (a client built outside a run)."""
    return _ACTIVE if _ACTIVE is not None else ClientSettings.from_env()


def _throttle(settings: ClientSettings, provider: str) -> Throttle | None:
    """The run's rate limits for ``provider``'s clients (``--rpm``/``--tpm``), None without."""
    if settings.limits is None:
        return None
    throttle = Throttle(settings.limits, provider)
    return throttle if throttle.active else None


def _check_ready(provider: str, base_url: str | None) -> None:
    module, pip_name, key = PROVIDERS[provider]
    try:
        import_module(module)
    except ImportError:
        extra = f" (or pip install 'memory-lab[{provider}]')" if provider in EXTRAS else ""
        raise ProviderError(
            f"provider {provider!r} needs the package {pip_name}: pip install {pip_name}{extra}"
        ) from None
    if key and not os.environ.get(key, "").strip():  # unset, empty or blank
        if provider == "openai" and base_url:
            # OpenAI-compatible servers (vLLM, llama.cpp, LM Studio) often need no key: keyless
            os.environ[key] = KEYLESS
            return
        state = "is empty" if key in os.environ else "is not set"
        raise ProviderError(f"provider {provider!r} needs an API key: set {key} (it {state})")


def base_url_for(provider: str, base_url: str | None) -> str | None:
    """The explicit base URL, else ``OPENAI_BASE_URL`` for OpenAI-compatible providers."""
    if base_url:
        return base_url
    return os.environ.get("OPENAI_BASE_URL") if provider == "openai" else None


def check_provider(spec: str, base_url: str | None = None) -> None:
    """Raise ProviderError now if ``spec`` could not be served (package or key missing, or
    nothing listening at its base URL)."""
    provider, _ = split_model(spec)
    url = base_url_for(provider, base_url)
    _check_ready(provider, url)
    check_reachable(url)


def _count_with_offline_tokenizer(model: Any) -> Any:
    """Make ``model`` count tokens with the bundled tokenizer (no downloads, never raises)."""
    object.__setattr__(model, "custom_get_token_ids", token_ids)
    object.__setattr__(
        model,
        "get_num_tokens_from_messages",
        lambda messages, tools=None: count_message_tokens(messages),
    )
    object.__setattr__(model, "get_num_tokens", lambda text: len(token_ids(text)))
    return model


def check_reachable(url: str | None, timeout: float = 3.0) -> None:
    """ProviderError now if nothing listens at ``url`` (checked once, before a run starts)."""
    if not url:
        return
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.hostname:
        raise ProviderError(f"base URL {redact(url)!r} has no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise ProviderError(f"cannot reach the provider at {redact(url)}: {exc}") from None


def provider_chat_model(
    spec: str,
    *,
    base_url: str | None = None,
    temperature: float = 0.0,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> BaseChatModel:
    """A LangChain chat model for ``PROVIDER:MODEL``; ProviderError if it cannot be built.

    ``timeout`` and ``max_retries`` not given are the run's (``current_client_settings``)."""
    provider, model = split_model(spec)
    url = base_url_for(provider, base_url)
    settings = current_client_settings()
    kwargs: dict[str, Any] = {
        "temperature": temperature,
        "timeout": settings.timeout if timeout is None else timeout,
    }
    if provider in ("openai", "anthropic"):
        kwargs["max_retries"] = settings.max_retries if max_retries is None else max_retries
    throttle = _throttle(settings, provider)
    if provider == "openai":  # a total deadline per response, a trickled body's too
        kwargs["http_client"] = deadline_client(kwargs["timeout"], throttle)
    elif throttle is not None:  # the run's rpm, once per call (LangChain's hook)
        kwargs["rate_limiter"] = ChatRateLimiter(throttle)
    if url:
        kwargs["base_url"] = url
    with _BUILD_LOCK:
        _check_ready(provider, url)
        from langchain.chat_models import init_chat_model  # langchain-classic's is deprecated

        chat = init_chat_model(model, model_provider=provider, **kwargs)
    return _count_with_offline_tokenizer(chat)


def json_mode(chat: Any) -> Any:
    """The chat model asked for a JSON object where its provider has such a mode (OpenAI's
    ``response_format``, as the OpenAI-compatible clients of Graphiti and Hindsight ask);
    else as it is."""
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        return chat
    if isinstance(chat, BaseChatOpenAI):
        return chat.bind(response_format={"type": "json_object"})
    return chat


def provider_embeddings(
    spec: str,
    *,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> Embeddings:
    """LangChain embeddings for ``PROVIDER:MODEL`` (OpenAI-compatible or Ollama); ``timeout``
    and ``max_retries`` not given are the run's (``current_client_settings``)."""
    settings = current_client_settings()
    settings = dataclasses.replace(
        settings,
        timeout=settings.timeout if timeout is None else timeout,
        max_retries=settings.max_retries if max_retries is None else max_retries,
    )
    with _BUILD_LOCK:
        return _build_embeddings(spec, base_url, settings)


def _build_embeddings(spec: str, base_url: str | None, settings: ClientSettings) -> Embeddings:
    provider, model = split_model(spec)
    url = base_url_for(provider, base_url)
    _check_ready(provider, url)
    if provider == "openai":
        from langchain_openai import OpenAIEmbeddings

        kwargs: dict[str, Any] = {
            "model": model,
            "max_retries": settings.max_retries,
            "request_timeout": settings.timeout,
            # a total deadline per response; the run's rate limits
            "http_client": deadline_client(settings.timeout, _throttle(settings, provider)),
        }
        if url:
            kwargs["base_url"] = url
            kwargs["check_embedding_ctx_length"] = False  # would fetch a tokenizer for the name
        return OpenAIEmbeddings(**kwargs)
    if provider == "ollama":
        from langchain_ollama import OllamaEmbeddings

        return OllamaEmbeddings(model=model, **({"base_url": url} if url else {}))
    raise ProviderError(f"provider {provider!r} has no embeddings here (use openai: or ollama:)")


def prepare_clients(specs: Iterable[str], base_url: str | None = None) -> None:
    """Import, in this thread, what building and calling these models' clients imports.

    Called before cells start in threads (``--concurrency``, probes asked at once) and once per
    worker process; builds a throwaway client per spec (no request is made). Specs that cannot
    be built are left to fail in their cells, with the usual one-line error.
    """
    wanted = (tuple(dict.fromkeys(specs)), base_url)
    with _BUILD_LOCK:
        if wanted in _PREPARED:
            return
        for name in _FIRST_CALL_MODULES:
            try:
                import_module(name)
            except ImportError:
                pass
        for spec in wanted[0]:
            try:
                provider_chat_model(spec, base_url=base_url)
                if split_model(spec)[0] in ("openai", "ollama"):
                    provider_embeddings(spec, base_url=base_url)
            except Exception:  # noqa: BLE001, S110 - the cell that needs it reports it
                pass
        _PREPARED.add(wanted)


class MeteredEmbeddings(Embeddings):
    """A provider's embeddings with a per-run cache and token accounting.

    Like the offline embeddings, ``on_embed`` receives the tokens of every text a caller asks to
    embed (counted with the bundled tokenizer; providers bill per text). ``view`` shares the
    cache with another meter.
    """

    def __init__(self, inner: Embeddings, on_embed: Any = None):
        self.inner = inner
        self.on_embed = on_embed
        self._cache: dict[str, list[float]] = {}

    def _vectors(self, texts: list[str], query: bool) -> list[list[float]]:
        if self.on_embed is not None:
            self.on_embed(sum(len(token_ids(t)) for t in texts))
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            if query and len(missing) == 1:
                vectors = [self.inner.embed_query(missing[0])]
            else:
                vectors = self.inner.embed_documents(missing)
            self._cache.update(zip(missing, vectors, strict=True))
        return [self._cache[t] for t in texts]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._vectors(list(texts), query=False)

    def embed_query(self, text: str) -> list[float]:
        return self._vectors([text], query=True)[0]

    def view(self, on_embed: Any) -> MeteredEmbeddings:
        other = MeteredEmbeddings(self.inner, on_embed)
        other._cache = self._cache
        return other
