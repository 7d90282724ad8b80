"""The offline reader's index of a memory text: its sentences (each line parsed once, cached by
text), their term matrix, IDF and embeddings, built from scratch (``_build_index``) or, for a text
that continues a cached one (a buffer that grew at its end, or whose oldest lines the context
limit cut), extended from its new lines only (``_extend_index``), with the same arrays a
from-scratch build gives (``memory_lab.models.offline_reader`` explains what they score).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import sparse

from memory_lab.text.analysis import (
    en_stopwords,
    features,
    is_hangul_text,
    stem,
)
from memory_lab.text.normalize import sentences

_SPEAKER = re.compile(r"^\s*(human|ai|user|assistant|input|response|system)\s*:\s*", re.I)
_ASSISTANT = frozenset({"ai", "assistant", "response"})
# A transcript line may name its speaker ("Caroline: ..."): every sentence of it is by them.
_STAMP = re.compile(r"^\[([^\[\]\n]{1,80})\]\s*")
_NAMED_SPEAKER = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s+(?=\S)")


@lru_cache(maxsize=4096)
def question_names(question: str) -> frozenset[str]:
    """Terms of the capitalised words of an English question after its first word ("Marco")."""
    if is_hangul_text(question):
        return frozenset()
    stop = en_stopwords()
    words = re.findall(r"(?<!^)\b[A-Z][A-Za-z0-9]*", question.strip())
    return frozenset(stem(w.casefold()) for w in words if w.casefold() not in stop)


def split_sentences(memory: str) -> list[str]:
    """Split a memory text into candidate sentences, without Human/AI speaker prefixes."""
    return [sent.text for line in memory.splitlines() for sent in _parsed_line(line)[1]]


def _unstamped(line: str) -> tuple[str, str | None]:
    """A memory line without its speaker prefix and leading date stamp, and the stamp."""
    line = _SPEAKER.sub("", line).strip()
    stamp = _STAMP.match(line)
    return (line[stamp.end() :], stamp.group(1)) if stamp else (line, None)


@dataclass(frozen=True)
class _Sentence:
    """One candidate sentence with what the index needs of it (cached by text and speaker)."""

    text: str
    words: tuple[tuple[str, str], ...]  # (term, surface word), as in ``Features.words``
    terms: tuple[str, ...]  # its terms and its speaker's, in the order the index meets them
    kinds: int
    question: bool


@lru_cache(maxsize=65536)
def _sentence(text: str, speaker: str) -> _Sentence:
    feats = features(text)
    terms = set(feats.terms)
    if speaker:
        terms.update(features(speaker).terms)
    return _Sentence(
        text, feats.words, tuple(terms), feats.kinds, text.rstrip().endswith(("?", "？"))
    )


@lru_cache(maxsize=65536)
def _parsed_line(line: str) -> tuple[str | None, tuple[_Sentence, ...], bool]:
    """A memory line's date stamp, its candidate sentences without the speaker prefix, and
    whether the assistant said it (an ``AI:``/``assistant:``/``response:`` line).

    A leading date stamp is not part of a sentence: it would add the same date terms to every
    sentence of a session (``answer`` reports it when the question asks when). A speaker named
    at the start of the line ("Caroline: ...") lends its terms to every sentence of it. Cached:
    a growing buffer shows the same lines probe after probe, so each is analysed once.
    """
    text, stamp = _unstamped(line)
    named = _NAMED_SPEAKER.match(text)
    speaker = named.group(1) if named else ""
    role = _SPEAKER.match(line)
    return (
        stamp,
        tuple(_sentence(part, speaker) for part in sentences(text) if features(part).terms),
        bool(role) and role.group(1).lower() in _ASSISTANT,
    )


class _Store:
    """A growable (rows x dim) array of embeddings: the indexes of a growing context are views
    of runs of its rows, and the newest appends after its own rows without copying them."""

    def __init__(self, rows: np.ndarray):
        self.buf = np.empty((max(16, 2 * len(rows)), rows.shape[1]), dtype=rows.dtype)
        self.buf[: len(rows)] = rows
        self.used = len(rows)
        self.lock = threading.Lock()  # checking that an index is the newest, then appending

    def append(self, rows: np.ndarray, live: int) -> int:
        """Append ``rows`` after the used ones, keeping rows ``live`` on; returns where those
        kept rows now start (0 after the buffer was reallocated, else ``live``)."""
        end = self.used + len(rows)
        if end > len(self.buf):
            kept = self.used - live
            buf = np.empty((2 * (kept + len(rows)), self.buf.shape[1]), dtype=self.buf.dtype)
            buf[:kept] = self.buf[live : self.used]
            self.buf, self.used, live, end = buf, kept, 0, kept + len(rows)
        self.buf[self.used : end] = rows
        self.used = end
        return live


@dataclass(frozen=True)
class _Carry:
    """The extended index's embedded rows: ``store.buf[start:stop]``; the new index keeps its
    rows ``keep_from:keep_to`` and parses again those after (``tail``: their sentences)."""

    store: _Store
    start: int
    stop: int
    keep_from: int
    keep_to: int
    tail: list[str]


def _embedded(
    carry: _Carry | None, texts: list[str], embed: Any
) -> tuple[np.ndarray, tuple[_Store, int, int]]:
    """Embeddings of ``texts`` (rows of a ``_Store``) and where they lie in it; with a carry,
    the rows the extended index had embedded are reused and, when it was the store's newest,
    not even copied: only the new sentences are embedded."""
    if carry is not None:
        store, kept = carry.store, carry.keep_to - carry.keep_from
        tail = len(carry.tail)
        with store.lock:
            if store.used == carry.stop and texts[kept : kept + tail] == carry.tail:
                start = store.append(
                    _rows_of(texts[kept + tail :], embed, store), carry.start + carry.keep_from
                )
                stop = start + len(texts)
                return store.buf[start:stop], (store, start, stop)
        head = store.buf[carry.start + carry.keep_from : carry.start + carry.keep_to]
        rows = np.concatenate((head, _rows_of(texts[kept:], embed, store)))
    else:
        rows = embed(texts)
    fresh = _Store(rows)
    return fresh.buf[: len(texts)], (fresh, 0, len(texts))


def _rows_of(texts: list[str], embed: Any, store: _Store) -> np.ndarray:
    if not texts:
        return np.zeros((0, store.buf.shape[1]), dtype=store.buf.dtype)
    return embed(texts)


@dataclass
class _Index:
    """Everything about one memory text that does not depend on the question.

    Besides what scoring reads, it keeps what extending it needs (``_extend_index``): the text,
    where each line starts, and each sentence's term ids in the order a from-scratch build meets
    them, so a context that grew at its end (or lost its oldest lines) is indexed from its new
    lines only, with the very arrays a from-scratch build would give.
    """

    sentences: list[str]  # in memory order; a repeated sentence appears each time
    lines: np.ndarray  # the line (turn) each sentence belongs to
    vocab: dict[str, int]
    matrix: sparse.csr_matrix  # sentences x terms, 0/1
    idf: np.ndarray
    mass: np.ndarray  # sum of squared IDF of each sentence's terms
    mean_idf2: float  # mean squared IDF over the vocabulary: the unit of novelty
    kinds: np.ndarray
    questions: np.ndarray  # sentences that are themselves questions
    words: dict[int, str]  # column -> a surface English word, for soft matching
    stamps: dict[int, str]  # line number -> its date stamp
    assistant: np.ndarray  # sentences said by the assistant (an "AI:"/"response:" line)
    dense: np.ndarray | None = None
    passages: np.ndarray | None = None
    word_cols: np.ndarray | None = None
    word_vectors: np.ndarray | None = None
    columns: sparse.csc_matrix | None = None  # ``matrix`` by column, for soft matching
    # --- for extending (``_extend_index``)
    text: str = ""
    line_starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    terms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))  # col -> term
    seq: np.ndarray | None = None  # per sentence: its words' columns, then its terms' columns
    seq_ptr: np.ndarray | None = None  # sentence i's run of ``seq`` is seq_ptr[i]:seq_ptr[i+1]
    cols: np.ndarray | None = None  # per sentence its terms' columns (the matrix's input order)
    cols_ptr: np.ndarray | None = None
    word_ids: np.ndarray | None = None  # per sentence its words' columns, with
    word_strs: list[str] = field(default_factory=list)  # their surface words
    word_ptr: np.ndarray | None = None
    # where ``dense`` and ``passages`` lie in a growable store (``_Store``), and the rows of
    # the index this one extends that they may start with (``_Carry``)
    dense_at: tuple | None = None
    passages_at: tuple | None = None
    dense_carry: _Carry | None = None
    passages_carry: _Carry | None = None
    word_carry: tuple | None = None  # (old col of each col, old word_of, old word_cols, vectors)
    word_of: np.ndarray | None = None  # col -> its surface word (None: no English word)
    parsed_lines: int = 0  # lines this index parsed itself (the rest were carried over)


@dataclass
class _Rows:
    """Sentences parsed from a run of memory lines, before columns are assigned."""

    found: list[_Sentence] = field(default_factory=list)
    line_of: list[int] = field(default_factory=list)
    by_assistant: list[bool] = field(default_factory=list)
    stamps: dict[int, str] = field(default_factory=dict)


def _parse_rows(lines: list[str], first: int) -> _Rows:
    """The sentences of ``lines``, numbered from line ``first`` (each line analysed once)."""
    rows = _Rows()
    for number, line in enumerate(lines, first):
        stamp, parts, assistant_said = _parsed_line(line)
        if stamp:
            rows.stamps[number] = stamp
        rows.found.extend(parts)
        rows.line_of.extend([number] * len(parts))
        rows.by_assistant.extend([assistant_said] * len(parts))
    return rows


def _line_starts(lines_with_ends: list[str], offset: int) -> np.ndarray:
    lengths = np.fromiter(map(len, lines_with_ends), dtype=np.int64, count=len(lines_with_ends))
    starts = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths):
        np.cumsum(lengths[:-1], out=starts[1:])
    return starts + offset


def _sequences(found: list[_Sentence], column: Any) -> tuple[np.ndarray, ...]:
    """Per sentence the columns of its words then its terms (``column`` maps a term to one),
    and the surface words: (seq, seq_ptr, cols, cols_ptr, word_ids, word_strs, word_ptr)."""
    seq: list[int] = []
    cols: list[int] = []
    word_ids: list[int] = []
    word_strs: list[str] = []
    seq_len = np.zeros(len(found) + 1, dtype=np.int64)
    col_len = np.zeros(len(found) + 1, dtype=np.int64)
    word_len = np.zeros(len(found) + 1, dtype=np.int64)
    for i, sent in enumerate(found):
        w = [column(term) for term, _ in sent.words]
        c = [column(term) for term in sent.terms]
        seq.extend(w)
        seq.extend(c)
        cols.extend(c)
        word_ids.extend(w)
        word_strs.extend(word for _, word in sent.words)
        seq_len[i + 1] = len(w) + len(c)
        col_len[i + 1] = len(c)
        word_len[i + 1] = len(w)
    return (
        np.array(seq, dtype=np.int64),
        np.cumsum(seq_len),
        np.array(cols, dtype=np.int64),
        np.cumsum(col_len),
        np.array(word_ids, dtype=np.int64),
        word_strs,
        np.cumsum(word_len),
    )


def _finish(
    texts: list[str],
    lines: np.ndarray,
    vocab: dict[str, int],
    cols: np.ndarray,
    counts: np.ndarray,
    kinds: np.ndarray,
    questions: np.ndarray,
    words: dict[int, str],
    stamps: dict[int, str],
    assistant: np.ndarray,
) -> _Index:
    """The term matrix, IDF and masses from the columns of each sentence's terms (``cols``,
    ``counts`` per sentence): the same arithmetic, on the same arrays, however they were built."""
    n = len(texts)
    rows = np.repeat(np.arange(n), counts)
    data = np.ones(len(cols), dtype=np.float64)
    matrix = sparse.csr_matrix((data, (rows, cols)), shape=(n, len(vocab)))
    df = np.asarray(matrix.sum(axis=0)).ravel()
    idf = np.log((n + 1) / (df + 0.5))
    idf2 = idf**2
    mass = matrix @ idf2
    mean_idf2 = float(np.mean(idf2)) if len(idf2) else 0.0
    return _Index(
        texts,
        lines,
        vocab,
        matrix,
        idf,
        mass,
        mean_idf2,
        kinds,
        questions,
        words,
        stamps,
        assistant,
    )


def _word_of(words: dict[int, str], size: int) -> np.ndarray:
    out = np.full(size, None, dtype=object)
    if words:
        out[np.fromiter(words, dtype=np.int64, count=len(words))] = list(words.values())
    return out


def _build_index(memory: str) -> _Index:
    """The index of a memory text: one pass over its (cached) lines, IDF computed once."""
    with_ends = memory.splitlines(keepends=True)
    parsed = _parse_rows(memory.splitlines(), 0)
    found = parsed.found
    vocab: dict[str, int] = {}
    words: dict[int, str] = {}
    for sent in found:
        for term, word in sent.words:
            words.setdefault(vocab.setdefault(term, len(vocab)), word)
        for term in sent.terms:
            vocab.setdefault(term, len(vocab))
    seq, seq_ptr, cols, cols_ptr, word_ids, word_strs, word_ptr = _sequences(found, vocab.get)
    index = _finish(
        [s.text for s in found],
        np.array(parsed.line_of, dtype=np.int64),
        vocab,
        cols,
        np.diff(cols_ptr),
        np.array([s.kinds for s in found], dtype=np.int8),
        np.array([s.question for s in found], dtype=bool),
        words,
        parsed.stamps,
        np.array(parsed.by_assistant, dtype=bool),
    )
    index.text = memory
    index.line_starts = _line_starts(with_ends, 0)
    index.terms = np.array(list(vocab), dtype=object) if vocab else np.zeros(0, dtype=object)
    index.seq, index.seq_ptr, index.cols, index.cols_ptr = seq, seq_ptr, cols, cols_ptr
    index.word_ids, index.word_strs, index.word_ptr = word_ids, word_strs, word_ptr
    index.word_of = _word_of(words, len(vocab))
    index.parsed_lines = len(with_ends)
    return index


def _overlap(old: _Index, memory: str) -> int | None:
    """Where in ``old``'s text ``memory`` begins (a line start, whose rest of ``old`` is a prefix
    of ``memory``): 0 for a text that grew at its end, more when its oldest lines were cut."""
    text = old.text
    if len(old.line_starts) == 0:
        return None
    if memory.startswith(text):
        return 0
    head = memory[: min(len(memory), 256)]
    pos = text.find(head, 1)
    tries = 0
    while pos != -1 and tries < 16:
        at = int(np.searchsorted(old.line_starts, pos))
        if at < len(old.line_starts) and old.line_starts[at] == pos:
            tries += 1
            if memory.startswith(text[pos:]):
                return pos
        pos = text.find(head, pos + 1)
    return None


def _extend_index(old: _Index, memory: str, cut: int) -> _Index | None:
    """The index of ``memory``, which is ``old``'s text from ``cut`` (a line start) on, then
    more: ``old``'s sentences of the lines kept are carried over (its last line is parsed again:
    ``memory`` may continue it), only the new lines are parsed, and columns are numbered in the
    order a from-scratch build meets the terms, so every array equals that build's."""
    first = int(np.searchsorted(old.line_starts, cut))  # the first line kept
    last = len(old.line_starts) - 1  # parsed again
    k = int(np.searchsorted(old.lines, first, side="left"))
    m = int(np.searchsorted(old.lines, last, side="left"))
    if m <= k:
        return None  # nothing worth carrying
    tail_at = int(old.line_starts[last]) - cut
    tail = memory[tail_at:]
    tail_ends = tail.splitlines(keepends=True)
    parsed = _parse_rows(tail.splitlines(), last - first)
    # columns: the old index's ids, then new terms after them; renumbered below
    size = len(old.terms)
    extra: dict[str, int] = {}

    def column(term: str) -> int:
        col = old.vocab.get(term)
        if col is None:
            col = extra.setdefault(term, size + len(extra))
        return col

    seq, seq_ptr, cols, cols_ptr, word_ids, word_strs, word_ptr = _sequences(parsed.found, column)
    seq = np.concatenate((old.seq[old.seq_ptr[k] : old.seq_ptr[m]], seq))
    cols = np.concatenate((old.cols[old.cols_ptr[k] : old.cols_ptr[m]], cols))
    word_ids = np.concatenate((old.word_ids[old.word_ptr[k] : old.word_ptr[m]], word_ids))
    word_strs = old.word_strs[old.word_ptr[k] : old.word_ptr[m]] + word_strs
    seq_ptr = np.concatenate(
        (old.seq_ptr[k:m] - old.seq_ptr[k], seq_ptr + old.seq_ptr[m] - old.seq_ptr[k])
    )
    cols_ptr = np.concatenate(
        (old.cols_ptr[k:m] - old.cols_ptr[k], cols_ptr + old.cols_ptr[m] - old.cols_ptr[k])
    )
    word_ptr = np.concatenate(
        (old.word_ptr[k:m] - old.word_ptr[k], word_ptr + old.word_ptr[m] - old.word_ptr[k])
    )
    # a from-scratch build numbers terms by first appearance in ``seq``
    ids, first_at = np.unique(seq, return_index=True)
    order = ids[np.argsort(first_at, kind="stable")]  # new column -> old/extra id
    remap = np.full(size + len(extra), -1, dtype=np.int64)
    remap[order] = np.arange(len(order), dtype=np.int64)
    seq, cols, word_ids = remap[seq], remap[cols], remap[word_ids]
    names = np.concatenate((old.terms, np.array(list(extra), dtype=object))) if extra else old.terms
    terms = names[order]
    vocab = dict(zip(terms.tolist(), range(len(terms)), strict=True))
    # the surface word of a column is the first one seen
    word_cols, word_first = np.unique(word_ids, return_index=True)
    word_list = [word_strs[i] for i in word_first.tolist()]
    words = dict(zip(word_cols.tolist(), word_list, strict=True))
    word_of = np.full(len(terms), None, dtype=object)
    if len(word_cols):
        word_of[word_cols] = word_list
    found = parsed.found
    index = _finish(
        old.sentences[k:m] + [s.text for s in found],
        np.concatenate((old.lines[k:m] - first, np.array(parsed.line_of, dtype=np.int64))),
        vocab,
        cols,
        np.diff(cols_ptr),
        np.concatenate((old.kinds[k:m], np.array([s.kinds for s in found], dtype=np.int8))),
        np.concatenate((old.questions[k:m], np.array([s.question for s in found], dtype=bool))),
        words,
        {
            **{n - first: s for n, s in old.stamps.items() if first <= n < last},
            **parsed.stamps,
        },
        np.concatenate((old.assistant[k:m], np.array(parsed.by_assistant, dtype=bool))),
    )
    index.text = memory
    index.line_starts = np.concatenate(
        (old.line_starts[first:last] - cut, _line_starts(tail_ends, tail_at))
    )
    index.terms = terms
    index.seq, index.seq_ptr, index.cols, index.cols_ptr = seq, seq_ptr, cols, cols_ptr
    index.word_ids, index.word_strs, index.word_ptr = word_ids, word_strs, word_ptr
    index.word_of = word_of
    index.parsed_lines = len(tail_ends)
    if old.dense_at is not None:
        index.dense_carry = _Carry(*old.dense_at, k, m, old.sentences[m:])
    if old.passages_at is not None:
        index.passages_carry = _Carry(*old.passages_at, k, m, old.sentences[m:])
    if old.word_vectors is not None:
        index.word_carry = (order, old.word_of, old.word_cols, old.word_vectors)
    return index
