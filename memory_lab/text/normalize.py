"""Answer normalisation and matching shared by validation and scoring.

Normalisation (docs/metrics.md, "Matching an answer"): Unicode NFKC, casefold, punctuation
folded to spaces, whitespace collapsed; a decimal ("1.9") stays one token and thousands
separators are dropped ("19,000" -> "19000").

Matching works on a further canonical form of both texts, where numbers are written as digits:
number words ("twelve", "twenty-one", "two hundred") and Korean native numbers before a counter
("세 개" -> "3개", standalone "셋" -> "3"); ordinal suffixes are dropped ("17th" -> "17"), while
ordinal words keep a marker so "first" is found for "1st" but "1" is not found in "first".
The answer's last word may appear in its plural ("Friday" in "Fridays", "city" in "cities").

An answer may not start or end inside a run of ASCII letters/digits or a decimal ("3" is not
found in "13" or "1.3", "cat" is not found in "concat"), while Hangul may be followed directly
by more letters, because Korean particles attach to the word ("부산" is found in "부산으로").
An answer of a number and a Korean counter ("3개") is also found as the bare number ("셋이야"),
but not with another counter ("3번").
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Punctuation and "_" become spaces; a decimal point is first replaced by a letter-like mark.
_PUNCT = re.compile(r"[^\w\s]+|_+")
_DECIMAL_MARK = "\u01c2"  # "ǂ": a word character, so "1.9" stays one token until the end
_DIGIT_GROUP = re.compile(r"\d+(?:[.,]\d+)+")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _digit_group(match: re.Match[str]) -> str:
    """1.9 -> one token; 19,000 -> 19000; 17.06.2023 or 1,2,3 -> separate numbers."""
    text = match.group()
    if _THOUSANDS.fullmatch(text):
        return text.replace(",", "").replace(".", _DECIMAL_MARK)
    if text.count(".") == 1 and "," not in text:
        return text.replace(".", _DECIMAL_MARK)
    return text.replace(".", " ").replace(",", " ")


def _prepare(text: str) -> str:
    text = str(text)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return _DIGIT_GROUP.sub(_digit_group, text.casefold())


def _fold(text: str) -> list[str]:
    """Punctuation folded to spaces, then split into words."""
    return _PUNCT.sub(" ", text).split()


def normalize(text: str) -> str:
    """Return ``text`` NFKC-normalised, casefolded, with punctuation and whitespace folded."""
    return " ".join(_fold(_prepare(text))).replace(_DECIMAL_MARK, ".")


# --------------------------------------------------------------------------- English numbers

_SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    " fifteen sixteen seventeen eighteen nineteen"
).split()
_SMALL_ORD = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth"
    " thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
_TENS_WORDS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_TENS_ORD_WORDS = "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth"
_CARDINAL = {w: i for i, w in enumerate(_SMALL)} | {
    w: 20 + 10 * i for i, w in enumerate(_TENS_WORDS)
}
_ORDINAL = {w: i for i, w in enumerate(_SMALL_ORD)} | {
    w: 20 + 10 * i for i, w in enumerate(_TENS_ORD_WORDS.split())
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_SCALES_ORD = {"hundredth": 100, "thousandth": 1000, "millionth": 1_000_000}
_NUMBER_WORDS = frozenset([*_CARDINAL, *_ORDINAL, *_SCALES, *_SCALES_ORD])
_ORDINAL_SUFFIXES = ("st", "nd", "rd", "th")
# "one" after these words is a pronoun ("no one", "the red one"), not a number.
_ONE_PRONOUN = frozenset(
    "no any some every each the this that which another a an other only same last next new"
    " old big small little right wrong good bad favorite favourite".split()
)


def _below_hundred(words: list[str], i: int) -> tuple[int, int, bool] | None:
    """(value, next index, ordinal) of 0..99 written as words at ``words[i]``."""
    if i >= len(words):
        return None
    word = words[i]
    if word in _ORDINAL:
        return _ORDINAL[word], i + 1, True
    if word not in _CARDINAL:
        return None
    value = _CARDINAL[word]
    if value >= 20 and value % 10 == 0 and i + 1 < len(words):
        unit = words[i + 1]
        if 1 <= _CARDINAL.get(unit, 0) <= 9:
            return value + _CARDINAL[unit], i + 2, False
        if 1 <= _ORDINAL.get(unit, 0) <= 9:
            return value + _ORDINAL[unit], i + 2, True
    return value, i + 1, False


def _group(words: list[str], i: int) -> tuple[int, int, bool] | None:
    """(value, next index, ordinal) of 0..999 written as words at ``words[i]``."""
    head = _below_hundred(words, i)
    if head and head[2]:
        return head
    value, j = (head[0], head[1]) if head else (None, i)
    if j < len(words) and words[j] in ("hundred", "hundredth") and (value or 1) <= 9:
        value = (value or 1) * 100
        if words[j] == "hundredth":
            return value, j + 1, True
        j += 1
        k = j + 1 if j < len(words) and words[j] == "and" else j
        tail = _below_hundred(words, k)
        if tail and tail[0] > 0:
            return value + tail[0], tail[1], tail[2]
    if value is None:
        return None
    return value, j, False


def _number_at(words: list[str], i: int) -> tuple[int, int, bool] | None:
    """(value, next index, ordinal) of a number written as words at ``words[i]``."""
    total, j, found = 0, i, False
    while j < len(words):
        group = _group(words, j)
        if group is None and not (words[j] in _SCALES or words[j] in _SCALES_ORD):
            break
        value, j, ordinal = group if group else (1, j, False)
        found = True
        if ordinal:
            return total + value, j, True
        scale = words[j] if j < len(words) else ""
        if scale in ("thousand", "million", "thousandth", "millionth"):
            total += value * (_SCALES.get(scale) or _SCALES_ORD[scale])
            j += 1
            if scale in _SCALES_ORD:
                return total, j, True
            if j + 1 < len(words) and words[j] == "and" and _group(words, j + 1):
                j += 1
            continue
        total += value
        break
    return (total, j, False) if found else None


def _number_words(words: list[str], *, answer: bool) -> list[str]:
    """Numbers written as words become digits ("twenty one" -> "21", "third" -> "3ord");
    "17th" loses its suffix ("17ord" in an answer); "3 hundred" becomes "300"."""
    out: list[str] = []
    i, n = 0, len(words)
    while i < n:
        word = words[i]
        if word in _NUMBER_WORDS:
            number = _number_at(words, i)
            if number is not None:
                value, j, ordinal = number
                pronoun = j == i + 1 and word == "one" and bool(out) and out[-1] in _ONE_PRONOUN
                out.append(word if pronoun else f"{value}ord" if ordinal else str(value))
                i = j
                continue
        elif word[0].isdigit():
            if word.endswith(_ORDINAL_SUFFIXES) and word[:-2].isdigit():
                word = word[:-2] + ("ord" if answer else "")
            elif i + 1 < n and words[i + 1] in _SCALES and _is_number(word):
                value = float(word.replace(_DECIMAL_MARK, ".")) * _SCALES[words[i + 1]]
                if value.is_integer():
                    out.append(str(int(value)))
                    i += 2
                    continue
        out.append(word)
        i += 1
    return out


def _is_number(word: str) -> bool:
    return word.replace(_DECIMAL_MARK, "", 1).isdigit()


# --------------------------------------------------------------------------- Korean numbers

_NATIVE_COUNTERS = (
    "개 번 번째 살 명 마리 권 잔 병 장 대 벌 켤레 송이 그릇 가지 군데 곳 시 시간 달 주 주일"
    " 사람 분 통 채 척 쪽 판 줄 칸 접시 봉지 상자 박스 그루 곡 편 끼 캔 컵 조각 차례 바퀴"
).split()
_SINO_COUNTERS = "년 월 일 초 층 원 개월 주년 학년 회 점 호 세 퍼센트 프로 인분 등".split()
_COUNTERS = sorted(set(_NATIVE_COUNTERS + _SINO_COUNTERS), key=len, reverse=True)
_NATIVE_ALT = "|".join(sorted(_NATIVE_COUNTERS, key=len, reverse=True))
_COUNTER_ALT = "|".join(_COUNTERS)
# What may follow a counter inside the same word: particles and copulas ("세 개를", "두 번이요").
_COUNTER_PARTICLES = (
    "이가은는을를도만에의로으과와나씩쯤정째밖야예요뿐까부동반전후랑께보마라짜였인입간"
)
# Endings that join a counter as a copula drops its 이 ("스무 개면", "세 개니까", "두 번이고"),
# except where counter and ending make another word ("한 장면": one scene).
_COUNTER_ENDINGS = "면니지고던데든"
_AFTER_COUNTER = rf"(?=[^가-힣]|$|[{_COUNTER_PARTICLES}]|(?<!장)[{_COUNTER_ENDINGS}])"
# What may follow a standalone native number ("셋이야", "둘은"), never "넷플릭스" or "하나님".
_AFTER_STANDALONE = r"(?=[^가-힣]|$|[이가은는을를만야요예에의과와랑뿐까밖씩쯤로으])"
_UNIT_MODIFIERS = {
    "한": 1, "두": 2, "세": 3, "석": 3, "네": 4, "넉": 4, "다섯": 5,
    "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9,
}  # fmt: skip
_UNIT_STANDALONE = {
    "하나": 1, "둘": 2, "셋": 3, "넷": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9,
}  # fmt: skip
_TENS_KO = {
    "열": 10, "스물": 20, "스무": 20, "서른": 30, "마흔": 40, "쉰": 50,
    "예순": 60, "일흔": 70, "여든": 80, "아흔": 90,
}  # fmt: skip
_TENS_ALONE = {k: v for k, v in _TENS_KO.items() if k not in ("열", "쉰", "스무")}


def _alt(words: dict[str, int]) -> str:
    return "|".join(sorted(words, key=len, reverse=True))


# Both patterns start with the number word itself, so the regex engine skips quickly to
# candidates; the callbacks check what precedes the word and which combinations are numbers.
_KO_MODIFIED = re.compile(
    rf"(?P<a>{_alt(_TENS_KO | _UNIT_MODIFIERS)})(?: ?(?P<u>{_alt(_UNIT_MODIFIERS)}))?"
    rf" ?(?P<c>{_NATIVE_ALT}){_AFTER_COUNTER}"
)
_KO_STANDALONE = re.compile(
    rf"(?P<a>{_alt(_TENS_KO | _UNIT_STANDALONE)})(?: ?(?P<u>{_alt(_UNIT_STANDALONE)}))?"
    rf"{_AFTER_STANDALONE}"
)
_KO_DIGIT_COUNTER = re.compile(rf"(\d) (?=(?:{_COUNTER_ALT}){_AFTER_COUNTER})")
_HANGUL = re.compile(r"[가-힣]")
_KO_BEFORE = re.compile(r"[가-힣0-9]")


def _inside_word(match: re.Match[str]) -> bool:
    start = match.start()
    return bool(start) and _KO_BEFORE.match(match.string, start - 1) is not None


def _korean_value(match: re.Match[str], units: dict[str, int], alone: dict[str, int]) -> int | None:
    """The value of a matched native number, or None when the words make no number."""
    first, unit = match.group("a"), match.group("u")
    if unit:
        return _TENS_KO[first] + units[unit] if first in _TENS_KO else None
    return alone.get(first)


def _modified(match: re.Match[str]) -> str:
    value = _korean_value(match, _UNIT_MODIFIERS, _TENS_KO | _UNIT_MODIFIERS)
    if value is None or _inside_word(match):
        return match.group()
    return f"{value}{match.group('c')}"


def _standalone(match: re.Match[str]) -> str:
    if _inside_word(match):
        return match.group()
    value = _korean_value(match, _UNIT_STANDALONE, _TENS_ALONE | _UNIT_STANDALONE)
    if value is not None:
        return str(value)
    first = match.group("a")
    rest = match.group()[len(first) :]
    if first in _UNIT_STANDALONE and rest.startswith(" "):  # counting: "하나 둘 셋"
        return str(_UNIT_STANDALONE[first]) + _KO_STANDALONE.sub(_standalone, rest)
    return match.group()


def _korean_numbers(text: str) -> str:
    """Native Korean numbers become digits: "세 개" -> "3개", "스물다섯 살" -> "25살", "셋" -> "3";
    a digit and its counter are joined ("3 개" -> "3개")."""
    text = _KO_STANDALONE.sub(_standalone, _KO_MODIFIED.sub(_modified, text))
    return _KO_DIGIT_COUNTER.sub(r"\1", text)


# --------------------------------------------------------------------------- matching

_WORD_CHAR = "[a-z0-9.]"  # ASCII letters and digits; a dot only survives inside a decimal


def _canonical(text: str, *, answer: bool = False) -> str:
    """The matching form: normalised, numbers as digits, digit ordinals without suffix."""
    text = _prepare(text)
    if _HANGUL.search(text):
        text = _korean_numbers(text)
    words = _number_words(_fold(text), answer=answer)
    return " ".join(words).replace(_DECIMAL_MARK, ".")


@lru_cache(maxsize=32)
def _haystack(text: str) -> str:
    return _canonical(text)


def _plural(word: str) -> str:
    """A regex for ``word`` or its regular plural."""
    forms = {word, word + "s"}
    if word.endswith(("s", "x", "z", "ch", "sh", "o")):
        forms.add(word + "es")
    if word.endswith("y") and word[-2] not in "aeiou":
        forms.add(word[:-1] + "ies")
    if word.endswith("f"):
        forms.add(word[:-1] + "ves")
    if word.endswith("fe"):
        forms.add(word[:-2] + "ves")
    return "(?:" + "|".join(sorted(forms, key=len, reverse=True)) + ")"


def _counter_piece(number: str, counter: str) -> str:
    longer = [c[len(counter) :] for c in _COUNTERS if c != counter and c.startswith(counter)]
    longer.append("째")
    not_longer = "(?!" + "|".join(map(re.escape, longer)) + ")"
    bare = rf"(?!{_WORD_CHAR}|(?:{_COUNTER_ALT}))"
    return rf"{re.escape(number)}(?:{re.escape(counter)}{not_longer}|{bare})"


_COUNTED = re.compile(rf"(\d+(?:\.\d+)?)({_COUNTER_ALT})")
_ASCII_ALNUM = re.compile(r"[a-z0-9]")


@lru_cache(maxsize=8192)
def _needle(answer: str) -> re.Pattern[str] | None:
    """The compiled pattern that finds ``answer`` in a canonical text, or None if empty."""
    text = _canonical(answer, answer=True)
    if not text:
        return None
    tokens = text.split(" ")
    pieces = []
    for i, token in enumerate(tokens):
        if m := re.fullmatch(r"(\d+)ord", token):
            pieces.append(rf"{m.group(1)}(?:ord)?")
        elif m := _COUNTED.fullmatch(token):
            pieces.append(_counter_piece(m.group(1), m.group(2)))
        elif i == len(tokens) - 1 and re.fullmatch(r"[a-z]{2,}", token):
            pieces.append(_plural(token))
        else:
            pieces.append(re.escape(token))
    pattern = " ".join(pieces)
    if _ASCII_ALNUM.match(text[0]):
        pattern = f"(?<!{_WORD_CHAR})" + pattern
    if _ASCII_ALNUM.match(text[-1]):
        pattern += f"(?!{_WORD_CHAR})"
    return re.compile(pattern)


def contains_answer(text: str, answer: str) -> bool:
    """True when ``answer`` occurs in ``text`` after normalisation, on ASCII word boundaries
    (``text`` may be raw or already the output of ``normalize``: matching canonicalises both)."""
    needle = _needle(answer)
    return needle is not None and needle.search(_haystack(text)) is not None


def find_any(text: str, answers: list[str]) -> str | None:
    """The first of ``answers`` found in ``text``, or None."""
    haystack = _haystack(text)
    for answer in answers:
        needle = _needle(answer)
        if needle is not None and needle.search(haystack):
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
