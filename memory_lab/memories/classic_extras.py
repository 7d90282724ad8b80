"""The rest of LangChain's classic memory family: token buffer, entity and knowledge-graph memory.

Like ``classic.py``, the factories configure the LangChain classes as they are, behind
``ClassicMemory``. Every model call goes through the memory model role (offline: the offline
memory model, which recognises these classes' own prompts), and every token count through the
run's tokenizer, so nothing downloads a tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, get_buffer_string

from memory_lab.memories.classic import _COMMON, ClassicMemory, _messages
from memory_lab.memories.protocol import MemoryResources
from memory_lab.memories.registry import ParamDoc, declare
from memory_lab.models.offline_base import OfflineChatModel


class BufferTokenCounter(OfflineChatModel):
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

    @property
    def _llm_type(self) -> str:
        return "memory-lab-buffer-token-counter"


def token_buffer(res: MemoryResources, max_token_limit: int = 600) -> ClassicMemory:
    from langchain_classic.memory import ConversationTokenBufferMemory

    memory = ConversationTokenBufferMemory(
        **_COMMON,
        llm=BufferTokenCounter(count=res.count_tokens),
        max_token_limit=max_token_limit,
        return_messages=False,
    )
    return ClassicMemory(memory, "token_buffer", "verbatim", _messages)


MEMORIES = (
    declare(
        "token_buffer",
        token_buffer,
        "The most recent exchanges, verbatim, within a token budget "
        "(ConversationTokenBufferMemory).",
        {"max_token_limit": ParamDoc("tokens of verbatim history kept", min=1)},
    ),
)
