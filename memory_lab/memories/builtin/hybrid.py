"""``hybrid``: the guide's ``HybridMemoryRetriever`` — dense search and BM25, fused by RRF.

Each exchange is one document, written as ``vector`` writes it (``input: ...`` then
``response: ...``) and embedded the same way, so the embedding tokens are metered exactly as for
``vector``. A query is searched twice: in the cell's Chroma collection with the run's embeddings
(dense), and in a BM25 index over the documents' terms (sparse; English words lower-cased,
stopwords dropped, lightly stemmed, codes such as ``ZX-48213`` kept whole and in parts; Korean
split into content morphemes by kiwipiepy, so particles and endings do not stop a match). Each
search keeps its top ``candidates``; the two lists are fused by weighted reciprocal rank fusion
(``weight / (rrf_k + rank)`` summed over the lists, ranks from 1), optionally reranked by a
sentence-transformers ``CrossEncoder`` loaded from a local folder, and the top ``k`` documents
are the context, best first.

The guide rebuilds its BM25 index after every insert, which makes each turn cost more as the
dialogue grows. Here the index keeps term statistics incrementally (document frequency, postings
and lengths): an insert touches only the new document's terms, and a query scores with the
statistics as they are (Lucene's BM25, as ``bm25s`` computes it), so nothing is ever rebuilt.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memory_lab.errors import ConfigError, EnvironmentProblem
from memory_lab.memories.chroma import STACK as CHROMA_STACK
from memory_lab.memories.protocol import (
    Exchange,
    Item,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
)
from memory_lab.memories.registry import ParamDoc, register_memory
from memory_lab.models.prompt import INPUT_KEY, OUTPUT_KEY
from memory_lab.text.analysis import en_stopwords, kiwi, stem

T = TypeVar("T")

# BM25 (bm25s's defaults, Lucene variant)
BM25_K1 = 1.5
BM25_B = 0.75

# Korean content morphemes: common and proper nouns, numerals, verb and adjective stems, roots.
# Latin words and digits inside Korean text go through the English path (one tokenisation for
# codes such as "ZX-48213" in either language).
_KO_TAGS = frozenset(("NNG", "NNP", "NR", "VV", "VA", "XR"))
_HANGUL = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]+")
_CODE = re.compile(r"[^\W_]+(?:[-_./][^\W_]+)*")
_CODE_SPLIT = re.compile(r"[-_./]")


def bm25_terms(text: str) -> list[str]:
    """The BM25 terms of a text, in order (repeats kept: they are term frequencies).

    NFKC and casefold first. Korean: kiwipiepy's content morphemes (``동생은``, ``동생이`` ->
    ``동생``; ``살아요``, ``살죠`` -> ``살``). Other words: stopwords dropped, a light stemmer
    (``moved`` -> ``mov``); a word joined by ``-``, ``_``, ``.`` or ``/`` is kept whole and in
    parts (``zx-48213``, ``zx``, ``48213``), so an order number matches as written or in part.
    """
    norm = unicodedata.normalize("NFKC", text).casefold()
    terms: list[str] = []
    if _HANGUL.search(norm):
        for token in kiwi().tokenize(norm):
            if token.tag.split("-")[0] in _KO_TAGS and _HANGUL.search(token.form):
                terms.append(token.form)
        norm = _HANGUL.sub(" ", norm)
    stop = en_stopwords()
    for match in _CODE.finditer(norm):
        word = match.group()
        parts = [p for p in _CODE_SPLIT.split(word) if p]
        if len(parts) > 1:
            terms.append(word)
        terms.extend(stem(p) for p in parts if p not in stop)
    return terms


class _Postings:
    """One term's postings: document indices and term frequencies in arrays that double when
    full, so an append is amortised O(1) and a query reads them without copying."""

    __slots__ = ("docs", "tfs", "size")

    def __init__(self) -> None:
        self.docs = np.empty(4, dtype=np.int64)
        self.tfs = np.empty(4, dtype=np.float64)
        self.size = 0

    def append(self, doc: int, tf: int) -> None:
        if self.size == len(self.docs):
            self.docs = np.concatenate([self.docs, np.empty_like(self.docs)])
            self.tfs = np.concatenate([self.tfs, np.empty_like(self.tfs)])
        self.docs[self.size] = doc
        self.tfs[self.size] = tf
        self.size += 1


class BM25Index:
    """Incremental BM25: an insert updates the term statistics; nothing is ever rebuilt.

    Scores are Lucene's BM25 as ``bm25s`` computes them (``idf = ln(1 + (N - df + 0.5) /
    (df + 0.5))``, ``tf / (tf + k1 (1 - b + b len / avg_len))``), with ``N``, ``df`` and the
    average length as they are when the query arrives. ``postings_written`` counts the postings
    every insert added: one per distinct term of the new document, whatever the index holds.
    """

    def __init__(self, k1: float = BM25_K1, b: float = BM25_B):
        self.k1 = k1
        self.b = b
        self.postings: dict[str, _Postings] = {}
        self._lengths = np.zeros(64, dtype=np.float64)
        self.size = 0
        self.total_length = 0
        self.postings_written = 0

    def add(self, terms: Sequence[str]) -> int:
        """Index one document's terms; its index (0, 1, ...)."""
        doc = self.size
        if doc == len(self._lengths):  # amortised O(1): the array doubles when full
            self._lengths = np.concatenate([self._lengths, np.zeros_like(self._lengths)])
        self._lengths[doc] = len(terms)
        self.size += 1
        self.total_length += len(terms)
        for term, tf in Counter(terms).items():
            if term not in self.postings:
                self.postings[term] = _Postings()
            self.postings[term].append(doc, tf)
            self.postings_written += 1
        return doc

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for the query terms (each distinct term once)."""
        out = np.zeros(self.size, dtype=np.float64)
        if not self.size or not self.total_length:
            return out
        avg = self.total_length / self.size
        for term in dict.fromkeys(terms):
            posting = self.postings.get(term)
            if posting is None:
                continue
            docs, tfs = posting.docs[: posting.size], posting.tfs[: posting.size]
            idf = np.log(1 + (self.size - posting.size + 0.5) / (posting.size + 0.5))
            norm = self.k1 * (1 - self.b + self.b * self._lengths[docs] / avg)
            out[docs] += idf * tfs / (tfs + norm)
        return out

    def top(self, terms: Sequence[str], n: int) -> list[int]:
        """The ``n`` best documents with a positive score, best first (ties: newer first)."""
        scores = self.scores(terms)
        hits = np.flatnonzero(scores > 0)
        order = np.lexsort((-hits, -scores[hits]))[:n]
        return hits[order].tolist()


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[T]], weights: Sequence[float], rrf_k: float = 60
) -> list[tuple[T, float]]:
    """Weighted RRF: ``score(d) = sum_i weights[i] / (rrf_k + rank_i(d))``, ranks from 1.

    Returns ``(item, score)`` best first; equal scores keep the order in which the items first
    appear across the rankings (the first ranking first).
    """
    if len(rankings) != len(weights):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[T, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (rrf_k + rank)
    first = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], first[kv[0]]))


_RERANKERS: dict[str, tuple[Any, threading.Lock]] = {}
_RERANKERS_LOCK = threading.Lock()


def load_reranker(path: str) -> tuple[Any, threading.Lock]:
    """The process's ``CrossEncoder`` for a local folder (loaded once) and its lock."""
    key = str(Path(path).resolve())
    with _RERANKERS_LOCK:
        if key not in _RERANKERS:
            try:
                from sentence_transformers import CrossEncoder
            except ImportError:
                raise EnvironmentProblem(
                    "memory 'hybrid' reranks with a sentence-transformers CrossEncoder, which "
                    "this install lacks: pip install torch==2.13.0 'memory-lab[rerank]' (torch "
                    "first, or pip pulls a CUDA build)"
                ) from None

            _RERANKERS[key] = (
                CrossEncoder(key, device="cpu", local_files_only=True),
                threading.Lock(),
            )
        return _RERANKERS[key]


@dataclass(frozen=True)
class Ranking:
    """How one query was answered: document indices, best first, at every stage."""

    dense: tuple[int, ...]
    sparse: tuple[int, ...]
    fused: tuple[tuple[int, float], ...]
    reranked: tuple[tuple[int, float], ...] | None
    final: tuple[int, ...]


@dataclass(frozen=True)
class Document:
    text: str
    turn_ids: tuple[str, ...]
    session_id: str


class HybridMemory:
    """Documents in a Chroma collection and a BM25 index; recall fuses both searches."""

    def __init__(
        self,
        collection: Any,
        embed_documents: Callable[[list[str]], list[list[float]]],
        embed_query: Callable[[str], list[float]],
        *,
        k: int = 4,
        dense_weight: float = 0.6,
        sparse_weight: float = 0.4,
        rrf_k: int = 60,
        candidates: int = 20,
        rerank: str = "",
        timestamps: bool = True,
    ):
        self.collection = collection
        self.embed_documents = embed_documents
        self.embed_query = embed_query
        self.k = k
        self.weights = (dense_weight, sparse_weight)
        self.rrf_k = rrf_k
        self.candidates = candidates
        self.rerank = rerank
        self.reranker = load_reranker(rerank) if rerank else None
        self.timestamps = timestamps
        self.documents: list[Document] = []
        self.index = BM25Index()

    def observe(self, exchange: Exchange) -> None:
        user = exchange.dated_user() if self.timestamps else exchange.user
        text = f"{INPUT_KEY}: {user}\n{OUTPUT_KEY}: {exchange.assistant}"
        doc = self.index.add(bm25_terms(f"{user}\n{exchange.assistant}"))
        [vector] = self.embed_documents([text])
        self.collection.add(ids=[str(doc)], embeddings=[vector], documents=[text])
        self.documents.append(Document(text, exchange.turn_ids, exchange.session_id))

    def dense_ranking(self, text: str) -> list[int]:
        """The ``candidates`` documents nearest the query's embedding, nearest first."""
        vector = self.embed_query(text)  # always, as vector memory does (metered alike)
        n = min(self.candidates, len(self.documents))
        if not n:
            return []
        found = self.collection.query(query_embeddings=[vector], n_results=n, include=[])
        return [int(i) for i in found["ids"][0]]

    def rank(self, text: str) -> Ranking:
        """Dense and BM25 candidates, their fusion, the optional rerank and the final top k."""
        dense = self.dense_ranking(text)
        sparse = self.index.top(bm25_terms(text), self.candidates)
        fused = reciprocal_rank_fusion([dense, sparse], self.weights, self.rrf_k)
        reranked = None
        if self.reranker is not None and fused:
            pool = [doc for doc, _ in fused[: self.candidates]]
            model, lock = self.reranker
            with lock:
                scores = model.predict(
                    [(text, self.documents[d].text) for d in pool], show_progress_bar=False
                )
            order = sorted(range(len(pool)), key=lambda i: (-float(scores[i]), i))
            reranked = tuple((pool[i], float(scores[i])) for i in order)
        best = reranked if reranked is not None else fused
        final = tuple(doc for doc, _ in best[: self.k])
        return Ranking(tuple(dense), tuple(sparse), tuple(fused), reranked, final)

    def recall(self, query: Query) -> Recall:
        ranking = self.rank(query.text)
        return Recall(
            tuple(
                Item(self.documents[d].text, self.documents[d].turn_ids, "retrieved")
                for d in ranking.final
            ),
            ranking=tuple(self.documents[d].turn_ids for d in ranking.final),
        )

    def end_session(self, session: SessionInfo) -> None:
        """Documents span sessions; nothing to do."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "documents": len(self.documents),
            "dense_documents": self.collection.count(),
            "bm25_terms": len(self.index.postings),
            "bm25_postings": self.index.postings_written,
            "weights": {"dense": self.weights[0], "sparse": self.weights[1]},
            "rrf_k": self.rrf_k,
            "candidates": self.candidates,
            "k": self.k,
            "rerank": self.rerank or None,
        }

    def held_texts(self) -> list[str]:
        """The stored documents, once (the dense and the BM25 index hold the same ones)."""
        return [doc.text for doc in self.documents]

    def close(self) -> None:
        """The collection is dropped through the factory's ``on_close``."""


def check_params(params: dict[str, Any]) -> None:
    """ValueError naming the parameter when the values cannot make a hybrid memory."""
    if params["dense_weight"] == 0 and params["sparse_weight"] == 0:
        raise ConfigError(
            "memory 'hybrid': parameters 'dense_weight' and 'sparse_weight' are both 0; "
            "at least one search must count"
        )
    if params["k"] > params["candidates"]:
        raise ConfigError(
            f"memory 'hybrid': parameter 'k' ({params['k']}) must be at most 'candidates' "
            f"({params['candidates']}), the documents each search passes on"
        )
    path = params["rerank"]
    if path:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ConfigError(
                f"memory 'hybrid': parameter 'rerank' must be a local cross-encoder folder, but "
                f"{path!r} is not a folder"
            )
        if not (folder / "config.json").is_file():
            raise ConfigError(
                f"memory 'hybrid': parameter 'rerank': {path!r} has no config.json (expected a "
                "model saved with save_pretrained, e.g. a sentence-transformers CrossEncoder)"
            )


def preflight_hybrid(params: dict[str, Any], resource: Any) -> None:
    """Before a run: the parameters agree and a rerank model folder exists."""
    check_params(params)


@register_memory(
    "hybrid",
    "Every exchange a document, found by dense search (Chroma) and BM25 (Korean by "
    "morphemes), fused by weighted reciprocal rank fusion, optionally reranked by a "
    "cross-encoder (HybridMemoryRetriever).",
    {
        "k": ParamDoc("documents in the context", min=1),
        "dense_weight": ParamDoc("weight of the dense ranking in the fusion", min=0),
        "sparse_weight": ParamDoc("weight of the BM25 ranking in the fusion", min=0),
        "rrf_k": ParamDoc("RRF constant: weight / (rrf_k + rank)", min=0),
        "candidates": ParamDoc("documents each search passes to the fusion", min=1),
        "rerank": ParamDoc(
            "a local sentence-transformers CrossEncoder folder that reranks the fused "
            "candidates (empty: no rerank)"
        ),
    },
    preflight=preflight_hybrid,
    stack=CHROMA_STACK,
)
def hybrid(
    res: MemoryResources,
    k: int = 4,
    dense_weight: float = 0.6,
    sparse_weight: float = 0.4,
    rrf_k: int = 60,
    candidates: int = 20,
    rerank: str = "",
) -> HybridMemory:
    from memory_lab.memories.chroma import cell_collection

    params = dict(
        k=k,
        dense_weight=dense_weight,
        sparse_weight=sparse_weight,
        rrf_k=rrf_k,
        candidates=candidates,
        rerank=rerank,
    )
    check_params(params)
    collection = cell_collection(res)
    return HybridMemory(
        collection,
        res.embeddings.embed_documents,
        res.embeddings.embed_query,
        timestamps=res.timestamps,
        **{**params, "rerank": str(Path(rerank).expanduser()) if rerank else ""},
    )
