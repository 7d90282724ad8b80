"""``hierarchical``: short-term turns, a working summary and scored long-term memories.

The architecture guide's ``HierarchicalMemoryManager`` on the memory protocol:

- **short-term**: the last ``short_term_limit`` exchanges, verbatim;
- **working memory**: a running summary (the prompt asks for 3-5 sentences) that the memory
  model rewrites after every exchange;
- **long-term**: when short-term overflows, its oldest 2 exchanges are summarised by the memory
  model into one entry, which the memory model scores for importance (1-10); entries live in a
  Chroma collection of the cell's own, embedded with the run's embeddings.

A query's long-term entries are chosen in two steps, so the cost of a recall is bounded however
long the dialogue: Chroma returns the ``candidates`` entries most similar to the query (cosine),
then each candidate is scored

    composite = w_importance * importance/10 + w_recency * recency + w_frequency * frequency
    score     = similarity_weight * similarity + (1 - similarity_weight) * composite

with ``recency = exp(-decay_rate * hours since last access)``, ``frequency =
min(1, accesses / frequency_cap)`` and ``similarity`` the candidate's cosine rescaled over the
candidates to [0, 1] (the nearest 1, the farthest 0): the cosines of one embedding model span a
narrow band, so raw they would barely move the score. The ``k`` best are shown.

Time is **dialogue time**, never the wall clock: a session starts at its date (ISO or
LoCoMo-style text), each exchange ``minutes_per_exchange`` after the previous one, and a session
without a (later) date ``session_gap_hours`` after the last exchange; so replays are
deterministic. An entry is accessed when it is recalled for a user turn (the recall the runner
makes before saving that exchange); probes never change the memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_lab.memories.chroma import STACK as CHROMA_STACK
from memory_lab.memories.chroma import cell_collection
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    session_datetime,
)
from memory_lab.memories.registry import ParamDoc, register_memory

LONG_TERM_HEADER = "Long-term memories:"
SUMMARY_HEADER = "Current summary:"
RECENT_HEADER = "Recent conversation:"
CONSOLIDATE = 2  # exchanges summarised into one long-term entry when short-term overflows
_EPOCH = datetime(1970, 1, 1)


def date_hours(date: str | None) -> float | None:
    """Hours since 1970 of a session date (``2026-03-02``, ``1:56 pm on 8 May, 2023``), or None."""
    when = session_datetime(date)
    return None if when is None else (when - _EPOCH).total_seconds() / 3600


class DialogueClock:
    """Dialogue time in hours: session dates plus the exchanges' order, never the wall clock."""

    def __init__(self, minutes_per_exchange: float = 2.0, session_gap_hours: float = 24.0):
        self.step = minutes_per_exchange / 60
        self.gap = session_gap_hours
        self.session: str | None = None
        self.now = 0.0

    def start_of(self, session_id: str | None, date: str | None) -> float:
        """When an exchange of ``session_id`` would happen next (the current time if current)."""
        if self.session is None or session_id is None or session_id == self.session:
            return self.now + (self.step if self.session is not None else 0.0)
        dated = date_hours(date)
        later = self.now + self.gap
        return dated if dated is not None and dated >= self.now else later

    def advance(self, ex: Exchange) -> float:
        """The time of exchange ``ex`` (which follows the last one), now the current time."""
        if self.session is None:
            dated = date_hours(ex.session_date)
            self.now = dated if dated is not None else 0.0
        else:
            self.now = self.start_of(ex.session_id, ex.session_date)
        self.session = ex.session_id
        return self.now

    def at(self, query: Query) -> float:
        """The time of a query: now, or the start of the new session it is asked in."""
        if self.session is None or query.session_id in (None, self.session):
            return self.now
        return self.start_of(query.session_id, query.session_date)


@dataclass
class LongTermEntry:
    """A consolidated memory: its summary, importance (1-10), source turns and access record."""

    id: str
    text: str
    importance: int
    created: float
    last_access: float
    turn_ids: tuple[str, ...]
    date: str | None = None
    accesses: int = 0


@dataclass(frozen=True)
class ScoreWeights:
    """How long-term entries are ranked (see the module docstring)."""

    importance: float = 0.4
    recency: float = 0.35
    frequency: float = 0.25
    similarity: float = 0.5
    decay_rate: float = 0.01
    frequency_cap: int = 10

    def recency_of(self, entry: LongTermEntry, now: float) -> float:
        return math.exp(-self.decay_rate * max(0.0, now - entry.last_access))

    def composite(self, entry: LongTermEntry, now: float) -> float:
        """The guide's score: importance, recency on dialogue time, access frequency."""
        frequency = min(1.0, entry.accesses / self.frequency_cap)
        return (
            self.importance * entry.importance / 10
            + self.recency * self.recency_of(entry, now)
            + self.frequency * frequency
        )

    def score(self, entry: LongTermEntry, similarity: float, now: float) -> float:
        return self.similarity * similarity + (1 - self.similarity) * self.composite(entry, now)


@dataclass
class ShortTermTurn:
    exchange: Exchange
    time: float


@dataclass
class HierarchicalMemory:
    """Short-term exchanges, a working summary, and long-term entries in a Chroma collection."""

    model: Any
    embeddings: Any
    collection: Any
    weights: ScoreWeights = field(default_factory=ScoreWeights)
    short_term_limit: int = 10
    k: int = 3
    candidates: int = 20
    clock: DialogueClock = field(default_factory=DialogueClock)
    timestamps: bool = True
    short_term: list[ShortTermTurn] = field(default_factory=list)
    summary: str = ""
    entries: dict[str, LongTermEntry] = field(default_factory=dict)
    _pending: tuple[str, tuple[str, ...]] = ("", ())  # (user text, entry ids) last recalled

    # ------------------------------------------------------------------ saving

    def observe(self, exchange: Exchange) -> None:
        now = self.clock.advance(exchange)
        text, accessed = self._pending
        if exchange.user and text == exchange.user:  # what was recalled for this very turn
            for entry_id in accessed:
                entry = self.entries[entry_id]
                entry.accesses += 1
                entry.last_access = now
        self._pending = ("", ())
        self.short_term.append(ShortTermTurn(exchange, now))
        self.update_summary(exchange)
        while len(self.short_term) > self.short_term_limit:
            self.consolidate()

    def update_summary(self, ex: Exchange) -> None:
        from memory_lab.models.tasks import summarize_prompt

        prompt = summarize_prompt(self.transcript([ex]), self.summary, sentences="3-5")
        self.summary = str(self.model.invoke(prompt).content).strip()

    def consolidate(self) -> LongTermEntry:
        """Summarise the oldest 2 short-term exchanges into one scored long-term entry."""
        from memory_lab.models.tasks import importance_prompt, parse_importance, summarize_prompt

        oldest, self.short_term = self.short_term[:CONSOLIDATE], self.short_term[CONSOLIDATE:]
        exs = [t.exchange for t in oldest]
        transcript = self.transcript(exs)
        reply = self.model.invoke(summarize_prompt(transcript, "", sentences="1-3"))
        text = str(reply.content).strip() or transcript
        importance = parse_importance(str(self.model.invoke(importance_prompt(text)).content))
        entry = LongTermEntry(
            id=f"lt-{len(self.entries)}",
            text=text,
            importance=importance,
            created=oldest[-1].time,
            last_access=oldest[-1].time,
            turn_ids=tuple(t for ex in exs for t in ex.turn_ids),
            date=exs[0].session_date,
        )
        self.collection.add(
            ids=[entry.id], documents=[text], embeddings=self.embeddings.embed_documents([text])
        )
        self.entries[entry.id] = entry
        return entry

    def transcript(self, exs: list[Exchange]) -> str:
        lines = []
        for ex in exs:
            if ex.user:
                lines.append(f"Human: {ex.dated_user() if self.timestamps else ex.user}")
            if ex.assistant:
                lines.append(f"AI: {ex.assistant}")
        return "\n".join(lines)

    def end_session(self, session: SessionInfo) -> None:
        """Sessions matter only through their dates (the dialogue clock)."""

    # ------------------------------------------------------------------ recall

    def ranked(self, text: str, now: float) -> list[tuple[float, float, LongTermEntry]]:
        """(score, similarity, entry) of the ``candidates`` nearest entries, best first."""
        count = len(self.entries)
        if not text or not count:
            return []
        found = self.collection.query(
            query_embeddings=[self.embeddings.embed_query(text)],
            n_results=min(self.candidates, count),
            include=["distances"],
        )
        raw = [1.0 - float(d) for d in found["distances"][0]]
        low, high = min(raw), max(raw)
        out = []
        for entry_id, cosine in zip(found["ids"][0], raw, strict=True):
            entry = self.entries[entry_id]
            # rescaled over the candidates: cosines of one embedding model span a narrow band
            similarity = (cosine - low) / (high - low) if high > low else 1.0
            out.append((self.weights.score(entry, similarity, now), similarity, entry))
        return sorted(out, key=lambda x: (-x[0], x[2].created))

    def recall(self, query: Query) -> Recall:
        now = self.clock.at(query)
        chosen = [entry for _, _, entry in self.ranked(query.text, now)[: self.k]]
        self._pending = (query.text, tuple(e.id for e in chosen))
        items: list[Item] = []
        if chosen:
            items.append(Item(LONG_TERM_HEADER, (), "other"))
            items += [Item(self.entry_text(e), e.turn_ids, "summary") for e in chosen]
        if self.summary:
            items += [Item(SUMMARY_HEADER, (), "other"), Item(self.summary, (), "summary")]
        if self.short_term:
            items.append(Item(RECENT_HEADER, (), "other"))
            items += [
                Item(self.transcript([t.exchange]), t.exchange.turn_ids, "verbatim")
                for t in self.short_term
            ]
        # ranked: the long-term entries only (short-term and summary are shown, not retrieved)
        return Recall(tuple(items), ranking=tuple(e.turn_ids for e in chosen))

    def entry_text(self, entry: LongTermEntry) -> str:
        text = entry.text.replace("\n", " ")
        if self.timestamps and entry.date and not text.startswith(f"Human: [{entry.date}]"):
            return f"- [{entry.date}] {text}"
        return f"- {text}"

    # ------------------------------------------------------------------ inspection

    def snapshot(self) -> dict[str, Any]:
        return {
            "short_term": [list(t.exchange.turn_ids) for t in self.short_term],
            "summary": self.summary,
            "long_term": [
                {
                    "text": e.text,
                    "importance": e.importance,
                    "turn_ids": list(e.turn_ids),
                    "created_hours": round(e.created, 4),
                    "last_access_hours": round(e.last_access, 4),
                    "accesses": e.accesses,
                }
                for e in self.entries.values()
            ],
            "dialogue_hours": round(self.clock.now, 4),
        }

    def held_texts(self) -> list[str]:
        """The short-term exchanges, the working summary and the long-term entries."""
        recent = [self.transcript([t.exchange]) for t in self.short_term]
        return [*recent, self.summary, *(e.text for e in self.entries.values())]

    def close(self) -> None:
        """The collection is dropped through the factory's ``on_close``."""


_WEIGHT = {"min": 0.0, "max": 1.0}


@register_memory(
    "hierarchical",
    "The last exchanges verbatim, a running summary, and long-term summaries of older "
    "exchanges ranked by importance, recency and access frequency on dialogue time, with "
    "similarity (the guide's HierarchicalMemoryManager).",
    {
        "short_term_limit": ParamDoc("exchanges kept verbatim before consolidating", min=2),
        "k": ParamDoc("long-term entries shown per prompt", min=1),
        "candidates": ParamDoc("entries nearest the query that are scored", min=1),
        "importance_weight": ParamDoc("weight of importance/10 in the composite", **_WEIGHT),
        "recency_weight": ParamDoc("weight of exp(-decay_rate * hours)", **_WEIGHT),
        "frequency_weight": ParamDoc("weight of min(1, accesses/frequency_cap)", **_WEIGHT),
        "similarity_weight": ParamDoc(
            "share of cosine similarity in the final score (the rest is the composite)",
            **_WEIGHT,
        ),
        "decay_rate": ParamDoc("recency decay per dialogue hour since last access", min=0),
        "frequency_cap": ParamDoc("accesses at which frequency reaches 1", min=1),
        "minutes_per_exchange": ParamDoc("dialogue minutes between exchanges of a session", min=0),
        "session_gap_hours": ParamDoc(
            "hours between sessions when a session has no (later) date", min=0
        ),
    },
    roles=("memory",),
    stack=CHROMA_STACK,
)
def hierarchical(
    res: MemoryResources,
    short_term_limit: int = 10,
    k: int = 3,
    candidates: int = 20,
    importance_weight: float = 0.4,
    recency_weight: float = 0.35,
    frequency_weight: float = 0.25,
    similarity_weight: float = 0.5,
    decay_rate: float = 0.01,
    frequency_cap: int = 10,
    minutes_per_exchange: float = 2.0,
    session_gap_hours: float = 24.0,
) -> HierarchicalMemory:
    collection = cell_collection(res, "longterm")
    weights = ScoreWeights(
        importance_weight,
        recency_weight,
        frequency_weight,
        similarity_weight,
        decay_rate,
        frequency_cap,
    )
    return HierarchicalMemory(
        model=res.memory_llm,
        embeddings=res.embeddings,
        collection=collection,
        weights=weights,
        short_term_limit=short_term_limit,
        k=k,
        candidates=max(candidates, k),
        clock=DialogueClock(minutes_per_exchange, session_gap_hours),
        timestamps=res.timestamps,
    )
