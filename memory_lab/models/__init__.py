"""Models named by a string: ``PROVIDER:MODEL``, with ``offline`` as one more provider.

``resolve_chat_model(spec, role)`` returns a LangChain chat model for a role: ``reader`` (answers
the conversation), or a memory model role (``memory``, the LLM inside memories, or any other role
a memory declares, such as ``extractor``). ``offline:reader`` is the offline reader and
``offline:memory`` the offline memory model, whatever the role, resolved like ``openai:...``;
``offline`` alone is the offline model of the role (the reader's for ``reader``, else the memory
model), as run.json records it.
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from memory_lab.errors import ConfigError
from memory_lab.models.embeddings import EMBEDDING_MODEL_NAME, OfflineEmbeddings
from memory_lab.models.offline_memory import OfflineMemoryModel
from memory_lab.models.offline_reader import (
    ABSTAIN_REPLY,
    READER_RETRIEVAL_MODEL,
    OfflineReader,
)
from memory_lab.models.offline_summarizer import OfflineSummarizer
from memory_lab.models.providers import ProviderError, provider_chat_model
from memory_lab.models.spec import ModelSpec, is_offline
from memory_lab.models.tokens import TOKENIZER_NAME, count_tokens
from memory_lab.text.redact import redact_value

__all__ = [
    "ABSTAIN_REPLY",
    "EMBEDDING_MODEL_NAME",
    "TOKENIZER_NAME",
    "OfflineEmbeddings",
    "OfflineMemoryModel",
    "OfflineReader",
    "READER_RETRIEVAL_MODEL",
    "OfflineSummarizer",
    "OFFLINE_MODELS",
    "ProviderError",
    "count_tokens",
    "is_offline",
    "resolve_chat_model",
    "model_name",
    "model_params",
]


# offline:NAME -> the name run.json records for it
OFFLINE_MODELS = {"reader": "offline-reader", "memory": "offline-memory-model"}


def offline_model(spec: str, role: str) -> str:
    """The offline model a spec names: ``reader`` or ``memory`` (ProviderError otherwise)."""
    name = ModelSpec.parse(spec).name
    if not name:  # bare offline: the offline model of the role
        return "reader" if role == "reader" else "memory"
    if name not in OFFLINE_MODELS:
        known = ", ".join(f"offline:{n}" for n in OFFLINE_MODELS)
        raise ProviderError(f"unknown offline model {name!r} in {spec!r} (known: {known})")
    return name


def resolve_chat_model(
    spec: str,
    role: str,
    embeddings: OfflineEmbeddings | None = None,
    base_url: str | None = None,
    retrieval: OfflineEmbeddings | None = None,
) -> BaseChatModel:
    """Build the chat model named by ``spec`` for ``role``.

    ``offline:reader`` gives the offline reader (``embeddings``: its MiniLM, ``retrieval``: its
    e5, shared caches when given), ``offline:memory`` the offline memory model, ``offline`` the
    one of the role; ``PROVIDER:MODEL`` a real model through LangChain (ProviderError, a
    ValueError, says what to install or set when it cannot).
    """
    if not role.isidentifier() or role == "judge":
        raise ConfigError(f"model role {role!r}: use reader or a memory model role name")
    if is_offline(spec):
        if offline_model(spec, role) == "reader":
            return OfflineReader(
                embeddings=(embeddings or OfflineEmbeddings()).view(None),
                retrieval=(retrieval or OfflineEmbeddings(model=READER_RETRIEVAL_MODEL)).view(None),
            )
        return OfflineMemoryModel()
    return provider_chat_model(spec, base_url=base_url)


def model_params(spec: str, role: str, base_url: str | None = None) -> dict:
    """The parameters of the model a spec resolves to, as recorded in run.json (no secrets)."""
    model = resolve_chat_model(spec, role, embeddings=OfflineEmbeddings(), base_url=base_url)
    return redact_value(dict(model._identifying_params))


def model_name(spec: str, role: str) -> str:
    """The name recorded in run.json for the model a spec resolves to."""
    if is_offline(spec):
        return OFFLINE_MODELS[offline_model(spec, role)]
    return spec
