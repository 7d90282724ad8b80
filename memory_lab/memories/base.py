"""``TextMemory``: the smallest way to write a memory that is not a classic LangChain one.

Implement ``context(query)`` (the text to put in the prompt) and ``remember(user, assistant)``;
the runner and ``ConversationChain`` see an ordinary ``BaseMemory``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from langchain_classic.base_memory import BaseMemory

from memory_lab.prompt import INPUT_KEY, MEMORY_KEY, OUTPUT_KEY


class TextMemory(BaseMemory):
    """Base class for custom memories: string context in, one exchange at a time out."""

    @property
    def memory_variables(self) -> list[str]:
        return [MEMORY_KEY]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, str]:
        return {MEMORY_KEY: self.context(str(inputs.get(INPUT_KEY, "")))}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        self.remember(str(inputs.get(INPUT_KEY, "")), str(outputs.get(OUTPUT_KEY, "")))

    def clear(self) -> None:
        """Drop everything remembered (override if the memory holds state)."""

    @abstractmethod
    def context(self, query: str) -> str:
        """The memory text to show the model for this user input."""

    @abstractmethod
    def remember(self, user: str, assistant: str) -> None:
        """Store one exchange."""
