"""``rag``: the Mem0 paper's RAG baseline, the conversation in fixed-size chunks.

The conversation so far is one token stream (the bundled tokenizer), each exchange written as
``vector`` writes it (``input: ...`` then ``response: ...``, the user's line dated when the run
has timestamps) and appended as it happens. The stream is cut into chunks of ``chunk_tokens``
tokens: the last chunk grows until it is full, then a new one opens. Each chunk is a document in
the cell's Chroma collection, embedded with the run's (metered) embeddings; the open chunk is
re-embedded after each exchange that adds to it, so it is searchable at once (its cost is
bounded by ``chunk_tokens``, whatever the dialogue's length). A chunk names every turn with a
token in it; a turn cut at a chunk's end is named by both chunks.

At each turn the context is the ``k`` chunks nearest the user's message, best first
(``Recall.ranking``). cl100k never joins tokens across a line break followed by text, so the
stream's tokens are exactly each exchange's tokens one after another; a chunk's text is its
tokens decoded (a character whose UTF-8 bytes a cut splits goes whole to the next chunk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory_lab.memories.chroma import STACK as CHROMA_STACK
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.models.prompt import INPUT_KEY, OUTPUT_KEY

CHUNK_MIN, CHUNK_MAX = 16, 65536


@dataclass
class Chunk:
    """One chunk: its tokens' bytes decoded so far, the turns it holds and its token count."""

    index: int
    data: bytearray = field(default_factory=bytearray)
    tokens: int = 0
    turn_ids: list[str] = field(default_factory=list)
    text: str = ""

    def add_turn(self, turn_id: str | None) -> None:
        if turn_id and turn_id not in self.turn_ids:
            self.turn_ids.append(turn_id)


def split_utf8(data: bytes) -> tuple[str, bytes]:
    """The longest prefix of ``data`` that decodes as UTF-8, and the bytes after it (at most 3:
    a character a token cut in two)."""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            return data[:cut].decode("utf-8"), data[cut:]
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace"), b""


class RagMemory:
    """The conversation in chunks of ``chunk_tokens`` tokens, the nearest ``k`` recalled."""

    def __init__(
        self,
        collection: Any,
        embed_documents: Callable[[list[str]], list[list[float]]],
        embed_query: Callable[[str], list[float]],
        *,
        chunk_tokens: int = 512,
        k: int = 2,
        timestamps: bool = True,
    ):
        self.collection = collection
        self.embed_documents = embed_documents
        self.embed_query = embed_query
        self.chunk_tokens = chunk_tokens
        self.k = k
        self.timestamps = timestamps
        self.chunks: list[Chunk] = []
        self._carry = b""  # bytes of a character split by the last cut, for the next chunk
        self.tokens = 0

    def _open(self) -> Chunk:
        if not self.chunks or self.chunks[-1].tokens >= self.chunk_tokens:
            self.chunks.append(Chunk(len(self.chunks), bytearray(self._carry)))
            self._carry = b""
        return self.chunks[-1]

    def _append(self, text: str, turn_ids: tuple[str, ...], touched: dict[int, Chunk]) -> None:
        from memory_lab.models.tokens import encoding, token_ids

        enc = encoding()
        for token in token_ids(text):
            chunk = self._open()
            for turn_id in turn_ids:
                chunk.add_turn(turn_id)
            chunk.data += enc.decode_single_token_bytes(token)
            chunk.tokens += 1
            self.tokens += 1
            touched[chunk.index] = chunk
            if chunk.tokens >= self.chunk_tokens:  # full: its text is final, minus a split char
                chunk.text, carry = split_utf8(bytes(chunk.data))
                chunk.data = bytearray(chunk.data[: len(chunk.data) - len(carry)])
                self._carry = carry

    def observe(self, exchange: Exchange) -> None:
        user = exchange.dated_user() if self.timestamps else exchange.user
        touched: dict[int, Chunk] = {}
        if exchange.user:
            user_ids = (exchange.user_turn_id,) if exchange.user_turn_id else ()
            self._append(f"{INPUT_KEY}: {user}\n", user_ids, touched)
        if exchange.assistant:
            self._append(
                f"{OUTPUT_KEY}: {exchange.assistant}\n", exchange.assistant_turn_ids, touched
            )
        if not touched:
            return
        for chunk in touched.values():
            if chunk.tokens < self.chunk_tokens:  # the open chunk: all its bytes, so far
                chunk.text = split_utf8(bytes(chunk.data))[0]
        chunks = list(touched.values())
        texts = [c.text.strip() for c in chunks]
        vectors = self.embed_documents(texts)
        self.collection.upsert(
            ids=[str(c.index) for c in chunks], embeddings=vectors, documents=texts
        )

    def rank(self, text: str) -> list[int]:
        """The ``k`` chunks nearest ``text``'s embedding, nearest first."""
        vector = self.embed_query(text)
        n = min(self.k, len(self.chunks))
        if not n:
            return []
        found = self.collection.query(query_embeddings=[vector], n_results=n, include=[])
        return [int(i) for i in found["ids"][0]]

    def recall(self, query: Query) -> Recall:
        best = self.rank(query.text) if query.text else []
        items = tuple(
            Item(self.chunks[i].text.strip(), tuple(self.chunks[i].turn_ids), "retrieved")
            for i in best
        )
        return Recall(items, ranking=tuple(item.turn_ids for item in items))

    def end_session(self, session: SessionInfo) -> None:
        """Chunks run across sessions, as the paper's do; nothing to do."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "chunk_tokens": self.chunk_tokens,
            "k": self.k,
            "tokens": self.tokens,
            "chunks": [
                {"index": c.index, "tokens": c.tokens, "turn_ids": list(c.turn_ids)}
                for c in self.chunks
            ],
        }

    def held_texts(self) -> list[str]:
        """Every chunk's text: the conversation so far, once."""
        return [c.text for c in self.chunks]

    def close(self) -> None:
        """The collection is dropped through the factory's ``on_close``."""


@register_memory(
    "rag",
    "The Mem0 paper's RAG baseline: the conversation cut into chunks of chunk_tokens tokens "
    "as it grows, the k chunks nearest the user's message (Chroma) as the context.",
    {
        "chunk_tokens": ParamDoc(
            "tokens per chunk (bundled tokenizer; the paper's grid is 128 to 8192)",
            min=CHUNK_MIN,
            max=CHUNK_MAX,
        ),
        "k": ParamDoc("chunks in the context (the paper's are 1 and 2)", min=1, max=64),
    },
    stack=CHROMA_STACK,
)
def rag(res: MemoryResources, chunk_tokens: int = 512, k: int = 2) -> RagMemory:
    from memory_lab.memories.builtin.classic import cell_collection

    return RagMemory(
        cell_collection(res),
        res.embeddings.embed_documents,
        res.embeddings.embed_query,
        chunk_tokens=chunk_tokens,
        k=k,
        timestamps=res.timestamps,
    )
