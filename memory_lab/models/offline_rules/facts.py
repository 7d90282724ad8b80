"""What the offline memory model takes for a fact about the user, shared by its extraction and
its rule scripts: a stated preference, a first-person statement, a restatement of a stored fact;
the facts a message's user sentences state, and what each is about (``topic``, ``relation``)."""

from __future__ import annotations

import re

from memory_lab.models.offline_rules.base import RuleSettings
from memory_lab.models.offline_summarizer import informativeness, speaker_sentences
from memory_lab.text.analysis import FUNCTION_WORDS, WORD, content_words
from memory_lab.text.normalize import normalize

PREFERENCE = re.compile(
    r"\b(love|like|prefer|favou?rite|enjoy|hate|dislike|can't stand|allergic)\b|"
    r"좋아|선호|싫어|알레르기",
    re.I,
)
FIRST_PERSON = (
    r"\b(i|i'm|i've|i'd|i'll|my|mine|me|we|we're|our|us)\b|"
    r"(저는|제가|저희|저도|제\s|나는|내가|나도|내\s|우리)"
)


def personal_fact(sentence: str, min_score: float) -> bool:
    """A durable fact (informativeness of at least ``min_score``) or a preference, not a
    question."""
    if sentence.rstrip().endswith(("?", "？")):
        return False
    return informativeness("Human", sentence) >= min_score or bool(PREFERENCE.search(sentence))


def stored_key(text: str, known: list[tuple[str, str]]) -> str | None:
    """The key of the stored fact ``text`` restates with a new value, or None.

    Restating: at least two content words in common, and at least 60% of the smaller fact's
    content words (``I prefer aisle seats on flights`` -> ``I now prefer window seats on
    flights``). The most overlapping stored fact wins; ties go to the one listed first.
    """
    words = content_words(text)
    best, best_shared = None, 0
    for key, value in known:
        old = content_words(value)
        shared = len(words & old)
        if shared >= 2 and shared >= 0.6 * min(len(words), len(old)) and shared > best_shared:
            best, best_shared = key, shared
    return best


# ------------------------------------------------- a message's facts, their topic and relation

USER = "User"
_NAME = re.compile(r"[A-Z][\w'&-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'&-]*)*")
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "OK", "Okay"})


def user_sentences(message: str) -> list[str]:
    """The user's sentences in an episode's ``User: ...`` / ``Assistant: ...`` lines."""
    lines = []
    for line in message.splitlines():
        line = re.sub(rf"^{USER}:\s*", "Human: ", line)
        lines.append(re.sub(r"^Assistant:\s*", "AI: ", line))
    return [t for s, t in speaker_sentences("\n".join(lines)) if s == "Human"]


def fact_sentences(message: str, settings: RuleSettings) -> list[str]:
    """The user's sentences stating a fact about themselves, each once."""
    out: list[str] = []
    for sentence in user_sentences(message):
        if sentence in out or not re.search(FIRST_PERSON, sentence, re.I):
            continue
        if personal_fact(sentence, settings.min_fact_score):
            out.append(sentence)
    return out


def _content(text: str) -> list[str]:
    return [w for w in WORD.findall(normalize(text)) if w not in FUNCTION_WORDS]


def topic(sentence: str) -> str:
    """What a fact is about: its first name after the first word, else three content words."""
    first = re.match(r"\s*\S+", sentence)
    rest = sentence[first.end() :] if first else sentence
    for match in _NAME.finditer(rest):
        words = match.group(0).split()
        while words and words[0] in _NOT_NAMES:
            words.pop(0)
        if words:
            return " ".join(words)
    return " ".join(_content(sentence)[:3]) or sentence.strip()[:40]


def relation(sentence: str) -> str:
    """The fact's relation: its first content word in capitals (``PREFER``), else
    ``RELATES_TO``."""
    words = [w for w in _content(sentence) if w.isascii()]
    return re.sub(r"\W+", "_", words[0]).upper() if words else "RELATES_TO"
