"""The hybrid memory: BM25 and dense search fused by RRF, Korean by morphemes, optional rerank."""

from __future__ import annotations

import itertools
import random

import pytest

from memory_lab.memories import (
    MemoryResources,
    MemorySpecError,
    Query,
    build_memory,
    parse_memory_spec,
)
from memory_lab.memories.builtin.hybrid import (
    BM25Index,
    bm25_terms,
    reciprocal_rank_fusion,
)
from memory_lab.memories.protocol import Exchange
from memory_lab.memories.registry import preflight_memories

from ..conftest import FIXTURES

_cells = itertools.count()


@pytest.fixture(scope="module")
def embeddings():
    from memory_lab.models.embeddings import DEFAULT_MEMORY_EMBEDDING_MODEL, OfflineEmbeddings

    return OfflineEmbeddings(model=DEFAULT_MEMORY_EMBEDDING_MODEL)  # what runs give memories


@pytest.fixture
def make_memory(embeddings):
    """Build memories from specs with their own Chroma collections; closed after the test."""
    opened = []

    def make(spec: str, users: list[str] = (), reply: str = "Noted."):
        res = MemoryResources(models={}, embeddings=embeddings, cell_id=f"hybrid-{next(_cells)}")
        memory = build_memory(parse_memory_spec(spec), res)
        opened.append(res)
        for i, user in enumerate(users):
            memory.observe(
                Exchange(i, user, reply, f"s1.t{2 * i + 1}", (f"s1.t{2 * i + 2}",), "s1")
            )
        return memory

    yield make
    for res in opened:
        res.close()


def test_rrf_against_a_hand_worked_example():
    # a: 0.6/61 + 0.4/62 = .016288   b: 0.6/62 = .009677
    # c: 0.6/63 + 0.4/61 = .016081   d: 0.4/63 = .006349
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], [0.6, 0.4], rrf_k=60)
    assert [item for item, _ in fused] == ["a", "c", "b", "d"]
    expected = {"a": 0.6 / 61 + 0.4 / 62, "b": 0.6 / 62, "c": 0.6 / 63 + 0.4 / 61, "d": 0.4 / 63}
    assert dict(fused) == pytest.approx(expected, abs=1e-12)
    assert round(dict(fused)["a"], 6) == 0.016288
    # with equal weights and rrf_k=0 the ranks speak plainly: c (1/3 + 1) beats a (1 + 1/2)
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], [1, 1], rrf_k=0)
    assert fused[0] == ("a", 1.5) and fused[1][0] == "c" and fused[1][1] == pytest.approx(4 / 3)
    # a tie keeps first appearance: dense's first beats sparse's first at equal weight
    assert [i for i, _ in reciprocal_rank_fusion([["x"], ["y"]], [1, 1])] == ["x", "y"]


def test_incremental_bm25_scores_equal_a_bm25s_index_rebuilt_from_scratch():
    import bm25s

    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    index = BM25Index()
    corpus = []
    for size in range(1, 61):
        doc = rng.choices(words, k=rng.randint(1, 12))
        corpus.append(doc)
        index.add(doc)
        if size in (1, 2, 10, 60):
            reference = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
            reference.index(corpus, show_progress=False)
            query = rng.sample(words, 4)
            assert index.scores(query) == pytest.approx(reference.get_scores(query), rel=1e-5)


def test_an_insert_touches_only_the_new_documents_terms_and_never_rebuilds(
    make_memory, monkeypatch
):
    import bm25s

    def rebuild(*args, **kwargs):
        raise AssertionError("the BM25 index was rebuilt")

    monkeypatch.setattr(bm25s.BM25, "index", rebuild)
    line = "Lena lent me a camera in Oslo, locker {n}."
    memory = make_memory("hybrid")
    written = []
    for n in range(60):
        before = memory.index.postings_written
        memory.recall(Query("Where is the camera?"))  # a prompt before every exchange, as in a run
        memory.observe(Exchange(n, line.format(n=n), "Noted.", f"t{n}", (), "s1"))
        written.append(memory.index.postings_written - before)
    # the 60th insert writes as many postings as the first: one per distinct term, never more
    distinct = len(set(bm25_terms(line.format(n=7) + "\nNoted.")))
    assert written[0] == written[-1] == distinct
    assert memory.snapshot()["documents"] == memory.snapshot()["dense_documents"] == 60


ORDERS = [
    "The courier said package QX-48218 will be delivered on Friday.",
    "Delivery ZK-43213 came twice but nobody was home.",
    "I had to pick up box XZ-48123 at the post office downtown.",
    "My shipment SX-48313 from the online shop is stuck at customs.",
    "The tracking page for ZY-49213 has not changed since Monday.",
    "The plumber is coming on Thursday morning.",
    "I finally finished that book about the history of maps.",
    "ZX-48213 is the replacement hinge for the oven door.",
    "My neighbour's dog barked all night again.",
    "Work was busy, lots of meetings about the new roadmap.",
    "I tried a new recipe with lentils and it was decent.",
]


def test_bm25_brings_an_exact_order_number_that_dense_search_ranks_low_into_the_context(
    make_memory,
):
    question = "Has parcel ZX-48213 shipped yet?"
    target = ORDERS.index("ZX-48213 is the replacement hinge for the oven door.")
    memory = make_memory("hybrid", ORDERS)
    ranking = memory.rank(question)
    assert ranking.dense.index(target) >= 4  # look-alike codes about parcels come first
    assert ranking.sparse[0] == target  # the exact token, rare in the dialogue
    assert ranking.final[0] == target
    recall = memory.recall(Query(question))
    assert "ZX-48213" in recall.items[0].text and recall.items[0].turn_ids == ("s1.t15", "s1.t16")
    # the vector memory (same embeddings, same k) misses it
    vector = make_memory("vector", ORDERS)
    assert "ZX-48213" not in vector.recall(Query(question)).items[0].text


def test_korean_is_matched_by_morphemes_whatever_the_particle_or_ending():
    stored = bm25_terms("제 동생은 수원에 살아요.")
    asked = bm25_terms("동생이 어디에 살죠?")
    assert {"동생", "수원", "살"} <= set(stored)
    assert {"동생", "살"} <= set(asked) and "어디" not in asked  # pronouns are not content
    assert not set("제 동생은 수원에 살아요".split()) & set("동생이 어디에 살죠".split())
    # Latin codes inside Korean go the English way: whole and in parts
    assert {"zx-48213", "zx", "48213", "주문"} <= set(bm25_terms("주문번호는 ZX-48213번이에요."))


def test_a_korean_question_with_other_particles_finds_its_exchange(make_memory):
    users = [
        "요즘 회사 일이 너무 바빠요.",
        "제 동생은 수원에 살아요.",
        "주말에 등산을 다녀왔어요.",
        "어머니가 김치를 보내 주셨어요.",
        "새로 산 자전거가 마음에 들어요.",
    ]
    memory = make_memory("hybrid", users, reply="그렇군요.")
    ranking = memory.rank("동생이 어디에 살죠?")
    assert ranking.sparse[0] == 1 and ranking.final[0] == 1


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A randomly initialised one-layer BERT cross-encoder and its tokenizer, saved locally."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    words = sorted({w for text in ORDERS for w in bm25_terms(text)} | set("has parcel".split()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *"abcdefghijklmnopqrstuvwxyz"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", "utf-8")
    torch.manual_seed(3)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=1.0,  # scores far apart, so the order is the model's, not noise
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def test_a_cross_encoder_reranks_the_fused_candidates(make_memory, tiny_cross_encoder):
    from sentence_transformers import CrossEncoder

    question = "Has parcel ZX-48213 shipped yet?"
    memory = make_memory(f"hybrid:rerank={tiny_cross_encoder},k=3", ORDERS)
    ranking = memory.rank(question)
    pool = [doc for doc, _ in ranking.fused]  # 11 documents < 20 candidates: all reranked
    scores = CrossEncoder(str(tiny_cross_encoder), device="cpu").predict(
        [(question, memory.documents[d].text) for d in pool]
    )
    by_model = sorted(pool, key=lambda d: -scores[pool.index(d)])
    assert [doc for doc, _ in ranking.reranked] == by_model
    assert list(ranking.final) == by_model[:3] != pool[:3]  # the model's order, not the fusion's
    recall = memory.recall(Query(question))
    assert [item.text for item in recall.items] == [memory.documents[d].text for d in by_model[:3]]
    assert memory.snapshot()["rerank"] == str(tiny_cross_encoder)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hybrid:k=0", "parameter 'k' must be at least 1"),
        ("hybrid:candidates=0", "parameter 'candidates' must be at least 1"),
        ("hybrid:dense_weight=-0.5", "parameter 'dense_weight' must be at least 0"),
        ("hybrid:rrf_k=x", "parameter 'rrf_k' must be int"),
    ],
)
def test_bad_parameters_are_refused_when_the_spec_is_parsed(spec, message):
    with pytest.raises(MemorySpecError, match=message):
        parse_memory_spec(spec)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hybrid:rerank=/no/such/model", "parameter 'rerank' must be a local cross-encoder"),
        ("hybrid:k=30", "parameter 'k' \\(30\\) must be at most 'candidates' \\(20\\)"),
        ("hybrid:dense_weight=0,sparse_weight=0", "'dense_weight' and 'sparse_weight' are both"),
    ],
)
def test_impossible_settings_are_refused_before_a_run(spec, message, tmp_path, capsys):
    from memory_lab.cli import main

    with pytest.raises(ValueError, match=message):
        preflight_memories([parse_memory_spec(spec)])
    out = tmp_path / "run"
    argv = ["run", "--memory", spec, "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml")]
    assert main([*argv, "--out", str(out), "--quiet"]) == 2
    assert not out.exists() and message.replace("\\", "") in capsys.readouterr().err


def test_a_run_reports_source_turns_and_meters_embeddings_exactly_as_vector(tmp_path):
    from memory_lab.cli import main
    from memory_lab.results.read import read_records

    out = tmp_path / "run"
    argv = ["run", "--memory", "hybrid", "vector", "--dialogues"]
    argv += [str(FIXTURES / "dialogues" / "mini.yaml"), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    records = read_records(out)
    embedded = {
        memory: [
            r["memory_tokens"] for r in records if r["type"] == "turn" and r["memory"] == memory
        ]
        for memory in ("hybrid", "vector")
    }
    assert embedded["hybrid"] == embedded["vector"] and sum(embedded["hybrid"]) > 0
    probes = {r["probe_id"]: r for r in records if r["type"] == "probe" and r["memory"] == "hybrid"}
    assert "busan" in probes["q-city"]["recalled_turns"]
    assert probes["q-city"]["evidence_recall"] == 1
    assert probes["q-cat"]["recalled_turns"][:2] == ["cat", "s1.t6"] and probes["q-cat"]["correct"]
