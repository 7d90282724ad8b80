"""A cell's clock charges the vectors it is served from the shared cache what they cost to
compute, so a memory's seconds do not depend on which cell embedded a text first."""

from __future__ import annotations

import time

import numpy as np
import pytest

from memory_lab import work_clock
from memory_lab.models import embeddings
from memory_lab.models.cache import offline_embedding_store
from memory_lab.models.embeddings import OfflineEmbeddings

COST = 0.05  # seconds a text takes to embed, here


@pytest.fixture
def slow_engine(monkeypatch):
    """An engine that takes COST seconds per text (and counts the texts it embeds)."""
    embedded = []

    def encode(model, texts, kind, batch_size, device="cpu"):
        time.sleep(COST * len(texts))
        embedded.extend(texts)
        return np.ones((len(texts), 4), dtype=np.float32)

    monkeypatch.setattr(embeddings, "_encode", encode)
    monkeypatch.setattr(embeddings, "_COSTS", {})
    return embedded


def timed(engine: OfflineEmbeddings, texts: list[str]) -> tuple[float, float]:
    """(the cell's clock, the wall clock) over embedding ``texts`` in a cell of its own."""
    with work_clock.cell_scope():
        start, wall = work_clock.clock(), time.perf_counter()
        engine.embed_documents(texts)
        return work_clock.clock() - start, time.perf_counter() - wall


def test_a_cell_served_from_the_cache_is_charged_what_computing_cost(slow_engine):
    engine = OfflineEmbeddings(model="minilm")
    texts = ["alpha", "beta", "gamma", "delta"]
    first, first_wall = timed(engine, texts)
    second, second_wall = timed(engine.view(None), texts)
    assert slow_engine == texts  # computed once
    assert second_wall < COST  # the second cell computed nothing...
    assert second == pytest.approx(first_wall, rel=0.25)  # ...and is charged what it cost
    assert first == pytest.approx(first_wall, rel=0.25)  # the first is not charged twice


def test_a_text_is_charged_once_per_cell_and_not_outside_a_cell(slow_engine):
    engine = OfflineEmbeddings(model="minilm")
    engine.embed_documents(["alpha"])
    with work_clock.cell_scope():
        engine.embed_documents(["alpha", "alpha"])
        once = work_clock.charged()
        engine.embed_query("alpha")  # MiniLM: the same vector, already had by this cell
        assert work_clock.charged() == once
    assert COST * 0.5 < once < COST * 2
    assert work_clock.charged() == 0.0  # outside the cell, nothing is charged
    engine.embed_documents(["alpha"])
    assert work_clock.charged() == 0.0


def test_the_cost_travels_with_the_vector_through_the_run_s_store(slow_engine, tmp_path):
    """A --jobs worker (another process: another engine over the same store) is charged the
    cost the first one recorded beside the vector."""
    store = offline_embedding_store(tmp_path)
    OfflineEmbeddings(model="minilm", store=store).embed_documents(["alpha", "beta"])
    embeddings._COSTS.clear()  # what the other process knows: only the store
    other = OfflineEmbeddings(model="minilm", store=offline_embedding_store(tmp_path))
    charged, wall = timed(other, ["alpha", "beta"])
    assert slow_engine == ["alpha", "beta"]
    assert wall < COST and charged == pytest.approx(2 * COST, rel=0.5)
