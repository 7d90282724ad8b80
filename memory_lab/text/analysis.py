"""Shared text analysis: words, Korean morphemes (kiwipiepy), stop words, stemming, features.

Used by the offline reader (lexical evidence), ``memories/builtin/hybrid.py`` (BM25 terms), the
offline answers to LangChain's entity and knowledge-graph prompts (``models/langchain_prompts.py``)
and MemGPT's conversation search. Everything here is general, corpus-independent machinery: English
words lose function words (scikit-learn's English stop-word list plus auxiliaries) and are lightly
stemmed; Korean text is split with kiwipiepy and matched on its content morphemes, chosen by
part-of-speech tag, so particles and endings never need a word list. kiwipiepy and scikit-learn are
imported on first use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memory_lab import work_clock
from memory_lab.text.normalize import normalize

WORD = re.compile(r"\w+", re.UNICODE)
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_DIGIT = re.compile(r"\d")

# ----------------------------------------------------------------------------- question types
# General cues, not tuned to any suite: the interrogatives of each language and the kind of
# expression that answers them.
NUMBER, TIME, NAME = 1, 2, 4
_EN_TYPE_CUES = (
    (re.compile(r"\bhow (many|much|long|old|far|often|big|tall|heavy)\b"), NUMBER),
    (re.compile(r"\bwhat (number|amount|price|percentage|score)\b"), NUMBER),
    (
        re.compile(r"\bwhen\b|\bwhat (time|date|day|year|month)\b|\bwhich (day|year|month|date)\b"),
        TIME,
    ),
    (re.compile(r"\bwho\b|\bwhom\b|\bwhose\b|\bwhere\b"), NAME),
)
# Korean interrogatives (a closed class) and the cue each one gives; they are never content.
_KO_INTERROGATIVES = {
    "언제": TIME,
    "며칠": TIME,
    "몇": NUMBER,
    "얼마": NUMBER,
    "얼마나": NUMBER,
    "누구": NAME,
    "누가": NAME,
    "어디": NAME,
    "어느": NAME,
    "무엇": 0,
    "뭐": 0,
    "무슨": 0,
    "어떤": 0,
    "어떻": 0,
    "왜": 0,
}
_EN_NUMBER_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
    hundred thousand million billion dozen half once twice""".split()
)
_EN_TIME_WORDS = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow tonight
    morning afternoon evening night weekend week month year spring summer autumn fall winter
    ago noon midnight""".split()
)
_KO_TIME_UNITS = frozenset("년 월 일 시 분 초 주".split())
# Native Korean numerals used as determiners ("세 번", "두 곡"): Kiwi tags them MM, not NR.
_KO_NUMERAL_DETERMINERS = frozenset(
    "한 두 세 석 네 넉 다섯 여섯 일곱 여덟 아홉 열 스무 두세 서너".split()
)
# First-person pronouns (closed class): a question holding one asks about the user.
_EN_FIRST_PERSON = frozenset("i me my mine myself we us our ours ourselves".split())
_KO_FIRST_PERSON = frozenset("나 저 우리 저희".split())
# Content morphemes for Korean: nouns, numbers, foreign words, verb and adjective stems, roots.
KO_CONTENT_TAGS = ("NNG", "NNP", "NNB", "NR", "SN", "SL", "SH", "VV", "VA", "XR")


@lru_cache(maxsize=1)
def kiwi():
    with work_clock.loading():  # seconds on first use: in no memory's seconds
        from kiwipiepy import Kiwi

        model = Kiwi()
        model.tokenize("가")  # its first analysis loads the rest of the model (2 s)
        return model


# Auxiliary forms and contraction pieces scikit-learn's list leaves out (closed-class grammar).
_EN_AUXILIARIES = frozenset("did does doing s t d ll m re ve".split())


@lru_cache(maxsize=1)
def en_stopwords() -> frozenset[str]:
    with work_clock.loading():  # scikit-learn's import, on first use
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | _EN_AUXILIARIES


def is_hangul_text(text: str) -> bool:
    """True when most letters of ``text`` are Hangul."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(bool(_HANGUL.match(c)) for c in letters) * 2 >= len(letters)


def stem(word: str) -> str:
    """A light English stemmer: plural, -ing, -ed and final -e folded ("moved" -> "mov")."""
    if not word.isalpha() or len(word) <= 3:
        return word
    for suffix, repl in (
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                continue
            word = word[: -len(suffix)] + repl
            if repl == "" and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # stopped -> stopp -> stop
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


@dataclass(frozen=True)
class Features:
    terms: frozenset[str]  # lexical features
    words: tuple[tuple[str, str], ...]  # (term, a surface word) for English content words
    kinds: int  # NUMBER | TIME | NAME expressions present
    cues: int  # question-type cues (for questions)
    first_person: bool = False  # "I", "my", "we"...; Korean 나, 저, 우리 (pronouns, by tag)


@lru_cache(maxsize=131072)
def features(text: str) -> Features:
    """Lexical terms, answer kinds and question cues of one sentence or question (cached)."""
    norm = normalize(text)
    terms: set[str] = set()
    surface: dict[str, str] = {}
    kinds = cues = 0
    first_person = False
    for pattern, cue in _EN_TYPE_CUES:
        if pattern.search(norm):
            cues |= cue
    stop = en_stopwords()
    words = WORD.findall(norm)
    if any(_HANGUL.search(w) for w in words):
        prev = None
        for token in kiwi().tokenize(norm):
            tag, form = token.tag.split("-")[0], token.form
            if tag == "NP" and form in _KO_FIRST_PERSON:
                first_person = True
            if form in _KO_INTERROGATIVES:
                cues |= _KO_INTERROGATIVES[form]
            elif tag == "MM" and form in _KO_NUMERAL_DETERMINERS:
                kinds |= NUMBER
            elif tag in KO_CONTENT_TAGS:
                terms.add(form)
                if tag in ("SN", "NR"):
                    kinds |= NUMBER
                if tag == "NNP":
                    kinds |= NAME
                if (prev in ("SN", "NR") and form in _KO_TIME_UNITS) or form.endswith("요일"):
                    kinds |= TIME
            prev = tag
        words = [w for w in words if not _HANGUL.search(w)]
    for word in words:
        if word in _EN_FIRST_PERSON:
            first_person = True
        if _DIGIT.search(word):
            kinds |= NUMBER
            if re.fullmatch(r"(1[89]|20)\d\d|\d{1,2}(st|nd|rd|th)|\d{1,2}(am|pm)", word):
                kinds |= TIME
        elif word in _EN_NUMBER_WORDS:
            kinds |= NUMBER
        if word in _EN_TIME_WORDS:
            kinds |= TIME
        if word not in stop:
            terms.add(stem(word))
            if word.isalpha() and len(word) > 2:
                surface.setdefault(stem(word), word)
    # Proper names: capitalised words that do not open a sentence (English).
    raw = re.findall(r"(?<![.!?:]\s)(?<!^)\b[A-Z][a-z]+", text.strip())
    if any(w.casefold() not in stop for w in raw):
        kinds |= NAME
    if re.search(r"\d:\d\d", text):
        kinds |= TIME
    return Features(frozenset(terms), tuple(sorted(surface.items())), kinds, cues, first_person)


# ------------------------------------------------------------------------------ content words
# The small function-word list of the offline memory model's fact keys and of MemGPT's search.
FUNCTION_WORDS = frozenset(
    "i i'm im my me we our you your a an the is am are was were be to of in on at for and or but"
    " so it this that just really very".split()
)


def content_words(text: str) -> set[str]:
    """The normalised words of ``text`` that are not function words."""
    return {w for w in WORD.findall(normalize(text)) if w not in FUNCTION_WORDS}
