"""Adapters for the five classic LangChain memories.

They configure the langchain-classic classes as they are; nothing is reimplemented. Each returns
its context as a string (``return_messages=False``) under the shared ``history`` key.
"""

from __future__ import annotations

import chromadb
from chromadb.config import Settings
from langchain_chroma import Chroma
from langchain_classic.memory import (
    ConversationBufferMemory,
    ConversationBufferWindowMemory,
    ConversationSummaryBufferMemory,
    ConversationSummaryMemory,
    VectorStoreRetrieverMemory,
)

from memory_lab.memories.registry import BuildContext, register_memory
from memory_lab.prompt import INPUT_KEY, MEMORY_KEY

_COMMON = {"memory_key": MEMORY_KEY, "input_key": INPUT_KEY}


@register_memory("buffer", "Every exchange, verbatim (ConversationBufferMemory).")
def buffer(ctx: BuildContext) -> ConversationBufferMemory:
    return ConversationBufferMemory(**_COMMON, return_messages=False)


@register_memory(
    "window",
    "The last k exchanges, verbatim (ConversationBufferWindowMemory).",
    {"k": "exchanges kept (LangChain's default is 5)"},
)
def window(ctx: BuildContext, k: int = 5) -> ConversationBufferWindowMemory:
    if k < 1:
        raise ValueError("window: k must be at least 1")
    return ConversationBufferWindowMemory(**_COMMON, k=k, return_messages=False)


@register_memory(
    "summary",
    "A running summary rewritten by the memory LLM after every exchange "
    "(ConversationSummaryMemory).",
)
def summary(ctx: BuildContext) -> ConversationSummaryMemory:
    return ConversationSummaryMemory(**_COMMON, llm=ctx.memory_llm, return_messages=False)


@register_memory(
    "summary_buffer",
    "Recent exchanges verbatim up to a token limit, older ones folded into a summary "
    "(ConversationSummaryBufferMemory).",
    {"max_token_limit": "tokens of verbatim history kept before summarising"},
)
def summary_buffer(
    ctx: BuildContext, max_token_limit: int = 600
) -> ConversationSummaryBufferMemory:
    if max_token_limit < 1:
        raise ValueError("summary_buffer: max_token_limit must be positive")
    return ConversationSummaryBufferMemory(
        **_COMMON, llm=ctx.memory_llm, max_token_limit=max_token_limit, return_messages=False
    )


def _chroma_client() -> chromadb.ClientAPI:
    # In-memory and telemetry off: nothing persists between runs and nothing leaves the machine.
    return chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))


@register_memory(
    "vector",
    "The k past exchanges most similar to the input, from a Chroma store "
    "(VectorStoreRetrieverMemory).",
    {"k": "exchanges retrieved per prompt"},
)
def vector(ctx: BuildContext, k: int = 4) -> VectorStoreRetrieverMemory:
    if k < 1:
        raise ValueError("vector: k must be at least 1")
    client = _chroma_client()
    store = Chroma(
        collection_name=ctx.cell_id,
        embedding_function=ctx.embeddings,  # always ours: Chroma's default would download
        client=client,
        collection_metadata={"hnsw:space": "cosine"},
    )
    ctx.on_close(lambda: client.delete_collection(ctx.cell_id))
    retriever = store.as_retriever(search_kwargs={"k": k})
    return VectorStoreRetrieverMemory(
        retriever=retriever, memory_key=MEMORY_KEY, input_key=INPUT_KEY
    )
