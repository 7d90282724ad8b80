"""The memory contract: what every memory receives, what it returns, and what it may use.

A memory is any object with five methods (``Memory``). The runner hands it each ``Exchange`` as
it happens (texts, turn ids, session id and date), tells it when a session ends, and asks it to
``recall`` what to show the answering model for a ``Query``. ``render_recall`` turns a ``Recall``
into the ``history`` text of the shared prompt; the runner's bridge hands that to the one
``ConversationChain``, so every memory is answered the same way.

A memory may also say what it holds (``held_texts``: summary, stored documents, facts, core
blocks, thread messages); the runner counts those texts' tokens at each session end, its
footprint (``tokens_held``). Every built-in memory does; one that does not is counted by the
texts in its ``snapshot()``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import singledispatch
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memory_lab.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel


class MissingResource(ConfigError, KeyError):
    """A resource a memory needs (``--resource NAME=VALUE``) that was not given; a KeyError
    too, for callers that look a resource up and fall back."""

    def __str__(self) -> str:  # a KeyError's str would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Exchange:
    """A user turn and the assistant reply after it, observed together.

    ``user_turn_id`` is None for assistant turns with no user turn before them (a dialogue that
    opens with the assistant). ``session_date`` is the session's date as written in the dialogue
    (e.g. ``"2026-03-02"`` or LoCoMo's ``"1:56 pm on 8 May, 2023"``), or None.
    """

    index: int
    user: str
    assistant: str
    user_turn_id: str | None
    assistant_turn_ids: tuple[str, ...]
    session_id: str
    session_date: str | None = None

    @property
    def turn_ids(self) -> tuple[str, ...]:
        return ((self.user_turn_id,) if self.user_turn_id else ()) + self.assistant_turn_ids

    def dated_user(self) -> str:
        """The user's text with its session date in front (``[2026-03-02] ...``), when known."""
        if not self.session_date or not self.user:
            return self.user
        return f"[{self.session_date}] {self.user}"


def session_datetime(date: str | None) -> datetime | None:
    """A session date as a dialogue writes it (``2026-03-02``, ``1:56 pm on 8 May, 2023``), as
    a naive UTC datetime, or None when absent or unreadable."""
    if not date:
        return None
    try:
        when = datetime.fromisoformat(date.strip())
    except ValueError:
        from dateutil import parser

        try:
            when = parser.parse(date, fuzzy=True)
        except (ValueError, OverflowError):
            return None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when


@dataclass(frozen=True)
class SessionInfo:
    """A session of a dialogue: its id, date (or None) and 0-based position."""

    id: str
    date: str | None
    index: int


@dataclass(frozen=True)
class Query:
    """What the answering model is about to be asked, and when in the dialogue."""

    text: str
    session_id: str | None = None
    session_date: str | None = None


@dataclass(frozen=True)
class Item:
    """One piece of recalled memory: its text, the turns it came from (when known), its kind
    (``verbatim``, ``summary``, ``retrieved``, ``fact``, ``profile``, ``core``, or another)."""

    text: str
    turn_ids: tuple[str, ...] = ()
    kind: str = "verbatim"


@dataclass(frozen=True)
class Recall:
    """What a memory shows the model for one query, in prompt order.

    ``ranking``: for a memory whose recall is a ranked retrieval of items that name their source
    turns, those items' turn ids by rank, best first (one entry per retrieved item shown,
    whatever order the prompt puts them in; the retrieval only, not what the memory shows
    besides, such as recent turns or a summary). An empty tuple: it ranks and found nothing.
    None (the default): the memory does not rank, and has no rank scores
    (``memory_lab.scoring.ranks``).
    """

    items: tuple[Item, ...] = ()
    ranking: tuple[tuple[str, ...], ...] | None = None

    @property
    def turn_ids(self) -> tuple[str, ...]:
        """Every source turn id reported by the items, in order, without repeats."""
        return tuple(dict.fromkeys(t for item in self.items for t in item.turn_ids))


def render_recall(recall: Recall) -> str:
    """The ``history`` text of the shared prompt: the items' texts, one after another."""
    return "\n".join(item.text for item in recall.items if item.text)


def part_cell_id(cell_id: str, label: str) -> str:
    """The cell id of a composite memory's part: the cell's, then the label made Chroma-safe."""
    safe = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-") or "part"
    return f"{cell_id}-{safe}" if cell_id else safe


@runtime_checkable
class Memory(Protocol):
    """The one contract every memory fulfils (classic ones through ``ClassicMemory``)."""

    def observe(self, exchange: Exchange) -> None:
        """Remember one exchange."""

    def end_session(self, session: SessionInfo) -> None:
        """A session has ended (the next exchange, if any, opens a new one)."""

    def recall(self, query: Query) -> Recall:
        """What to show the answering model for this query. Must not change the memory."""

    def snapshot(self) -> dict[str, Any]:
        """What the memory holds, as plain data, for the inspector."""

    def close(self) -> None:
        """Release what the memory holds (stores, files)."""


@singledispatch
def as_memory(obj: Any, res: Any, name: str) -> Any:
    """What a factory returned, made a ``Memory`` of this cell (``build_memory`` calls it).

    Unregistered types are returned as they are. A module registers an adapter for its type
    with ``@as_memory.register``: a LangChain ``BaseMemory`` is wrapped in ``ClassicMemory``
    (``classic.py``), and ``ClassicMemory`` and ``TextMemory`` take the run's ``timestamps``
    from ``res`` (a factory of another memory reads ``res.timestamps`` itself).
    """
    return obj


@runtime_checkable
class HoldsTexts(Protocol):
    """The footprint part of the contract: a memory that says what it holds."""

    def held_texts(self) -> list[str]:
        """Every text the memory keeps now, each once (summary, stored documents, facts, core
        blocks, thread messages), whether or not a recall would show it. Must not change it."""


def snapshot_texts(value: Any) -> list[str]:
    """The non-empty strings in a snapshot (nested dicts and lists), in order: the fallback
    footprint of a memory without ``held_texts``."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in snapshot_texts(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in snapshot_texts(v)]
    return []


def held_texts(memory: Any) -> list[str]:
    """What ``memory`` holds: its ``held_texts()``, else the texts of its ``snapshot()``."""
    if isinstance(memory, HoldsTexts):
        return [t for t in memory.held_texts() if t]
    return snapshot_texts(memory.snapshot())


def tokens_held(memory: Any, count: Callable[[str], int] | None = None) -> int:
    """The memory's footprint: the tokens of the texts it holds, each counted on its own
    (with ``count``, by default the bundled tokenizer's ``count_tokens``)."""
    if count is None:
        from memory_lab.models.tokens import count_tokens

        count = count_tokens
    return sum(count(text) for text in held_texts(memory))


def lookup_resource(resources: Mapping[str, str] | None, name: str, memory: str) -> str:
    """A run-wide resource: ``--resource NAME=VALUE``, else ``MEMORY_LAB_<NAME>``.

    KeyError naming the memory and both ways to give it when neither is set.
    """
    import os

    resources = resources or {}
    env = os.environ.get(f"MEMORY_LAB_{name.upper()}")
    if name not in resources and env:
        return env
    if name not in resources:
        known = ", ".join(sorted(resources)) or "none given"
        raise MissingResource(
            f"memory '{memory}' needs the resource {name!r}: pass "
            f"--resource {name}=VALUE or set MEMORY_LAB_{name.upper()} (given: {known})"
        )
    return resources[name]


@dataclass
class MemoryResources:
    """What a factory may use to build a memory for one cell.

    ``model(role)`` gives the chat model for a role (``memory`` by default; a memory may declare
    others such as ``extractor``), each metered on its own. ``embeddings`` is metered too.
    ``resource(name)`` reads a run-wide named resource (``--resource NAME=VALUE``), which is
    never written to any file. ``timestamps`` says whether text memories should store each user
    line with its session date (``Exchange.dated_user``). ``cell_id`` is unique per cell and
    safe as a Chroma collection name; ``cell_dir`` is a folder the memory may write files to.
    Register teardown with ``on_close``. ``for_part(label, roles)`` gives the resources for one
    part of a composite memory: its own cell id and folder, its calls metered apart.
    """

    models: Mapping[str, BaseChatModel]
    embeddings: Embeddings
    cell_id: str
    memory_name: str = ""
    tokenizer: Callable[[str], int] | None = None
    resources: Mapping[str, str] = field(default_factory=dict)
    cell_dir: str | None = None
    timestamps: bool = True
    closers: list[Callable[[], None]] = field(default_factory=list)
    part_resources: Callable[[str, tuple[str, ...]], MemoryResources] | None = None

    @property
    def memory_llm(self) -> BaseChatModel:
        """The ``memory`` role's chat model (summaries, extraction)."""
        return self.model("memory")

    def model(self, role: str) -> BaseChatModel:
        if role not in self.models:
            known = ", ".join(self.models) or "none"
            raise KeyError(
                f"memory '{self.memory_name}' asked for model role {role!r}, which it did not "
                f"declare (declared: {known}); list it in register_memory(..., roles=...)"
            )
        return self.models[role]

    def count_tokens(self, text: str) -> int:
        if self.tokenizer is None:
            from memory_lab.models.tokens import count_tokens

            return count_tokens(text)
        return self.tokenizer(text)

    def resource(self, name: str) -> str:
        """The named resource: ``--resource NAME=VALUE``, else ``MEMORY_LAB_<NAME>``."""
        return lookup_resource(self.resources, name, self.memory_name)

    def for_part(self, label: str, roles: tuple[str, ...] = ()) -> MemoryResources:
        """Resources for the part ``label`` of a composite memory, using model ``roles``.

        The part gets its own cell id (a Chroma collection of its own) and folder; in a run its
        model calls and embeddings are metered under its label, so the usage records say what
        each part cost. Teardown registered by the part runs when the cell closes.
        """
        if self.part_resources is not None:
            return self.part_resources(label, roles)
        return replace(
            self,
            cell_id=part_cell_id(self.cell_id, label),
            cell_dir=str(Path(self.cell_dir) / part_cell_id("", label)) if self.cell_dir else None,
            closers=self.closers,
        )

    def on_close(self, fn: Callable[[], None]) -> None:
        self.closers.append(fn)

    def close(self) -> None:
        """Run the closers, last registered first; all of them, then the first error raises."""
        error: BaseException | None = None
        while self.closers:
            try:
                self.closers.pop()()
            except BaseException as exc:  # noqa: BLE001 - raised below, after the rest ran
                error = error or exc
        if error is not None:
            raise error
