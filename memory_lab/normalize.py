"""Answer normalisation and matching shared by validation and scoring.

Normalisation follows DESIGN.md section 6: Unicode NFKC, casefold, punctuation folded to spaces,
whitespace collapsed. Matching is substring matching on the normalised text with one guard: an
answer may not start or end inside a run of ASCII letters/digits ("3" is not found in "13",
"cat" is not found in "concat"), while Hangul and other scripts may be followed directly by
more letters, because Korean particles attach to the word ("부산" is found in "부산으로").
"""

from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s]|_", re.UNICODE)
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Return ``text`` NFKC-normalised, casefolded, with punctuation and whitespace folded."""
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    text = _PUNCT.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


def _is_ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def contains_answer(text: str, answer: str, *, normalized: bool = False) -> bool:
    """True when ``answer`` occurs in ``text`` after normalisation, on ASCII word boundaries."""
    haystack = text if normalized else normalize(text)
    needle = normalize(answer)
    if not needle:
        return False
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        before = haystack[start - 1] if start > 0 else " "
        after = haystack[end] if end < len(haystack) else " "
        left_ok = not (_is_ascii_alnum(before) and _is_ascii_alnum(needle[0]))
        right_ok = not (_is_ascii_alnum(after) and _is_ascii_alnum(needle[-1]))
        if left_ok and right_ok:
            return True
        start = haystack.find(needle, start + 1)
    return False


def find_any(text: str, answers: list[str]) -> str | None:
    """The first of ``answers`` found in ``text``, or None."""
    haystack = normalize(text)
    for answer in answers:
        if contains_answer(haystack, answer, normalized=True):
            return answer
    return None


_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？])\s+")
_ABBREVIATIONS = frozenset(
    "dr mr mrs ms prof st jr sr vs etc e.g i.e no approx apt dept est fig inc ltd mt ave"
    " blvd".split()
)


def sentences(line: str) -> list[str]:
    """Split one line into sentences, not after abbreviations such as "Dr." or initials."""
    parts = _SENTENCE_BREAK.split(line.strip())
    out: list[str] = []
    for part in parts:
        if out:
            last_word = out[-1].rsplit(None, 1)[-1].rstrip(".").casefold()
            if last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha()):
                out[-1] = f"{out[-1]} {part}"
                continue
        out.append(part)
    return [p for p in out if p.strip()]
