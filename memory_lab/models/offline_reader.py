"""The offline reader: a deterministic extractive chat model that answers only from its prompt.

It is a measuring instrument for "did the memory put the fact in front of the model", not a
chatbot. It finds the memory section of the shared prompt, splits it into sentences, scores each
against the question by character n-gram overlap (which works for Korean, where particles attach
to words) and embedding similarity, and replies with the best sentence(s), or abstains below a
threshold. It never sees expected answers.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from pydantic import ConfigDict, Field

from memory_lab.models.embeddings import OfflineEmbeddings
from memory_lab.models.offline_base import OfflineChatModel
from memory_lab.normalize import normalize, sentences
from memory_lab.prompt import split_prompt

ABSTAIN_REPLY = "I don't know."
COVERAGE_SHARE = 0.5

_SPEAKER = re.compile(r"^\s*(human|ai|user|assistant|input|response|system)\s*:\s*", re.I)
_WORD = re.compile(r"\w+", re.UNICODE)

# Function words carry no content; dropping them keeps n-gram overlap about the topic.
_STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from about as into over after before
    is are was were be been being am do does did done have has had having will would shall should
    can could may might must i me my mine myself you your yours we our us they them their he him
    his she her it its this that these those what which who whom whose when where why how there
    here again also just so than then too very not no yes any some all each more most much many
    tell remind say said told ask asked know knew remember recall please okay ok oh well really
    again did does one thing things get got going go went make made let like
    뭐 뭐야 뭐였지 뭐였죠 뭐예요 뭐였어요 무엇 무슨 어디 어디야 어디였지 어디였죠 언제 누구 누가 몇
    어떤 어떻게 얼마 얼마나 왜 제가 내가 저는 나는 제 내 저 나 우리 그 이 저희 그거 이거 혹시 다시
    말했던 말한 말씀드린 했던 했지 했죠 했나요 였지 였죠 인가요 이었죠
    알려줘 알려주세요 기억나""".split()
)


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(normalize(text)) if w not in _STOPWORDS]


_HANGUL = re.compile(r"[\uac00-\ud7a3]")
# Content morphemes for Korean: nouns, numbers, foreign words, verb and adjective stems, roots.
_KO_CONTENT = ("NNG", "NNP", "NR", "SN", "SL", "SH", "VV", "VA", "XR")


@lru_cache(maxsize=1)
def _kiwi():
    from kiwipiepy import Kiwi

    return Kiwi()


def is_hangul_text(text: str) -> bool:
    """True when most letters of ``text`` are Hangul."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(bool(_HANGUL.match(c)) for c in letters) * 2 >= len(letters)


@lru_cache(maxsize=65536)
def _grams(text: str) -> frozenset[str]:
    """Lexical features: character 2/3-grams of content words; Korean words become morphemes.

    Korean particles and endings attach to words ("부산으로", "이사했어요"), so Hangul words are
    analysed with kiwipiepy and matched on their content morphemes ("부산", "이사").
    """
    grams: set[str] = set()
    words = _content_words(text)
    if any(_HANGUL.search(w) for w in words):
        for token in _kiwi().tokenize(normalize(text)):
            tag = token.tag.split("-")[0]
            if tag in _KO_CONTENT and token.form not in _STOPWORDS:
                grams.add("m:" + token.form)
        words = [w for w in words if not _HANGUL.search(w)]
    for word in words:
        padded = f"<{word}>"
        for n in (2, 3):
            grams.update(padded[i : i + n] for i in range(len(padded) - n + 1))
    return frozenset(grams)


def lexical_similarity(question: str, sentence: str) -> float:
    """Cosine similarity of the two texts' character n-gram sets (0..1), unweighted."""
    q, s = _grams(question), _grams(sentence)
    if not q or not s:
        return 0.0
    return len(q & s) / math.sqrt(len(q) * len(s))


def weighted_lexical_scores(question: str, candidates: list[str]) -> list[float]:
    """IDF-weighted n-gram cosine of the question with each candidate (0..1).

    Grams that occur in many sentences of this memory (the topic everybody talks about) weigh
    little; rare grams (a name, a number) weigh much, as in BM25.
    """
    sets = [_grams(c) for c in candidates]
    df: dict[str, int] = {}
    for grams in sets:
        for g in grams:
            df[g] = df.get(g, 0) + 1
    n = len(sets)

    def weight(g: str) -> float:
        return math.log((n + 1) / (df.get(g, 0) + 0.5))

    q = _grams(question)
    q_mass = sum(weight(g) ** 2 for g in q)
    scores = []
    for grams in sets:
        shared = sum(weight(g) ** 2 for g in q & grams)
        s_mass = sum(weight(g) ** 2 for g in grams)
        if not shared:
            scores.append(0.0)
            continue
        coverage = shared / q_mass  # how much of the question the sentence speaks to
        cosine = shared / math.sqrt(q_mass * s_mass)  # and how much of it is about that
        scores.append(COVERAGE_SHARE * coverage + (1 - COVERAGE_SHARE) * cosine)
    return scores


def split_sentences(memory: str) -> list[str]:
    """Split a memory text into candidate sentences, without speaker prefixes."""
    out: list[str] = []
    for line in memory.splitlines():
        line = _SPEAKER.sub("", line).strip()
        out.extend(part for part in sentences(line) if _content_words(part))
    return out


class OfflineReader(OfflineChatModel):
    """Deterministic extractive answering model for offline benchmark runs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embeddings: OfflineEmbeddings = Field(default_factory=OfflineEmbeddings, exclude=True)
    threshold: float = 0.45
    lexical_weight: float = 0.6
    recency_weight: float = 0.03
    max_sentences: int = 2
    second_sentence_ratio: float = 0.9

    @property
    def _llm_type(self) -> str:
        return "memory-lab-offline-reader"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": "offline-reader",
            "threshold": self.threshold,
            "lexical_weight": self.lexical_weight,
            "recency_weight": self.recency_weight,
            "max_sentences": self.max_sentences,
        }

    def respond(self, prompt: str) -> str:
        return self.answer(prompt)

    def answer(self, prompt: str) -> str:
        """The reply to a prompt laid out by the shared template."""
        memory, question = split_prompt(prompt)
        candidates = list(dict.fromkeys(split_sentences(memory)))
        if not candidates or not _content_words(question):
            return ABSTAIN_REPLY
        # MiniLM is an English model: on Korean it rates every pair alike, so it gets no say there.
        dense_weight = 0.0 if is_hangul_text(question) else 1 - self.lexical_weight
        lexical_weight = 1 - dense_weight
        dense = [0.0] * len(candidates)
        if dense_weight:
            sims = self.embeddings.matrix(candidates) @ self.embeddings.matrix([question])[0]
            dense = [max(0.0, float(x)) for x in sims]
        lexical = weighted_lexical_scores(question, candidates)
        last = max(1, len(candidates) - 1)
        scored = []
        for pos, sentence in enumerate(candidates):
            score = lexical_weight * lexical[pos] + dense_weight * dense[pos]
            # Like a chat model reading a transcript, prefer what was said last on near ties.
            score += self.recency_weight * pos / last
            if sentence.rstrip().endswith(("?", "？")):
                score *= 0.8  # a question restates a topic; it rarely holds the answer
            scored.append((score, pos, sentence))
        scored.sort(key=lambda x: (-x[0], x[1]))
        best = scored[0][0]
        if best < self.threshold:
            return ABSTAIN_REPLY
        chosen = [scored[0]]
        for item in scored[1 : self.max_sentences]:
            if item[0] >= best * self.second_sentence_ratio:
                chosen.append(item)
        chosen.sort(key=lambda x: x[1])  # keep memory order
        return " ".join(s for _, _, s in chosen)
