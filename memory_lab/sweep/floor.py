"""The embedding floor of an offline run: the least CPU time its embeddings can take here.

An offline run embeds, with the bundled multilingual-e5 (``--embeddings offline``), at least:

- for ``vector`` and ``hybrid``: every exchange once as a stored document (``passage:``; the
  run's cache shares the vectors between them) and every user turn as a search (``query:``),
  ``rag`` too;
- for ``rag``: its chunks, each time one changes (replayed with its own chunker);
- for the offline reader: every question as a ``query:`` in e5 and in MiniLM, and, when
  ``buffer`` is in the set, every sentence that a probe's prompt shows (the history before the
  probe, cut to the answering model's window: the offline reader's 128K tokens) as a
  ``passage:`` in both. Sentences of the other memories' contexts are left out, which keeps it
  a lower bound.

``floor(source, memories)`` counts those texts, times the bundled engines on a random sample of
each kind (one thread, one text per call as a replay calls them; MiniLM's sentences in batches
of 32), in CPU seconds, and returns kind -> (texts, CPU seconds per text). Their sum is the
floor: CPU seconds the run cannot take less than. A run's CPU ÷ floor is how far it is from it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import Any

# each kind of text -> the memories whose runs embed it ("*": any run: the reader's questions)
KIND_MEMORIES = {
    "vector: exchanges as passages (e5)": {"vector", "hybrid"},
    "vector: user turns as queries (e5)": {"vector", "hybrid", "rag"},
    "reader: sentences as passages (e5)": {"buffer"},
    "reader: questions as queries (e5)": {"*"},
    "reader: sentences (MiniLM, batches of 32)": {"buffer"},
    "reader: questions (MiniLM, one by one)": {"*"},
}


def shown(dialogue: Any, found: list[Any], window: int | None) -> set[int]:
    """The exchanges (indices into ``found``) that some probe's buffer prompt shows: those
    before the probe, the latest first, until ``window`` tokens (all of them without one)."""
    from memory_lab.models.tokens import count_tokens

    at = {}
    for i, ex in enumerate(found):
        for turn in (ex.user_turn_id, *ex.assistant_turn_ids):
            at[turn] = i
    sizes = [count_tokens(ex.user) + count_tokens(ex.assistant) for ex in found]
    kept: set[int] = set()
    for probe in dialogue.probes:
        last = at.get(probe.after, len(found) - 1)
        total = 0
        for i in range(last, -1, -1):
            total += sizes[i]
            if window is not None and total > window:
                break
            kept.add(i)
    return kept


def texts_of(source: str, window: int | None = None) -> dict[str, tuple[list[str], str]]:
    """Each kind of text an offline comparison over ``source`` embeds: (texts, engine); the
    reader's sentences those a probe's prompt shows within ``window`` tokens."""
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.models.prompt import INPUT_KEY, OUTPUT_KEY
    from memory_lab.models.reader_index import split_sentences
    from memory_lab.run.exchanges import exchanges

    docs, searches, sentences, questions = [], [], [], []
    for dialogue in load_dialogues(source):
        found = exchanges(dialogue)
        seen = shown(dialogue, found, window)
        for i, ex in enumerate(found):
            user = ex.dated_user()
            # VectorStoreRetrieverMemory stores "input: ...\nresponse: ..." per exchange
            docs.append(f"{INPUT_KEY}: {user}\n{OUTPUT_KEY}: {ex.assistant}")
            if ex.user_turn_id is not None:
                searches.append(ex.user)
            if i in seen:
                sentences.extend(split_sentences(f"Human: {user}\nAI: {ex.assistant}"))
        questions.extend(p.question for p in dialogue.probes)
    unique = lambda xs: list(dict.fromkeys(xs))  # noqa: E731
    return {
        "vector: exchanges as passages (e5)": (docs, "e5-passage"),
        "vector: user turns as queries (e5)": (searches, "e5-query"),
        "reader: sentences as passages (e5)": (unique(sentences), "e5-passage"),
        "reader: questions as queries (e5)": (unique(questions), "e5-query"),
        "reader: sentences (MiniLM, batches of 32)": (unique(sentences), "minilm-batch"),
        "reader: questions (MiniLM, one by one)": (unique(questions), "minilm"),
    }


def floor_kinds(memories: Iterable[str]) -> list[str]:
    """The kinds of ``texts_of`` that a run of ``memories`` (their names) embeds."""
    names = set(memories)
    return [k for k, need in KIND_MEMORIES.items() if "*" in need or need & names]


def floor_total(kinds: dict[str, tuple[int, float]]) -> float:
    """The floor in CPU seconds: the sum over kinds of (texts, CPU seconds per text)."""
    return sum(texts * per for texts, per in kinds.values())


def rag_chunk_texts(source: str, chunk_tokens: int, timestamps: bool = True) -> list[str]:
    """Every text ``rag`` embeds as a passage over ``source``: its chunks each time one changes
    (the open chunk again after each exchange that adds to it), replayed with its own chunker."""
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.memories.builtin.rag import RagMemory
    from memory_lab.run.exchanges import exchanges

    class _Collection:
        def upsert(self, **_: Any) -> None:
            pass

    texts: list[str] = []

    def embed(batch: list[str]) -> list[list[float]]:
        texts.extend(batch)
        return [[0.0] for _ in batch]

    for dialogue in load_dialogues(source):
        rag = RagMemory(
            _Collection(), embed, lambda _: [0.0], chunk_tokens=chunk_tokens, timestamps=timestamps
        )
        for exchange in exchanges(dialogue):
            rag.observe(exchange)
    return list(dict.fromkeys(texts))  # a text embedded twice comes from the run's cache


def seconds_per_text(
    texts: list[str], engine: str, sample: int, rng: random.Random, e5: str
) -> float:
    """CPU seconds one text of ``engine``'s kind takes, on a random sample of ``texts``."""
    from memory_lab.models.embeddings import _encode

    picked = rng.sample(texts, min(sample, len(texts)))
    if not picked:
        return 0.0
    if engine == "minilm-batch":
        _encode("minilm", picked[:32], "passage", 32)  # load and warm up
        started = time.process_time()
        _encode("minilm", picked, "passage", 32)
        return (time.process_time() - started) / len(picked)
    model, kind = ("minilm", "query") if engine == "minilm" else (e5, engine.split("-")[1])
    _encode(model, picked[:1], kind, 1)  # load and warm up
    started = time.process_time()
    for text in picked:
        _encode(model, [text], kind, 1)
    return (time.process_time() - started) / len(picked)


def floor(
    source: str, memories: Iterable[str], sample: int = 120, seed: int = 0
) -> dict[str, tuple[int, float]]:
    """Kind -> (texts, CPU seconds per text) of what a run of ``memories`` (specs such as
    ``rag:chunk_tokens=256``) over ``source`` embeds."""
    from memory_lab.memories.registry import parse_memory_spec
    from memory_lab.models.embeddings import resolve_embedding_model
    from memory_lab.models.windows import model_window

    specs = [parse_memory_spec(m) for m in memories]
    e5 = resolve_embedding_model("multilingual-e5-small")  # --embeddings offline
    every = texts_of(source, window=model_window("offline"))
    kinds = {k: every[k] for k in floor_kinds(s.name for s in specs)}
    for size in sorted({int(s.params.get("chunk_tokens", 512)) for s in specs if s.name == "rag"}):
        kinds[f"rag: {size}-token chunks as passages (e5)"] = (
            rag_chunk_texts(source, size),
            "e5-passage",
        )
    rng = random.Random(seed)
    return {
        kind: (len(texts), seconds_per_text(texts, engine, sample, rng, e5))
        for kind, (texts, engine) in kinds.items()
    }
