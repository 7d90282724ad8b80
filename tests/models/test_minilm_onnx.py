"""all-MiniLM-L6-v2 on onnxruntime: sentence-transformers' vectors, one text at a time."""

from __future__ import annotations

import numpy as np
import pytest

from memory_lab.models.minilm_onnx import bundled_model_folder, minilm_onnx

TEXTS = [
    "I moved to Busan last spring.",
    "What is my cat's name?",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ, café, naïve — and CJK 東京",
    "x",
    " ".join(["The garden needs water again before the weekend."] * 60),  # past 256 tokens
]


@pytest.fixture(scope="module")
def sentence_transformer():
    torch = pytest.importorskip("torch")
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    return SentenceTransformer(str(bundled_model_folder()), device="cpu")


def test_vectors_are_sentence_transformers(sentence_transformer):
    theirs = sentence_transformer.encode(TEXTS, normalize_embeddings=True, batch_size=8)
    ours = minilm_onnx().encode(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    assert np.abs(ours - theirs).max() < 1e-4  # the long text is cut at 256 tokens by both
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_texts_vector_does_not_depend_on_its_batch():
    engine = minilm_onnx()
    alone = np.stack([engine.encode([t])[0] for t in TEXTS])
    assert np.array_equal(alone, engine.encode(TEXTS))
    assert np.array_equal(alone, engine.encode(TEXTS[::-1])[::-1])
    assert engine.encode([]).shape == (0, 384)
