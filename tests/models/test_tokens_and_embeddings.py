import socket

from memory_lab.models import OfflineEmbeddings, OfflineSummarizer
from memory_lab.models.tokens import TOKENIZER_NAME, count_tokens, encoding


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
