"""``TextMemory``: the smallest way to write a memory on the protocol.

Implement ``context(query)`` (the text to put in the prompt) and ``remember(user, assistant)``.
It is a pydantic model, so fields declared on the class (``notes: list[str] = []``) are fresh per
instance; the texts in those fields are what it holds (``held_texts``, its footprint).
``remember`` gets the user's line with its session date in front when the run has timestamps on
(the default; ``build_memory`` sets ``timestamps`` from the cell's resources). Override
``observe``/``end_session`` instead when the memory needs turn ids, session dates or the end of
a session.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memory_lab.memories.protocol import (
    Exchange,
    Item,
    Query,
    Recall,
    SessionInfo,
    as_memory,
    snapshot_texts,
)


class TextMemory(BaseModel):
    """Base class for small custom memories: string context in, one exchange at a time out."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    timestamps: bool = Field(default=True, exclude=True)

    def observe(self, exchange: Exchange) -> None:
        user = exchange.dated_user() if self.timestamps else exchange.user
        self.remember(user, exchange.assistant)

    def end_session(self, session: SessionInfo) -> None:
        """Nothing to do by default."""

    def recall(self, query: Query) -> Recall:
        text = self.context(query.text)
        return Recall((Item(text, (), "other"),) if text else ())

    def snapshot(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def held_texts(self) -> list[str]:
        """The texts in the memory's fields (its snapshot); override to say exactly."""
        return snapshot_texts(self.snapshot())

    def close(self) -> None:
        """Nothing to release by default."""

    @abstractmethod
    def context(self, query: str) -> str:
        """The memory text to show the model for this user input."""

    @abstractmethod
    def remember(self, user: str, assistant: str) -> None:
        """Store one exchange."""


@as_memory.register(TextMemory)
def _with_timestamps(memory: TextMemory, res: Any, name: str) -> TextMemory:
    memory.timestamps = getattr(res, "timestamps", True)
    return memory
