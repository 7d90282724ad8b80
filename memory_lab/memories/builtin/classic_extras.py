"""The rest of LangChain's classic memory family: token buffer, entity and knowledge-graph memory.

Like ``classic.py``, the factories configure the LangChain classes as they are, behind
``ClassicMemory``. Every model call goes through the memory model role (offline: the offline
memory model, which recognises these classes' own prompts), and every token count through the
run's tokenizer, so nothing downloads a tokenizer.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, get_buffer_string
from langchain_core.outputs import ChatResult

from memory_lab.memories.builtin.classic import (
    LANGCHAIN_KEYS,
    ClassicMemory,
    message_count,
    message_texts,
)
from memory_lab.memories.protocol import Exchange, Item, MemoryResources, Query, Recall
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.models.prompt import INPUT_KEY, MEMORY_KEY


class BufferTokenCounter(BaseChatModel):
    """The ``llm`` a token buffer counts with: its buffer as the prompt holds it, in our tokens.

    ``ConversationTokenBufferMemory`` calls no model; it only asks its ``llm`` for token counts.
    This one counts the rendered buffer (``Human: ...`` lines joined) with the run's tokenizer,
    so the budget is the budget of the context the answering model sees. It never answers.
    """

    count: Callable[[str], int]

    def get_num_tokens_from_messages(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        return self.count(get_buffer_string(list(messages)))

    def get_num_tokens(self, text: str) -> int:
        return self.count(text)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the token buffer's counter counts tokens; it never answers")

    @property
    def _llm_type(self) -> str:
        return "memory-lab-buffer-token-counter"


@register_memory(
    "token_buffer",
    "The most recent exchanges, verbatim, within a token budget (ConversationTokenBufferMemory).",
    {"max_token_limit": ParamDoc("tokens of verbatim history kept", min=1)},
)
def token_buffer(res: MemoryResources, max_token_limit: int = 600) -> ClassicMemory:
    from langchain_classic.memory import ConversationTokenBufferMemory

    memory = ConversationTokenBufferMemory(
        **LANGCHAIN_KEYS,
        llm=BufferTokenCounter(count=res.count_tokens),
        max_token_limit=max_token_limit,
        return_messages=False,
    )
    return ClassicMemory(memory, "token_buffer", "verbatim", message_count)


class EntityMemory(ClassicMemory):
    """``ConversationEntityMemory`` driven the way a ``ConversationChain`` drives it.

    The class finds the entities of an input when its context is loaded (one LLM call) and
    rewrites their summaries when the exchange is saved (one call per entity). A run loads the
    context for a user turn and then saves that exchange, so the entities found for the turn are
    the ones summarised, with one extraction per turn as in a chain. A recall for anything else
    (a probe) puts the entity cache back as it was: asking never changes what is summarised.
    The context is each recalled entity's summary (``Name: summary``), then the last ``k``
    exchanges, as the class's own prompt shows them under "Context" and "Current conversation".
    """

    _extracted: tuple[str, list[str]] = ("", [])

    def recall(self, query: Query) -> Recall:
        before = list(self.inner.entity_cache)
        values = self.inner.load_memory_variables({INPUT_KEY: query.text})
        self._extracted = (query.text, list(self.inner.entity_cache))
        self.inner.entity_cache = before
        items = [
            Item(f"{name}: {summary}", (), "fact")
            for name, summary in values["entities"].items()
            if summary
        ]
        if values[MEMORY_KEY]:
            items.append(Item(values[MEMORY_KEY], (), "verbatim"))
        return Recall(tuple(items))

    def observe(self, exchange: Exchange) -> None:
        text, entities = self._extracted
        if not exchange.user:
            self.inner.entity_cache = []
        elif text == exchange.user:
            self.inner.entity_cache = entities
        else:  # no context was loaded for this turn: find its entities as a chain would
            self.inner.load_memory_variables({INPUT_KEY: exchange.user})
        super().observe(exchange)


def entity_summaries(store: Any) -> dict[str, str]:
    """Every entity and its summary in an in-memory or SQLite entity store."""
    if hasattr(store, "store"):
        return {k: v for k, v in store.store.items() if v}
    rows = store.conn.execute(f'SELECT key, value FROM "{store.full_table_name}"')  # noqa: S608
    return {key: value for key, value in rows.fetchall() if value}


@register_memory(
    "entity",
    "A summary per named entity, rewritten by the memory LLM when the entity is mentioned, "
    "plus the last k exchanges (ConversationEntityMemory).",
    {
        "k": ParamDoc("recent exchanges shown and read for context", min=1),
        "store": ParamDoc("entity store: in memory, or SQLite in the cell's folder"),
    },
    roles=("memory",),
)
def entity(
    res: MemoryResources, k: int = 3, store: Literal["memory", "sqlite"] = "memory"
) -> EntityMemory:
    from langchain_classic.memory import ConversationEntityMemory
    from langchain_classic.memory.entity import InMemoryEntityStore, SQLiteEntityStore

    if store == "sqlite":
        folder = res.cell_dir
        if folder is None:  # no run folder (inspector): a temporary one, removed on close
            folder = tempfile.mkdtemp(prefix="memory-lab-entities-")
            res.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
        Path(folder).mkdir(parents=True, exist_ok=True)
        entity_store: Any = SQLiteEntityStore(db_file=str(Path(folder) / "entities.db"))
        res.on_close(entity_store.conn.close)
    else:
        entity_store = InMemoryEntityStore()
    memory = ConversationEntityMemory(
        llm=res.memory_llm,
        input_key=INPUT_KEY,
        chat_history_key=MEMORY_KEY,
        k=k,
        entity_store=entity_store,
        return_messages=False,
    )
    return EntityMemory(
        memory,
        "entity",
        "fact",
        lambda m: {"entities": entity_summaries(m.entity_store), **message_count(m)},
        lambda m: [
            *(f"{name}: {text}" for name, text in entity_summaries(m.entity_store).items()),
            *message_texts(m.buffer[-m.k * 2 :]),  # the exchanges it shows and reads
        ],
    )


def knowledge_triples(graph: Any) -> list[list[str]]:
    """The graph's triples as ``[subject, predicate, object]``, in the order they were added."""
    return [[subject, relation, obj] for subject, obj, relation in graph.get_triples()]


@register_memory(
    "kg",
    "Knowledge triples the memory LLM extracts from each user line, recalled for the "
    "entities the input names (ConversationKGMemory, langchain-community, networkx).",
    {"k": ParamDoc("recent exchanges the extraction prompts show", min=1)},
    roles=("memory",),
)
def kg(res: MemoryResources, k: int = 2) -> ClassicMemory:
    from langchain_community.memory.kg import ConversationKGMemory

    memory = ConversationKGMemory(**LANGCHAIN_KEYS, llm=res.memory_llm, k=k, return_messages=False)
    return ClassicMemory(
        memory,
        "kg",
        "fact",
        lambda m: {"triples": knowledge_triples(m.kg), **message_count(m)},
        lambda m: [
            *(" ".join(triple) for triple in knowledge_triples(m.kg)),
            *message_texts(m.chat_memory.messages[-m.k * 2 :]),  # what its prompts read
        ],
    )
