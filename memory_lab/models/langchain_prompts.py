"""LangChain's entity and knowledge-graph memory prompts, recognised and answered offline.

``ConversationEntityMemory`` asks its LLM for the proper nouns of the last line and for an
updated summary of one entity; ``ConversationKGMemory`` asks for the knowledge triples of the
last line. Each prompt is recognised by LangChain's own template (the literal text around its
variables must match exactly), so the variables come back as the class filled them and the
worked examples inside a template never leak into an answer. The answers are deterministic:

- **proper nouns**: capitalised words and runs of them (``Casa do Largo``), a sentence's first
  word only when the conversation also capitalises it mid-sentence (or a name follows it);
  Korean proper nouns by Kiwi's ``NNP`` tag; months, weekdays and ``I`` are not entities;
  ``NONE`` when there is none.
- **entity summary**: the last line's statements naming the entity, with the line's date stamp,
  merged into the existing summary; an old sentence about the same thing (most of its content
  words shared, or any with an update word such as "instead") is replaced; the newest sentences
  are kept within ``ENTITY_SUMMARY_TOKENS``. Nothing new: the existing summary, unchanged.
- **triples**: ``(subject, predicate, object)`` from simple statements: ``I``/``we`` is
  ``Human``, ``my X`` is ``Human's X`` (``my friend Priya`` is ``Priya``), a name is itself; the
  predicate is the verb group with its preposition, the object the rest of the clause. Korean
  statements with a subject or topic particle give (subject, verb lemma, what lies between).
  Questions, pronoun subjects and anything else give ``NONE``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from string import Formatter

from memory_lab.models.tokens import count_tokens
from memory_lab.text.analysis import en_stopwords, features, is_hangul_text, kiwi
from memory_lab.text.normalize import sentences

ENTITY_SUMMARY_TOKENS = 128
KG_TRIPLE_DELIMITER = "<|>"  # as langchain_community.graphs.networkx_graph parses them
HUMAN = "Human"

_STAMP = re.compile(r"^\s*\[([^\]\n]{1,40})\]\s*")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_TOKEN = re.compile(r"[^\W\d_][\w'’-]*|\d[\w'’,.-]*|[.!?;:]")
_MARKS = frozenset(".!?;:\n")
_NOT_ENTITIES = frozenset(
    "january february march april may june july august september october november december"
    " monday tuesday wednesday thursday friday saturday sunday i i'm i'd i've i'll ok okay"
    " today tonight tomorrow yesterday morning evening weekend".split()
)
_CONNECTORS = frozenset("of do da de del della di du la le van von der den".split())
_TITLES = frozenset("mr mrs ms dr prof st mt".split())
_UPDATE = re.compile(
    r"\b(instead|now|anymore|no longer|changed?|moved|switched|rebooked|cancel+ed|actually|"
    r"new|replaced|updated?)\b|대신|이제|바꿨|바뀌|변경|취소|옮겼|이사|새로",
    re.I,
)


# ---------------------------------------------------------------------- recognising prompts


@lru_cache(maxsize=16)
def _template_pattern(template: str) -> tuple[str, re.Pattern[str]]:
    """The literal text a template opens with, and a regex capturing each of its variables."""
    pieces, seen, opening = [], set(), None
    for literal, name, _, _ in Formatter().parse(template):
        opening = literal if opening is None else opening
        pieces.append(re.escape(literal))
        if name is not None:
            pieces.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*)")
            seen.add(name)
    return opening or "", re.compile("".join(pieces), re.S)


def match_template(template: str, prompt: str) -> dict[str, str] | None:
    """The variables a prompt filled ``template`` with, or None when it is another prompt.

    Variables match greedily, so a later marker is found at its last occurrence: text inside
    the conversation history that repeats the template's wording cannot shift the variables.
    """
    opening, pattern = _template_pattern(template)
    if not prompt.startswith(opening):
        return None
    match = pattern.fullmatch(prompt)
    return match.groupdict() if match else None


def langchain_memory_reply(prompt: str) -> str | None:
    """The reply to a LangChain entity or knowledge-graph memory prompt; None for any other."""
    from langchain_classic.memory.prompt import (
        ENTITY_EXTRACTION_PROMPT,
        ENTITY_SUMMARIZATION_PROMPT,
        KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT,
    )

    filled = match_template(ENTITY_EXTRACTION_PROMPT.template, prompt)
    if filled is not None:
        return ", ".join(proper_nouns(filled["input"], filled["history"])) or "NONE"
    filled = match_template(ENTITY_SUMMARIZATION_PROMPT.template, prompt)
    if filled is not None:
        return update_entity_summary(filled["entity"], filled["summary"], filled["input"])
    filled = match_template(KNOWLEDGE_TRIPLE_EXTRACTION_PROMPT.template, prompt)
    if filled is not None:
        return format_triples(knowledge_triples(filled["input"], filled["history"]))
    return None


def split_stamp(line: str) -> tuple[str | None, str]:
    """(date, text) of a line saved with its date in front (``[2026-03-02] ...``)."""
    match = _STAMP.match(line)
    if not match:
        return None, line.strip()
    return match.group(1), line[match.end() :].strip()


# ---------------------------------------------------------------------- proper nouns


def _words(text: str) -> list[tuple[str, bool]]:
    """(token, opens a sentence) for every word and mark of ``text``, date stamps left out.

    A sentence opens at each line, after ``.``, ``!``, ``?`` and ``:`` (a speaker's prefix),
    but not after a title's period (``Dr. Kim``); every line ends with a ``\n`` mark.
    """
    out: list[tuple[str, bool]] = []
    for line in re.sub(r"\[[^\]\n]{1,40}\]", " ", text).splitlines():
        opening, previous = True, ""
        for token in _TOKEN.findall(line):
            if token in _MARKS:
                if token != ";" and not (token == "." and previous.casefold() in _TITLES):
                    opening = True
                out.append((token, False))
            else:
                out.append((token, opening))
                opening = False
            previous = token
        out.append(("\n", False))
    return out


def _bare(word: str) -> tuple[str, bool]:
    """The word without a possessive ``'s``, and whether it had one."""
    for suffix in ("'s", "’s"):
        if word.endswith(suffix):
            return word[: -len(suffix)], True
    return word.rstrip("'’"), False


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and word.casefold() not in _NOT_ENTITIES


def _known_names(text: str) -> set[str]:
    """Words ``text`` capitalises where no sentence opens: names, whatever their position."""
    return {
        _bare(w)[0]
        for w, opening in _words(text)
        if not opening and _capitalised(_bare(w)[0]) and w[:1].isalpha()
    }


def proper_nouns(line: str, history: str = "") -> list[str]:
    """The named entities of one line, in order (see the module docstring for the rule)."""
    _, text = split_stamp(line)
    known = _known_names(f"{history}\n{text}")
    stop = en_stopwords()
    names: list[str] = []
    run: list[str] = []
    held: str | None = None  # a sentence's first word, a name only if another name follows

    def close() -> None:
        nonlocal run, held
        while run and run[-1].casefold() in _CONNECTORS:
            run.pop()
        if run:
            names.append(" ".join(run))
        run, held = [], None

    words = _words(text)
    for i, (word, opening) in enumerate(words):
        bare, possessive = _bare(word)
        if word in _MARKS:
            if word == "." and held and held.casefold() in _TITLES:
                held += "."
                continue
            if word == "." and run and run[-1].casefold() in _TITLES:
                run[-1] += "."
                continue
            close()
            continue
        name = _capitalised(bare) and bare[:1].isalpha()
        if name and opening and bare not in known and not (bare.isupper() and len(bare) > 1):
            following = words[i + 1][0] if i + 1 < len(words) else ""
            if bare.casefold() not in stop and _capitalised(_bare(following)[0]):
                held = bare
            elif bare.casefold() not in stop and not possessive and _opens_statement(words, i):
                name = True  # "Aisha is building ...": a name opening a statement
            elif bare.casefold() in _TITLES:
                held = bare
            else:
                name = False
            if held:
                continue
        if name:
            if held:
                run.append(held)
                held = None
            run.append(bare)
            if possessive:
                close()
        elif run and bare.casefold() in _CONNECTORS and run[-1].casefold() not in _CONNECTORS:
            run.append(bare)
        else:
            close()
    close()
    if _HANGUL.search(text):
        names += _korean_proper_nouns(text)
    return list(dict.fromkeys(n for n in names if n and n.casefold() not in _NOT_ENTITIES))


def _korean_proper_nouns(text: str) -> list[str]:
    """Kiwi's proper nouns (``NNP``), adjacent ones joined (``해운대 호텔`` stays two)."""
    names: list[str] = []
    end = -1
    for token in kiwi().tokenize(text):
        if token.tag == "NNP" and _HANGUL.search(token.form):
            if token.start == end and names:
                names[-1] += token.form
            else:
                names.append(token.form)
            end = token.start + token.len
        else:
            end = -1
    return names


# ---------------------------------------------------------------------- entity summaries


def _mentions(sentence: str, entity: str) -> bool:
    if _HANGUL.search(entity):
        return entity in sentence
    return re.search(rf"(?<!\w){re.escape(entity)}(?!\w)", sentence) is not None


def _statements(text: str) -> list[str]:
    return [s for s in sentences(text) if not s.rstrip().endswith(("?", "？"))]


def _slot_terms(sentence: str, entity: str) -> frozenset[str]:
    """Content terms of a sentence apart from the entity and any number: what it is about."""
    _, text = split_stamp(sentence)
    terms = features(text).terms - features(entity).terms
    return frozenset(t for t in terms if not any(c.isdigit() for c in t))


def same_fact(old: str, new: str, entity: str) -> bool:
    """Whether ``new`` restates what ``old`` said about ``entity`` (so replaces it)."""
    a, b = _slot_terms(old, entity), _slot_terms(new, entity)
    shared = len(a & b)
    if not shared:
        return False
    overlap = shared / min(len(a), len(b))
    return overlap >= 0.6 or (overlap >= 0.25 and _UPDATE.search(new) is not None)


def update_entity_summary(entity: str, summary: str, line: str) -> str:
    """The entity's summary with the line's statements about it merged in (newest last)."""
    date, text = split_stamp(line)
    new = [s for s in _statements(text) if _mentions(s, entity)]
    if not new:
        return summary.strip()
    kept = _summary_sentences(summary)
    for sentence in new:
        kept = [old for old in kept if old != sentence and not same_fact(old, sentence, entity)]
        kept.append(f"[{date}] {sentence}" if date else sentence)
    out: list[str] = []
    used = 0
    for sentence in reversed(kept):
        cost = count_tokens(sentence) + 1
        if out and used + cost > ENTITY_SUMMARY_TOKENS:
            break
        out.insert(0, sentence)
        used += cost
    return " ".join(out)


def _summary_sentences(summary: str) -> list[str]:
    """A summary's sentences, each keeping the date stamp written in front of it."""
    parts = re.split(r"\s+(?=\[[^\]\n]{1,40}\]\s)", summary.strip())
    return [s for part in parts if part for s in _sentences_keeping_stamp(part)]


def _sentences_keeping_stamp(part: str) -> list[str]:
    date, text = split_stamp(part)
    found = sentences(text)
    return [f"[{date}] {s}" if date else s for s in found]


# ---------------------------------------------------------------------- knowledge triples

_LEAD = re.compile(
    r"^(?:(?:oh|ok|okay|so|well|also|and|but|yes|yeah|no|ha|phew|perfect|great|agreed|right|"
    r"actually|anyway|honestly|by the way|big news|update|good news|sadly|luckily)\b[,:!]?\s+)+",
    re.I,
)
_FRAMING = re.compile(
    r"^(?:i|we) (?:know|think|heard|guess|believe|feel|mean|noticed|found out)(?: that)? ", re.I
)
_CONTRACTIONS = (
    (r"\bI'm\b|\bI’m\b", "I am"),
    (r"\b(I|we|you|they)'ve\b", r"\1 have"),
    (r"\b(I|we|you|they)'ll\b", r"\1 will"),
    (r"\b(I|we|you|they)'d\b", r"\1 would"),
    (r"\b(we|you|they)'re\b", r"\1 are"),
    (r"\b(\w+)n't\b", r"\1 not"),
)
_AUX = frozenset(
    "is are was were am be been being has have had will would can could should must may might"
    " shall do does did get gets got".split()
)
_ADVERBS = frozenset(
    "always never also still just usually often now really finally already only even mostly"
    " not no longer sometimes rarely currently".split()
)
_IRREGULAR = frozenset(
    "went made said took came left bought met ran began brought built chose drove found gave"
    " grew held kept knew lost paid put read sent set sold spent stood taught told thought"
    " understood won wrote broke fell felt heard led".split()
)
_PARTICLES = frozenset(
    "to in at on for with from as of about by into along out up over around after near"
    " through off under".split()
)
_ARTICLES = frozenset("a an the".split())
_CLAUSE_END = re.compile(
    r",(?!\d)|;| (?:because|but|so|which|who|since|while|although|though|and then|and i|and we)\b",
    re.I,
)
_FIRST_PERSON = {"am": "is", "have": "has", "do": "does"}


def _verb_like(word: str) -> bool:
    w = word.casefold()
    if w in _AUX or w in _IRREGULAR:
        return True
    if not w.isalpha() or len(w) < 4:
        return False
    return w.endswith("ed") or (w.endswith("s") and not w.endswith(("ss", "us", "is", "'s")))


def _opens_statement(words: list[tuple[str, bool]], i: int) -> bool:
    """Whether the word after ``words[i]`` is a verb that goes on (``Aisha prefers X``), so the
    capitalised ``words[i]`` is a name opening a statement rather than ``Big news: ...``."""
    following = [w for w, _ in words[i + 1 : i + 3]]
    if not following or not _verb_like(following[0]):
        return False
    regular = following[0].casefold() in _AUX or following[0].casefold() in _IRREGULAR
    return (
        regular
        or following[0].endswith("ed")
        or (len(following) > 1 and following[1] not in _MARKS)
    )


def _clean(text: str) -> str:
    """A triple part as LangChain parses it: no ", " inside, no closing punctuation."""
    return re.sub(r"\s+", " ", text.replace(", ", " ")).strip(" .!;:\"'()")


def _subject(words: list[str], known: set[str]) -> tuple[list[str], list[str], int] | None:
    """(subjects, descriptors for an extra ``is Human's`` triple, index of the verb group)."""
    if not words:
        return None
    first = words[0].casefold()
    if first in ("i", "we"):
        return [HUMAN], [], 1
    if first in ("my", "our", "the"):
        for j in range(2, min(len(words), 5)):
            if _verb_like(words[j]) and not words[j][:1].isupper():
                phrase = words[1:j]
                break
        else:
            return None
        if first == "the":
            return [" ".join(phrase)], [], j
        names = []
        while phrase and _capitalised(_bare(phrase[-1])[0]):
            names.insert(0, phrase.pop())
        if names and phrase:
            return [" ".join(names)], [" ".join(phrase)], j
        return [f"{HUMAN}'s " + " ".join(phrase or names)], [], j
    if first in en_stopwords():
        return None  # "It", "She", "This": a subject we cannot resolve
    name: list[str] = []
    for word in words:
        bare = _bare(word)[0]
        if _capitalised(bare) or (name and bare.casefold() in _CONNECTORS):
            name.append(word)
            if bare != word:
                break
        else:
            break
    while name and name[-1].casefold() in _CONNECTORS:
        name.pop()
    if not name or _bare(name[-1])[0] != name[-1]:
        return None  # no name, or a possessive ("Priya's sister ...")
    tokens = [(w, False) for w in words]
    if len(name) == 1 and name[0] not in known and not _opens_statement(tokens, 0):
        return None  # a capitalised first word that is neither known nor followed by a verb
    return [" ".join(name)], [], len(name)


def _english_triples(sentence: str, known: set[str]) -> list[tuple[str, str, str]]:
    text = sentence.strip().rstrip(".!")
    for pattern, repl in _CONTRACTIONS:
        text = re.sub(pattern, repl, text)
    text = _FRAMING.sub("", _LEAD.sub("", text))
    words = text.split()
    found = _subject(words, known)
    if found is None:
        return []
    subjects, descriptors, i = found
    predicate: list[str] = []
    while i < len(words) and (words[i].casefold() in _ADVERBS or words[i].endswith("ly")):
        predicate.append(words[i])
        i += 1
    if i >= len(words) or (subjects != [HUMAN] and not _verb_like(words[i])):
        return []
    predicate.append(words[i])
    aux = words[i].casefold() in _AUX
    i += 1
    while i < len(words) and words[i].casefold() in _ADVERBS:
        predicate.append(words[i])
        i += 1
    if aux and i < len(words) and (_verb_like(words[i]) or words[i].endswith("ing")):
        predicate.append(words[i])
        i += 1
    if i < len(words) and words[i].casefold() in _PARTICLES:
        predicate.append(words[i])
        i += 1
    if i < len(words) and words[i].casefold() in _ARTICLES:
        predicate.append(words[i])
        i += 1
    rest = " ".join(words[i:])
    cut = _CLAUSE_END.search(rest)
    obj = _clean(" ".join((rest[: cut.start()] if cut else rest).split()[:12]))
    if subjects == [HUMAN]:
        predicate[0] = _FIRST_PERSON.get(predicate[0].casefold(), predicate[0])
    verb = _clean(" ".join(predicate))
    if not obj or not verb:
        return []
    triples = [(_clean(s), verb, obj) for s in subjects]
    triples += [(_clean(s), f"is {HUMAN}'s", _clean(d)) for s in subjects for d in descriptors]
    return triples


_KO_BREAKS = ("SP", "SF", "EC", "EF", "SS", "MAJ")
_KO_SELF = {"저": HUMAN, "나": HUMAN, "제가": HUMAN, "내가": HUMAN, "저희": HUMAN, "우리": HUMAN}


def _korean_triples(sentence: str) -> list[tuple[str, str, str]]:
    """(subject, verb lemma, object) for a Korean statement with a subject or topic particle."""
    tokens = kiwi().tokenize(sentence)
    marker = next(
        (t for t in tokens if t.tag == "JKS" or (t.tag == "JX" and t.form in ("은", "는"))), None
    )
    verbs = [k for k, t in enumerate(tokens) if t.tag in ("VV", "VA", "VCP", "XSV", "XSA")]
    if marker is None or not verbs:
        return []
    k = verbs[-1]
    verb = tokens[k]
    if verb.tag in ("XSV", "XSA") and k > 0:
        lemma, end = tokens[k - 1].form + verb.form + "다", tokens[k - 1].start
    else:
        lemma, end = ("이다" if verb.tag == "VCP" else verb.form + "다"), verb.start
    start = max(
        (t.start + t.len for t in tokens if t.start < marker.start and t.tag in _KO_BREAKS),
        default=0,
    )
    subject = sentence[start : marker.start].strip()
    subject = _KO_SELF.get(subject, subject)
    for mine in ("제 ", "내 ", "저의 ", "나의 "):
        if subject.startswith(mine):
            subject = f"{HUMAN}'s {subject[len(mine) :]}"
    obj = sentence[marker.start + marker.len : end].strip()
    if not subject or not obj or end <= marker.start:
        return []
    return [(_clean(subject), _clean(lemma), _clean(obj))]


def knowledge_triples(line: str, history: str = "") -> list[tuple[str, str, str]]:
    """The (subject, predicate, object) triples of one line's simple statements."""
    _, text = split_stamp(line)
    known = _known_names(f"{history}\n{text}")
    triples: list[tuple[str, str, str]] = []
    for sentence in _statements(text):
        if is_hangul_text(sentence):
            triples += _korean_triples(sentence)
        else:
            triples += _english_triples(sentence, known)
    return list(dict.fromkeys(t for t in triples if all(t)))


def format_triples(triples: list[tuple[str, str, str]]) -> str:
    """Triples as LangChain's prompt asks: ``(a, b, c)<|>(d, e, f)``, or ``NONE``."""
    if not triples:
        return "NONE"
    return KG_TRIPLE_DELIMITER.join(f"({s}, {p}, {o})" for s, p, o in triples)
