"""The LangChain bridge: how a ``Memory`` reaches the ``ConversationChain`` that answers.

``PromptMemory`` reads the memory for the chain (read-only: the cell hands exchanges to the
memory itself), ``FixedContext`` holds a context read beforehand so probes can be answered in
threads, and ``quiet_classic_deprecations`` silences langchain-classic's deprecation warnings
while cells run.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core._api import LangChainDeprecationWarning
from pydantic import PrivateAttr

from memory_lab.memories.protocol import Query, Recall, render_recall
from memory_lab.models.prompt import INPUT_KEY, MEMORY_KEY, render_prompt
from memory_lab.models.tokens import TextTokens, count_tokens, encoding
from memory_lab.work_clock import clock


@contextmanager
def quiet_classic_deprecations() -> Iterator[None]:
    """Silence langchain-classic's deprecation warnings, here and only here.

    The classic memories and ``ConversationChain`` are deprecated upstream in favour of LangGraph;
    measuring them is this project's purpose, so the warnings would only bury real output.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangChainDeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


class PromptMemory(BaseMemory):
    """The one bridge from a ``Memory`` to the ``ConversationChain``: read-only.

    It asks the memory to recall for the chain's input (with the session the cell set),
    renders the ``Recall`` into the ``history`` text, and, with a ``limit``, drops the oldest
    part of that text at a line boundary so template + context + input fit in ``limit`` tokens
    (``truncated`` is then set, and ``cut_tokens`` is the tokens dropped: the whole text's count
    less the kept text's). ``context`` and ``recall`` keep what the last prompt held,
    ``recall_seconds`` how long reading it took (recall, rendering and any cut).
    """

    memory: Any
    limit: int | None = None
    style: str = "conversation"  # the answer style, whose template the limit budgets for
    session_id: str | None = None
    session_date: str | None = None
    context: str = ""
    recall: Recall | None = None
    truncated: bool = False
    cut_tokens: int = 0
    recall_seconds: float = 0.0
    # counts (and ids) of the memory text from one exchange to the next: a growing text costs
    # what it grew by, with the same results as count_tokens and token_ids
    _tokens: TextTokens = PrivateAttr(default_factory=TextTokens)

    @property
    def memory_variables(self) -> list[str]:
        return [MEMORY_KEY]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        started = clock()
        text = str(inputs.get(INPUT_KEY, ""))
        self.recall = self.memory.recall(Query(text, self.session_id, self.session_date))
        context = render_recall(self.recall)
        self.truncated, self.cut_tokens = False, 0
        if self.limit is not None:
            budget = self.limit - count_tokens(render_prompt("", text, self.style))
            whole = self._tokens.count(context)
            self.truncated = whole > budget
            if self.truncated:
                ids = self._tokens.token_ids(context)
                kept = encoding().decode(ids[len(ids) - max(0, budget) :]) if budget > 0 else ""
                cut = kept.find("\n")
                context = kept[cut + 1 :] if cut != -1 else ""
                self.cut_tokens = whole - self._tokens.count(context)
        self.context = context
        self.recall_seconds = clock() - started
        return {MEMORY_KEY: context}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Read-only: the cell hands exchanges to the memory itself (``observe``)."""

    def clear(self) -> None:
        """Read-only."""


class FixedContext(BaseMemory):
    """A probe's memory text, recalled beforehand through ``PromptMemory``: the chain that
    answers it reads this, so probes can be answered in threads while recall stays in order."""

    context: str = ""

    @property
    def memory_variables(self) -> list[str]:
        return [MEMORY_KEY]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {MEMORY_KEY: self.context}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Read-only."""

    def clear(self) -> None:
        """Read-only."""
