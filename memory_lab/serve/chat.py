"""One memory per (user, served memory): the run's ``Cell`` answering live, and a transcript.

Each message is one exchange of a single session (``chat``), replayed through ``Cell`` in
``live`` mode: the memory gives its context, the answering model replies through the shared
prompt, and the exchange (with that reply) is saved, all metered as in a benchmark run. A
memory that keeps its state on a server (as its registration declares, ``persistent``: e.g.
``thread:saver=postgres``, ``store:backend=postgres``, ``langmem:store=postgres``,
``mem0:store=postgres``) is named after the memory and the user
(``serve-<memory>-<hash>--<user>``, see ``cell_id``) and kept there when the app stops
(``keep=true`` unless the spec says otherwise), so a restarted server finds it again; ``forget``
deletes it there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml

from memory_lab import heap
from memory_lab.dialogue.model import FORMAT, Dialogue, parse_documents
from memory_lab.memories.protocol import Exchange
from memory_lab.memories.registry import MemorySpec
from memory_lab.models.tokens import count_tokens
from memory_lab.run.bridge import quiet_classic_deprecations
from memory_lab.run.cell import Cell
from memory_lab.run.context import RunModels
from memory_lab.serve.guard import RequestError

SESSION = "chat"
LOCK_STRIPES = 64


def keeps_state(spec: MemorySpec) -> bool:
    """Whether the memory keeps its state on a server, as its registration declares
    (``register_memory(..., persistent=...)``), where it outlives this process."""
    return spec.factory.keeps_state(spec.params)


def served_spec(spec: MemorySpec) -> MemorySpec:
    """The spec as served: kept on its server ``keep=true`` unless the spec gives ``keep``."""
    given = {part.partition("=")[0] for part in spec.label.partition(":")[2].split(",")}
    has_keep = any(p.name == "keep" for p in spec.factory.params)
    if keeps_state(spec) and has_keep and "keep" not in given:
        return dataclasses.replace(spec, params={**spec.params, "keep": True})
    return spec


def cell_id(spec: MemorySpec, user_id: str) -> str:
    """The user's cell id: fixed for memories that keep their state on a server, fresh for the
    others.

    ``serve-<label>-<hash>--<user>``: the label made safe (single dashes, none at either end) and
    8 hex digits of its SHA-256 (two labels made alike still differ), then ``--``, which the
    label part never holds, so the first ``--`` ends it and no (memory, user) pair shares another
    pair's thread or Store namespace, whatever dashes a user id holds.
    """
    safe = re.sub(r"[^A-Za-z0-9]+", "-", spec.label).strip("-")
    digest = hashlib.sha256(spec.label.encode("utf-8")).hexdigest()[:8]
    base = f"serve-{safe}-{digest}--{user_id}"
    return base if keeps_state(spec) else f"{base}-{uuid.uuid4().hex[:12]}"


def _plain(value: Any) -> Any:
    """A snapshot as JSON-safe data (anything unusual as its text)."""
    return json.loads(json.dumps(value, default=str))


def _persisted(memory: Any) -> tuple[Any, list[str], list[tuple[str, ...]]] | None:
    """(persistence, thread ids, Store namespaces) of a memory whose state a ``Persistence``
    keeps (one with ``stored(session)``: ``thread``, ``store``, ``langmem``)."""
    stored = getattr(memory, "stored", None)
    return stored(SESSION) if callable(stored) else None


def _forget_on_server(memory: Any) -> None:
    """Delete what a memory keeps on its server, whatever ``keep`` says (``stored``, or its own
    ``forget_stored``: ``mem0``'s table)."""
    held = _persisted(memory)
    if held is not None:
        persistence, threads, namespaces = held
        persistence.keep = False
        persistence.forget(threads, namespaces)
        return
    forget = getattr(memory, "forget_stored", None)
    if callable(forget):
        forget()


class UserMemory:
    """One user's memory of one served spec, and what was said to it in this process."""

    def __init__(self, spec: MemorySpec, user_id: str, models: RunModels):
        self.spec = spec
        self.user_id = user_id
        dialogue = Dialogue(
            id=f"chat-{user_id}",
            title=f"chat with {user_id}",
            language="en",
            tags=(),
            sessions=(),
            probes=(),
            source="memory-lab serve",
            content_hash="",
        )
        with quiet_classic_deprecations():
            self.cell = Cell(spec, dialogue, models, cell_id=cell_id(spec, user_id))
        try:
            # on a server what was said before this process began is in the thread (if any)
            self.transcript = stored_transcript(self.cell.memory) if keeps_state(spec) else []
        except BaseException:
            self.cell.close()
            raise
        self.last_message = self.transcript[-1][0] if self.transcript else ""

    def chat(self, message: str) -> dict[str, Any]:
        """Answer ``message`` with this memory's context, save the exchange; the turn's view."""
        n = len(self.transcript)
        tag = uuid.uuid4().hex[:10]  # ids unique across restarts: a thread keeps messages by id
        ex = Exchange(n, message, "", f"u{n + 1}-{tag}", (f"a{n + 1}-{tag}",), SESSION, None)
        with quiet_classic_deprecations():
            record = self.cell.replay_exchange(ex)[0]
            turn = self.cell.last_prompt  # the prompt the model was sent for ``message``
        reply = record.reply or ""
        self.transcript.append((message, reply))
        self.last_message = message
        return {
            "memory": self.spec.label,
            "turn": len(self.transcript),
            "reply": reply,
            "prompt_context": turn.context if turn is not None else "",
            "tokens": {
                "context": record.context_tokens,
                "prompt": record.prompt_tokens,
                "completion": record.completion_tokens,
                "memory": record.memory_tokens,
            },
            "truncated": record.truncated,
            "seconds": round(record.seconds, 4),
            "state": self.state(message),
        }

    def state(self, query: str | None = None) -> dict[str, Any]:
        """What the memory holds now and the context it would give for ``query`` (default: the
        last message this process saw; for the memory alone nothing is saved or charged)."""
        query = self.last_message if query is None else query
        cell = self.cell
        with quiet_classic_deprecations():
            turn = cell.prompt_for(query, Exchange(0, query, "", None, (), SESSION, None))
            snapshot = _plain(cell.snapshot())
            cell.maintenance()  # what looking cost is not charged to the next turn
        context, recall = turn.context, turn.recall
        items = [{"kind": i.kind, "text": i.text} for i in (recall.items if recall else ())]
        return {
            "memory": self.spec.label,
            "query": query,
            "context": context,
            "context_tokens": count_tokens(context),
            "items": items,
            "summary": snapshot.get("summary") if isinstance(snapshot, dict) else None,
            "facts": snapshot.get("facts") if isinstance(snapshot, dict) else None,
            "snapshot": snapshot,
            "turns": len(self.transcript),
        }

    def forget(self) -> None:
        """Delete what the memory keeps, on its server too, and release it."""
        if keeps_state(self.spec):
            _forget_on_server(self.cell.memory)
        self.cell.close()

    def close(self) -> None:
        """Release the memory; what it keeps on a server stays (``keep``)."""
        self.cell.close()

    def release(self) -> None:
        """Release a memory made for one request: what it found on its server stays there,
        whatever ``keep`` says (it is the user's, saved by a memory held before)."""
        held = _persisted(self.cell.memory)
        if held is not None and keeps_state(self.spec):
            held[0].keep = True
        self.cell.close()


def stored_transcript(memory: Any) -> list[tuple[str, str]]:
    """(message, reply) pairs as a memory's thread holds them (``stored_exchanges``: ``thread``
    and ``store``): what a restarted server knows of a conversation; empty for other memories."""
    stored = getattr(memory, "stored_exchanges", None)
    return stored(SESSION) if callable(stored) else []


def transcript_dialogue(user_id: str, memory: str, transcript: list[tuple[str, str]]) -> str:
    """The conversation as a format v1 dialogue file (no probes yet: the user adds them)."""
    if not transcript:
        raise RequestError(404, f"user {user_id!r} has said nothing to memory {memory!r} yet")
    turns: list[dict[str, str]] = []
    for message, reply in transcript:
        turns.append({"user": message})
        if reply.strip():
            turns.append({"assistant": reply})
    did = "chat-" + re.sub(r"[^a-z0-9]+", "-", user_id.lower()).strip("-")
    doc = {
        "format": FORMAT,
        "id": did,
        "title": f"{user_id} chatting with {memory} (memory-lab serve)",
        "language": "en",
        "tags": ["serve"],
        "sessions": [{"id": "s1", "turns": turns}],
        "probes": [],
    }
    _, problems = parse_documents([doc], f"{did}.yaml")
    if problems:  # what the server writes must load
        raise RequestError(500, f"the transcript is not a valid dialogue: {problems[0]}")
    head = (
        f"# Saved by memory-lab serve: {len(transcript)} message(s) to memory {memory}.\n"
        "# Add probes (id, after: a turn id such as s1.t3, question, answers, category), then\n"
        "# run it: memory-lab run --dialogues THIS_FILE\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)


class Chats:
    """Every user's memories, made on a user's first request; one request per user at a time."""

    def __init__(self, specs: list[MemorySpec], models: RunModels, max_users: int):
        self.specs = {s.label: s for s in specs}
        self.models = models
        self.max_users = max_users
        self._users: dict[str, dict[str, UserMemory]] = {}
        # a user's requests one at a time; a fixed number of locks, whatever users come
        self._locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self._lock = threading.Lock()

    def labels(self) -> list[str]:
        return list(self.specs)

    def chosen(self, memory: str | None) -> list[str]:
        """The served labels a request names (all of them when it names none)."""
        if memory is None:
            return self.labels()
        if memory not in self.specs:
            raise RequestError(
                404, f"memory {memory!r} is not served here (served: {', '.join(self.specs)})"
            )
        return [memory]

    @contextmanager
    def user(self, user_id: str, create: bool = True) -> Iterator[dict[str, UserMemory]]:
        """The user's memories by label (made where missing), held for this request alone."""
        with self._locks[zlib.crc32(user_id.encode()) % LOCK_STRIPES]:
            with self._lock:
                memories = self._users.get(user_id)
                if memories is None and create:
                    if len(self._users) >= self.max_users:
                        raise RequestError(
                            503,
                            f"the server holds memories for {self.max_users} users, the most "
                            "it may (--max-users); DELETE /memory/{user_id} frees one",
                        )
                    memories = self._users[user_id] = {}
            if memories is None:
                yield {}
                return
            try:
                for label, spec in self.specs.items():
                    if label not in memories:
                        memories[label] = UserMemory(spec, user_id, self.models)
            finally:
                if not memories:
                    with self._lock:
                        self._users.pop(user_id, None)
            yield memories

    @contextmanager
    def existing(self, user_id: str, labels: list[str]) -> Iterator[dict[str, UserMemory]]:
        """The user's memories for a request that saves nothing (a read, a forget): those held,
        or for a user not held, memories made for this request alone and released after, so it
        takes no --max-users slot (on PostgreSQL they find what the server keeps)."""
        with self.user(user_id, create=False) as held:
            if held:
                yield held
                return
            made: dict[str, UserMemory] = {}
            try:
                for label in labels:
                    made[label] = UserMemory(self.specs[label], user_id, self.models)
                yield made
            finally:
                for fresh in made.values():
                    fresh.release()

    def chat(self, user_id: str, message: str, memory: str | None = None) -> list[dict]:
        labels = self.chosen(memory)
        with self.user(user_id) as memories:
            return [memories[label].chat(message) for label in labels]

    def view(self, user_id: str, memory: str | None = None, query: str | None = None) -> list:
        labels = self.chosen(memory)
        with self.existing(user_id, labels) as memories:
            return [memories[label].state(query) for label in labels]

    def delete(self, user_id: str, memory: str | None = None) -> list[str]:
        """Forget the user's memories (all, or one): on their servers too. The labels forgotten."""
        labels = self.chosen(memory)
        with self.existing(user_id, labels) as memories:
            for label in labels:
                memories.pop(label).forget()
            if not memories:  # a user not held is not in ``_users``: a no-op then
                with self._lock:
                    self._users.pop(user_id, None)
        heap.trim()  # what the user's memory freed goes back to the system, not to an arena
        return labels  # a later request makes the user's memories afresh

    def dialogue(self, user_id: str, memory: str | None = None) -> str:
        label = self.chosen(memory)[0]
        with self.existing(user_id, [label]) as memories:
            return transcript_dialogue(user_id, label, memories[label].transcript)

    def close(self) -> None:
        """Release every memory (state kept on servers stays there)."""
        with self._lock:
            users, self._users = self._users, {}
        error: BaseException | None = None
        for memories in users.values():
            for held in memories.values():
                try:
                    held.close()
                except Exception as exc:  # noqa: BLE001 - the rest are closed first
                    error = error or exc
        if error is not None:
            raise error


WARM_UP = "Hello, I'm warming up."


def warm_up(specs: list[MemorySpec], models: RunModels) -> int:
    """Load the run's engines (``RunModels.warm_once``: the tokenizer, the offline reader's
    MiniLM and e5, the memories' offline embeddings), then one exchange and one look through a
    throwaway memory of every served spec (those that keep their state on a server excepted:
    nothing is written there), so the models, embeddings and analysers load before the first
    user waits on them. The engines are loaded apart from the exchange: a fresh memory's first
    exchange has no context, so the offline reader answers it without them, and they used to
    load on a user's second message (7 s). Returns how many memories were warmed."""
    models.warm_once()
    warmed = 0
    for spec in specs:
        if keeps_state(spec):
            continue
        memory = UserMemory(served_spec(spec), f"warm-up-{uuid.uuid4().hex[:8]}", models)
        try:
            memory.chat(WARM_UP)
            memory.state("What did I say?")
        finally:
            memory.close()
        warmed += 1
    return warmed
