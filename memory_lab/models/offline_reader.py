"""The offline reader: a deterministic extractive chat model that answers only from its prompt.

It is a measuring instrument for "did the memory put the fact in front of the model", not a
chatbot. It finds the memory section of the shared prompt, splits it into sentences and scores
each against the question with general, corpus-independent machinery:

- lexical overlap weighted by IDF computed from the memory itself, over the terms of
  ``memory_lab.text.analysis``: English words lose function words (scikit-learn's general
  English stop-word list) and are lightly stemmed; Korean text is split with kiwipiepy and
  matched on its content morphemes, chosen by part-of-speech tag (so particles and endings
  never need a word list); question terms the memory never mentions
  count against every sentence, which is what lets the reader abstain;
- MiniLM cosine similarity for English questions (it bridges paraphrases);
- for ranking only, multilingual-e5 retrieval similarity (question as "query:", sentences as
  "passage:"), in both languages: it finds the sentence a paraphrased question is about
  ("What vehicle did I get?" against "I bought a used Honda Jazz"); whether to answer at all is
  still decided by the lexical and MiniLM evidence, since e5 rates unrelated sentences almost as
  high as related ones;
- a question-type cue: "when" wants a date or time, "how many/much" a number, "who" and "where"
  a name, in English and Korean, and a sentence holding such an expression scores a little more;
- recency on near ties, as a chat model reading a transcript prefers what was said last;
- names (English questions): a capitalised word of the question the memory never mentions, or
  a best passage that shares nothing with the question but its names (the right person, not
  what is asked: "Marco's hourly wage" against "Marco asked for a raise"), makes it abstain;
- kinds: asked for a number or a time, a reply that holds none (nor a session date stamp)
  is replaced by an abstention;
- novelty: a sentence whose terms the question already holds restates the topic ("Bought the
  bike!") and cannot hold the answer; ranking credits the IDF mass of a sentence's terms that
  are not the question's, saturating at a few average terms;
- who said it: a question in the first person ("What did I pay...", "제 직무가...") asks what
  the user said, so the assistant's sentences (its reactions often echo the topic) rank a little
  lower.

It replies with the best sentence(s), or abstains below a threshold. It never sees expected
answers. Per-sentence features are cached by text and a memory's index (term matrix, IDF,
embeddings) by the memory text, so many probes over one long context cost little each. A memory
text that continues a cached one (a buffer that grew at its end, or whose oldest lines the
context limit cut) is indexed from its new lines only (``_extend_index``): the sentences kept
are carried over, columns are numbered as a from-scratch build numbers them and IDF is computed
from exact document counts by the same code, so every array, and every reply, is the one a
from-scratch build gives; only the vectorised scoring still reads the whole context.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, PrivateAttr

from memory_lab.models.embeddings import (
    EMBEDDING_MODEL_NAME,
    OfflineEmbeddings,
    embedding_model_name,
)
from memory_lab.models.offline_base import OfflineChatModel
from memory_lab.models.prompt import split_prompt
from memory_lab.models.reader_index import (
    _build_index,
    _embedded,
    _extend_index,
    _Index,
    _overlap,
    question_names,
)
from memory_lab.text.analysis import (
    KO_CONTENT_TAGS,
    NUMBER,
    TIME,
    Features,
    features,
    is_hangul_text,
)

ABSTAIN_REPLY = "I don't know."
# A message that asks nothing (no question mark, no question or request word first) is a
# statement: the reader, which only quotes memory, acknowledges it instead of abstaining.
ACK_REPLY = "Noted."
_ASKS = re.compile(
    r"^\W*(?:what|when|where|who|whom|whose|which|why|how|is|are|am|was|were|do|does|did|can|"
    r"could|would|will|should|shall|may|might|have|has|had|tell|remind|list|name|describe|"
    r"recall|give|show|summari[sz]e|explain|say|suggest|recommend|help|find|please)\b",
    re.I,
)


def asks(message: str) -> bool:
    """Whether ``message`` asks something (a question, or a request such as "Remind me ...");
    Korean and other non-Latin messages count as asking unless they end with a full stop."""
    text = message.strip()
    if "?" in text or "？" in text or _ASKS.match(text):
        return True
    return is_hangul_text(text) and not text.endswith((".", "다", "요"))


READER_RETRIEVAL_MODEL = "multilingual-e5-small"


def reader_embedding_names() -> str:
    """The embedding models the offline reader uses, as a run records them."""
    return f"{EMBEDDING_MODEL_NAME} + {embedding_model_name(READER_RETRIEVAL_MODEL)}"


def _e5_embeddings() -> OfflineEmbeddings:
    return OfflineEmbeddings(model=READER_RETRIEVAL_MODEL)


class OfflineReader(OfflineChatModel):
    """Deterministic extractive answering model for offline benchmark runs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embeddings: OfflineEmbeddings = Field(default_factory=OfflineEmbeddings, exclude=True)
    # Multilingual retrieval model (e5, "query:" question against "passage:" sentences): it
    # ranks paraphrases in both languages; abstaining stays with the lexical/MiniLM evidence,
    # because e5 rates unrelated sentences almost as high as related ones.
    retrieval: OfflineEmbeddings | None = Field(default_factory=_e5_embeddings, exclude=True)
    retrieval_weight: float = 1.0
    retrieval_hangul_weight: float = 1.0
    threshold: float = 0.2  # English: lexical and MiniLM evidence together
    threshold_hangul: float = 0.15  # Korean: lexical evidence only (MiniLM is English)
    lexical_weight: float = 0.5
    coverage_share: float = 0.7  # of the lexical score: coverage of the question vs cosine
    absent_term_weight: float = 0.8  # IDF share of question terms the memory never mentions
    type_weight: float = 0.2
    soft_match: float = 0.6  # English: a memory word this MiniLM-similar to a question word
    recency_weight: float = 0.03
    question_penalty: float = 0.8
    answer_carry: float = 0.9  # share of a question's score its reply (next turn) inherits
    context_carry: float = 0.5  # share of any sentence's score the next sentence inherits
    # Ranking credit for what a sentence adds to the question: novelty_weight times the IDF mass
    # of its terms the question lacks, in units of novelty_saturation average terms, capped at 1.
    novelty_weight: float = 0.2
    novelty_saturation: float = 4.0
    # Ranking multiplier for the assistant's sentences when the question is in the first person.
    assistant_weight: float = 0.8
    max_sentences: int = 2
    second_sentence_ratio: float = 0.9
    # Abstain when the question names someone or something (a capitalised word) the memory
    # never mentions, or when the best passage shares only the question's names with it (it is
    # about the right person but not about what is asked: "Marco's hourly wage").
    names_rule: bool = True
    # Abstain when asked for a number or a time and the reply holds none (nor a date stamp).
    kind_rule: bool = True
    _indexes: OrderedDict = PrivateAttr(default_factory=OrderedDict)

    @property
    def _llm_type(self) -> str:
        return "memory-lab-offline-reader"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": "offline-reader",
            "version": 5,
            "threshold": self.threshold,
            "threshold_hangul": self.threshold_hangul,
            "lexical_weight": self.lexical_weight,
            "coverage_share": self.coverage_share,
            "absent_term_weight": self.absent_term_weight,
            "type_weight": self.type_weight,
            "soft_match": self.soft_match,
            "recency_weight": self.recency_weight,
            "question_penalty": self.question_penalty,
            "answer_carry": self.answer_carry,
            "context_carry": self.context_carry,
            "novelty_weight": self.novelty_weight,
            "novelty_saturation": self.novelty_saturation,
            "assistant_weight": self.assistant_weight,
            "max_sentences": self.max_sentences,
            "second_sentence_ratio": self.second_sentence_ratio,
            "names_rule": self.names_rule,
            "kind_rule": self.kind_rule,
            "retrieval": self.retrieval.model_name if self.retrieval is not None else None,
            "retrieval_weight": self.retrieval_weight,
            "retrieval_hangul_weight": self.retrieval_hangul_weight,
            "stopwords": "sklearn ENGLISH_STOP_WORDS + auxiliaries",
            "korean_content_tags": list(KO_CONTENT_TAGS),
        }

    def respond(self, prompt: str) -> str:
        return self.answer(prompt)

    def _index(self, memory: str) -> _Index:
        key = hashlib.blake2b(memory.encode("utf-8"), digest_size=16).digest()
        index = self._indexes.get(key)
        if index is None:
            index = self._extended(memory) or _build_index(memory)
            self._indexes[key] = index
            while len(self._indexes) > 8:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return index

    def _extended(self, memory: str) -> _Index | None:
        """``memory`` indexed from a cached index whose text it continues (a buffer that grew,
        or lost its oldest lines to the context limit), most recently used first; None when
        none fits (a different memory's text, a summary rewritten): then it is built anew."""
        for old in reversed(list(self._indexes.values())):
            cut = _overlap(old, memory)
            if cut is not None:
                index = _extend_index(old, memory, cut)
                if index is not None:
                    return index
        return None

    def scores(self, memory: str, question: str) -> tuple[_Index, np.ndarray, np.ndarray]:
        """The index of ``memory``, every sentence's ranking score and its evidence score."""
        index = self._index(memory)
        n = len(index.sentences)
        q = features(question)
        hangul = is_hangul_text(question)
        absent_idf = math.log((n + 1) / 0.5) * self.absent_term_weight
        weights = np.zeros(len(index.vocab))
        q_mass = 0.0
        missing: list[tuple[str, float]] = []  # English words to match softly, with weights
        q_words = dict(q.words)
        for term in sorted(q.terms):
            col = index.vocab.get(term)
            if col is None:
                q_mass += absent_idf**2
                if term in q_words:
                    missing.append((q_words[term], absent_idf**2))
            else:
                weights[col] = index.idf[col] ** 2
                q_mass += weights[col]
        shared = exact = index.matrix @ weights  # IDF² mass of the question terms each holds
        if missing and not hangul and self.soft_match < 1:
            shared = shared + self._soft_shared(index, missing)
        if q_mass > 0:
            coverage = shared / q_mass
            cosine = shared / np.sqrt(q_mass * np.maximum(index.mass, 1e-9))
            lexical = self.coverage_share * coverage + (1 - self.coverage_share) * cosine
        else:
            lexical = np.zeros(n)
        if hangul:
            evidence = lexical
        else:
            if index.dense is None:
                index.dense, index.dense_at = _embedded(
                    index.dense_carry, index.sentences, self.embeddings.matrix
                )
                index.dense_carry = None
            dense = np.clip(index.dense @ self.embeddings.matrix([question])[0], 0.0, None)
            evidence = self.lexical_weight * lexical + (1 - self.lexical_weight) * dense
        ranking = evidence
        if self.retrieval is not None:
            if index.passages is None:
                index.passages, index.passages_at = _embedded(
                    index.passages_carry,
                    index.sentences,
                    lambda texts: self.retrieval.matrix(texts, kind="passage"),
                )
                index.passages_carry = None
            sims = index.passages @ self.retrieval.matrix([question])[0]
            w = self.retrieval_hangul_weight if hangul else self.retrieval_weight
            ranking = evidence + w * sims
        if self.novelty_weight and index.mean_idf2:
            novel = index.mass - exact  # IDF² mass of the terms the question lacks
            unit = self.novelty_saturation * index.mean_idf2
            ranking = ranking + self.novelty_weight * np.minimum(1.0, novel / unit)
        if q.first_person and self.assistant_weight != 1:
            ranking = np.where(index.assistant, ranking * self.assistant_weight, ranking)
        return index, self._shape(index, q, ranking), self._shape(index, q, evidence)

    def _shape(self, index: _Index, q: Features, score: np.ndarray) -> np.ndarray:
        n = len(index.sentences)
        if q.cues:
            score = score + self.type_weight * ((index.kinds & q.cues) > 0)
        score = score + self.recency_weight * np.arange(n) / max(1, n - 1)
        if n > 1:
            # A transcript answers a question in the next turn, and a sentence that restates the
            # topic is often followed by the detail: pass part of each score to the next sentence.
            prev = np.concatenate(([0.0], score[:-1]))
            asked = np.concatenate(([False], index.questions[:-1]))
            new_turn = np.concatenate(([False], index.lines[1:] != index.lines[:-1]))
            carry = np.where(asked & new_turn, self.answer_carry, self.context_carry)
            carried = np.maximum(score, carry * prev)
        else:
            carried = score
        # a question restates a topic; it rarely holds the answer
        return np.where(index.questions, carried * self.question_penalty, carried)

    def _soft_shared(self, index: _Index, missing: list[tuple[str, float]]) -> np.ndarray:
        """Soft matches of question words the memory never uses ("vehicle" ~ "car").

        Each missing word is credited, in every sentence, with its weight times the best MiniLM
        similarity of any memory word in that sentence, when that similarity reaches
        ``soft_match``.
        """
        if index.word_vectors is None:
            self._embed_words(index)
        out = np.zeros(len(index.sentences))
        if not len(index.word_cols):
            return out
        query = self.embeddings.matrix([word for word, _ in missing])
        sims = index.word_vectors @ query.T  # memory words x missing words
        for j, (_, weight) in enumerate(missing):
            close = np.flatnonzero(sims[:, j] >= self.soft_match)
            if not len(close):
                continue
            if index.columns is None:
                index.columns = index.matrix.tocsc()
            sub = index.columns[:, index.word_cols[close]].multiply(sims[close, j][None, :])
            best = np.asarray(sub.max(axis=1).todense()).ravel()
            out += weight * best
        return out

    def _embed_words(self, index: _Index) -> None:
        """MiniLM vectors of the index's surface words (``word_cols``: columns in order);
        those the index it extends had embedded for the same word are carried over."""
        cols = np.flatnonzero(np.not_equal(index.word_of, None)).astype(np.int64)
        index.word_cols = cols
        carry, index.word_carry = index.word_carry, None
        if not len(cols):
            index.word_vectors = np.zeros((0, 1), dtype=np.float32)
            return
        words = index.word_of[cols]
        same = np.zeros(len(cols), dtype=bool)
        if carry is not None:
            order, old_word_of, old_cols, old_vectors = carry
            old_ids = order[cols]
            known = old_ids < len(old_word_of)
            same[known] = old_word_of[old_ids[known]] == words[known]
        if not same.any():
            index.word_vectors = self.embeddings.matrix(words.tolist())
            return
        vectors = np.empty((len(cols), old_vectors.shape[1]), dtype=old_vectors.dtype)
        vectors[same] = old_vectors[np.searchsorted(old_cols, old_ids[same])]
        if not same.all():
            vectors[~same] = self.embeddings.matrix(words[~same].tolist())
        index.word_vectors = vectors

    def _off_topic(self, index: _Index, question: str, top: int) -> bool:
        """The question's names are unknown, or the best passage matches nothing else of it.

        The passage is the best sentence and the one before it (a reply inherits the score of
        the question it answers).
        """
        names = question_names(question)
        if not names:
            return False
        if any(name not in index.vocab for name in names):
            return True
        terms = features(question).terms
        others = terms - names
        if not others:
            return False
        window = index.matrix[max(0, top - 1) : top + 1]
        present = [t for t in sorted(terms) if t in index.vocab]
        hits = np.asarray(window[:, [index.vocab[t] for t in present]].sum(axis=0)).ravel() > 0
        covered = {t for t, hit in zip(present, hits, strict=True) if hit}
        return bool(covered) and covered <= names

    def answer(self, prompt: str) -> str:
        """The reply to a prompt laid out by the shared template: what memory says, "I don't
        know." when it says nothing, "Noted." for a message that asks nothing (``asks``)."""
        reply = self._extract(prompt)
        if reply == ABSTAIN_REPLY and not asks(split_prompt(prompt)[1]):
            return ACK_REPLY
        return reply

    def _extract(self, prompt: str) -> str:
        """The sentences of memory that answer the prompt's question, or ABSTAIN_REPLY."""
        memory, question = split_prompt(prompt)
        if not features(question).terms or not self._index(memory).sentences:
            return ABSTAIN_REPLY
        index, score, evidence = self.scores(memory, question)
        threshold = self.threshold_hangul if is_hangul_text(question) else self.threshold
        order = np.lexsort((np.arange(len(score)), -score))
        best = float(score[order[0]])
        if float(evidence.max()) < threshold:
            return ABSTAIN_REPLY
        chosen = [int(order[0])]
        cues = features(question).cues
        top = chosen[0]
        if self.names_rule and self._off_topic(index, question, top):
            return ABSTAIN_REPLY
        if (
            cues
            and not index.kinds[top] & cues
            and top + 1 < len(index.sentences)
            and index.lines[top + 1] == index.lines[top]
            and index.kinds[top + 1] & cues
            and self.max_sentences > 1
        ):
            # The best sentence names the topic without the kind of answer asked for (a date, a
            # number, a name) and the next sentence of the same turn has one: it is the detail.
            chosen.append(top + 1)
        for pos in order[1:]:
            if len(chosen) >= self.max_sentences or score[pos] < best * self.second_sentence_ratio:
                break
            if index.sentences[pos] not in {index.sentences[i] for i in chosen}:
                chosen.append(int(pos))
        reply = " ".join(index.sentences[i] for i in sorted(chosen))
        if cues & TIME and not any(index.kinds[i] & TIME for i in chosen):
            # asked when, and the sentence names no time: say when it was said, if stamped
            stamps = index.stamps
            said = list(
                dict.fromkeys(stamps[n] for i in chosen if (n := int(index.lines[i])) in stamps)
            )
            if said:
                reply += f" ({', '.join(said)})"
            elif self.kind_rule:
                return ABSTAIN_REPLY
        if self.kind_rule and cues & NUMBER and not any(index.kinds[i] & NUMBER for i in chosen):
            return ABSTAIN_REPLY
        return reply
