"""What the offline memory model takes for a fact about the user, shared by its extraction and
its rule scripts: a stated preference, a first-person statement, a restatement of a stored fact."""

from __future__ import annotations

import re

from memory_lab.models.offline_summarizer import informativeness
from memory_lab.text.analysis import content_words

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
