"""The on-disk model-call cache, against the loopback OpenAI mock (the real client code runs)."""

from __future__ import annotations

import pickle
import threading
from contextlib import closing
from pathlib import Path

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage

from memory_lab.log.records import without_timings
from memory_lab.models import OfflineSummarizer
from memory_lab.models.cache import (
    CACHE_FILE,
    CacheStats,
    CallCache,
    cached_chat_model,
    cached_embeddings,
    default_cache_dir,
    is_cache_hit,
)
from memory_lab.models.providers import provider_chat_model, provider_embeddings

from ..models.openai_mock import CHAT_USAGE, OpenAIMock

SECRET = "sk-test-memorylab-CACHE-SECRET-0123456789"
EMBED = "openai:text-embedding-3-small"


@pytest.fixture
def mock(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIMock() as server:
        yield server


def chat(mock, cache, spec="openai:gpt-4o-mini", **kw):
    return cached_chat_model(provider_chat_model(spec, base_url=mock.base_url, **kw), cache)


class Ends(BaseCallbackHandler):
    """Records (hit, usage) for every on_llm_end."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, dict]] = []

    def on_llm_end(self, response, **kwargs):
        usage = response.generations[0][0].message.usage_metadata
        self.seen.append((is_cache_hit(response), usage))


def test_second_identical_call_is_a_hit_with_the_original_usage(tmp_path, mock):
    cache = CallCache(tmp_path)
    model, ends = chat(mock, cache), Ends()
    model.callbacks = [ends]
    first = model.invoke([HumanMessage("What do I use?")])
    assert cache.take_stats() == CacheStats(hits=0, misses=1) and not is_cache_hit(first)
    second = model.invoke([HumanMessage("What do I use?")])
    assert mock.calls("chat") == 1
    assert cache.take_stats() == CacheStats(hits=1, misses=0) and is_cache_hit(second)
    assert second.content == first.content == mock.reply
    assert second.usage_metadata["input_tokens"] == CHAT_USAGE["prompt_tokens"]
    assert second.usage_metadata["output_tokens"] == CHAT_USAGE["completion_tokens"]
    assert [hit for hit, _ in ends.seen] == [False, True]  # callbacks fire on hits too
    assert ends.seen[1][1]["input_tokens"] == CHAT_USAGE["prompt_tokens"]


def test_a_huge_reply_is_not_kept(tmp_path, mock, monkeypatch):
    """A reply over MAX_ENTRY_BYTES is asked again rather than cached (50 MB judge replies had
    grown the cache to 6.1 GB after 60 calls)."""
    from memory_lab.models import cache as cache_module

    monkeypatch.setattr(cache_module, "MAX_ENTRY_BYTES", 2000)
    cache = CallCache(tmp_path)
    mock.reply = "x" * 5000
    model = chat(mock, cache)
    model.invoke([HumanMessage("Tell me everything")])
    model.invoke([HumanMessage("Tell me everything")])
    assert mock.calls("chat") == 2 and cache.take_stats() == CacheStats(hits=0, misses=2)
    mock.reply = "short"
    model.invoke([HumanMessage("And briefly?")])
    model.invoke([HumanMessage("And briefly?")])
    assert mock.calls("chat") == 3  # a reply under the bound is kept


def test_keys_include_model_and_parameters_but_not_retries(tmp_path, mock, monkeypatch):
    cache = CallCache(tmp_path)
    prompt = [HumanMessage("hello")]
    chat(mock, cache).invoke(prompt)
    chat(mock, cache, temperature=0.7).invoke(prompt)
    chat(mock, cache, spec="openai:gpt-4o").invoke(prompt)
    chat(mock, cache).invoke([HumanMessage("hello again")])
    assert mock.calls("chat") == 4 and cache.take_stats() == CacheStats(0, 4)
    chat(mock, cache, max_retries=3).invoke(prompt)  # retries never change a reply
    assert mock.calls("chat") == 4 and cache.take_stats() == CacheStats(1, 0)


def test_embeddings_cache_documents_and_queries(tmp_path, mock):
    texts = ["I live in Busan.", "My dog is Bori.", "I live in Busan."]
    emb = cached_embeddings(provider_embeddings(EMBED, base_url=mock.base_url), tmp_path, EMBED)
    vectors, query = emb.embed_documents(texts), emb.embed_query("Where do I live?")
    calls = mock.calls("embeddings")
    assert calls > 0 and emb.take_stats().hits == 0
    again = cached_embeddings(provider_embeddings(EMBED, base_url=mock.base_url), tmp_path, EMBED)
    assert again.embed_documents(texts) == vectors
    assert again.embed_query("Where do I live?") == query
    assert mock.calls("embeddings") == calls  # zero HTTP calls the second round
    assert again.take_stats() == CacheStats(hits=4, misses=0)
    other = cached_embeddings(
        provider_embeddings("openai:text-embedding-3-large", base_url=mock.base_url),
        tmp_path,
        "openai:text-embedding-3-large",
    )
    other.embed_query("Where do I live?")
    assert mock.calls("embeddings") == calls + 1  # another model never shares vectors


def test_cache_is_on_disk_and_survives_a_new_instance_and_pickling(tmp_path, mock):
    prompt = [HumanMessage("remember me")]
    chat(mock, CallCache(tmp_path)).invoke(prompt)
    fresh = pickle.loads(pickle.dumps(CallCache(tmp_path)))  # as sent to a worker process
    reply = chat(mock, fresh).invoke(prompt)
    assert mock.calls("chat") == 1 and is_cache_hit(reply) and fresh.stats.hits == 1
    assert (tmp_path / CACHE_FILE).is_file()


def test_threads_share_one_cache(tmp_path, mock):
    cache = CallCache(tmp_path)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            model = chat(mock, cache)
            for i in range(8):
                model.invoke([HumanMessage(f"question {i % 4}")])
                cache.db.run("SELECT count(*) FROM generations")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = cache.take_stats()
    assert stats.hits + stats.misses == 32 and 4 <= stats.misses
    assert cache.db.run("SELECT count(*) FROM generations") == [(4,)]
    assert cache.db.run("PRAGMA integrity_check") == [("ok",)]
    before = mock.calls("chat")
    chat(mock, CallCache(tmp_path)).invoke([HumanMessage("question 3")])
    assert mock.calls("chat") == before


def test_api_key_is_written_nowhere(tmp_path, mock):
    cache = CallCache(tmp_path)
    chat(mock, cache).invoke([HumanMessage("secret?")])
    emb = cached_embeddings(provider_embeddings(EMBED, base_url=mock.base_url), tmp_path, EMBED)
    emb.embed_documents(["a text"])
    emb.embed_query("a query")
    assert mock.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"  # key was used
    cache.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(SECRET.encode() not in p.read_bytes() for p in files)


def test_offline_models_and_no_cache(tmp_path):
    cache = CallCache(tmp_path)
    text = "Current summary:\n\nNew lines of conversation:\nHuman: I live in Busan.\n\nNew summary:"
    prompt = [HumanMessage(text)]
    first = cached_chat_model(OfflineSummarizer(), cache).invoke(prompt)
    second = cached_chat_model(OfflineSummarizer(), cache).invoke(prompt)
    assert second.content == first.content and is_cache_hit(second)
    off = cached_chat_model(OfflineSummarizer(), None)  # --no-cache
    assert off.cache is False and not is_cache_hit(off.invoke(prompt))
    assert cache.take_stats() == CacheStats(hits=1, misses=1)


def test_the_suite_never_uses_the_users_cache(classic_run, tmp_path_factory):
    """Session-wide runs too (conftest's private_session_cache): never ~/.cache/memory-lab."""
    cache_dir = Path(classic_run.run["cache_dir"]).resolve()
    assert cache_dir.is_relative_to(tmp_path_factory.getbasetemp().resolve())
    assert not cache_dir.is_relative_to(Path.home() / ".cache" / "memory-lab")


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMORY_LAB_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("MEMORY_LAB_CACHE")
    assert default_cache_dir().parts[-2:] == (".cache", "memory-lab")


def test_an_offline_run_keeps_e5_vectors_and_a_rerun_reuses_them(tmp_path, mini_dialogue):
    import sqlite3

    from memory_lab import resolve_memories, run_benchmark
    from memory_lab.results.read import read_records

    def run(name: str, cache: bool | str) -> list[dict]:
        outcome = run_benchmark(
            resolve_memories(["vector"]),
            [mini_dialogue],
            tmp_path / name,
            cache=cache,
            progress=False,
        )
        return [
            without_timings(r) for r in read_records(outcome.path) if r["type"] in ("turn", "probe")
        ]

    cold = run("cold", str(tmp_path / "c"))
    with closing(sqlite3.connect(tmp_path / "c" / "model-calls.sqlite")) as db:
        (stored,) = db.execute(
            "SELECT count(*) FROM embeddings WHERE key LIKE 'offline:%'"
        ).fetchone()
    assert stored > 0
    assert run("warm", str(tmp_path / "c")) == cold == run("off", False)


PROCESSES, THREADS, ROUNDS, WRITES = 4, 3, 24, 5


def _cold_cache_writer(root: str, worker: int, barrier) -> tuple[int, list[str]]:
    """In a worker process: per round, THREADS threads write to a fresh cache file at once."""
    from pathlib import Path

    from memory_lab.models.cache import offline_embedding_store

    errors: list[str] = []
    failures = 0
    for rnd in range(ROUNDS):
        store = offline_embedding_store(Path(root) / f"round{rnd}")
        start = threading.Barrier(THREADS)

        def write(thread: int, store=store, rnd=rnd, start=start) -> None:
            try:
                start.wait()
                for i in range(WRITES):
                    key = f"r{rnd}p{worker}t{thread}i{i}"
                    store.mset([(key, key.encode())])
                    store.mget([key])
            except BaseException as exc:  # noqa: BLE001 - reported to the test
                errors.append(repr(exc))

        barrier.wait()  # every process opens the fresh file at the same moment
        threads = [threading.Thread(target=write, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        failures += store.db.failures
        store.db.failures = 0
    return failures, errors


def test_concurrent_writers_on_a_cold_cache_all_succeed(tmp_path):
    """Processes x threads open and write one new cache file at once: no write is lost."""
    import multiprocessing
    import sqlite3
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["memory_lab.models.cache"])
    barrier = ctx.Manager().Barrier(PROCESSES)
    with ProcessPoolExecutor(PROCESSES, mp_context=ctx) as pool:
        futures = [
            pool.submit(_cold_cache_writer, str(tmp_path), w, barrier) for w in range(PROCESSES)
        ]
        results = [f.result(timeout=120) for f in futures]
    assert [errors for _, errors in results] == [[]] * PROCESSES  # nothing raised
    assert sum(failures for failures, _ in results) == 0  # no read or write given up
    for rnd in range(ROUNDS):
        with closing(sqlite3.connect(tmp_path / f"round{rnd}" / CACHE_FILE)) as db:
            rows = dict(db.execute("SELECT key, value FROM embeddings").fetchall())
        want = {
            f"offline:r{rnd}p{p}t{t}i{i}": f"r{rnd}p{p}t{t}i{i}".encode()
            for p in range(PROCESSES)
            for t in range(THREADS)
            for i in range(WRITES)
        }
        assert rows == want


def test_a_broken_cache_file_is_a_miss_and_a_lost_write_not_an_error(tmp_path, caplog):
    from memory_lab.models.cache import offline_embedding_store

    (tmp_path / CACHE_FILE).write_bytes(b"not a database" * 100)
    store = offline_embedding_store(tmp_path)
    store.mset([("k", b"v")])  # lost, with a warning
    assert store.mget(["k"]) == [None]  # a miss
    assert store.db.failures == 2
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # once, not per call
    assert str(tmp_path / CACHE_FILE) in caplog.text and "goes on without it" in caplog.text


def test_a_write_waits_for_a_lock_held_by_another_process_then_lands(tmp_path):
    import sqlite3
    import subprocess
    import sys

    from memory_lab.models.cache import offline_embedding_store

    store = offline_embedding_store(tmp_path)
    store.mset([("first", b"1")])
    holder = subprocess.Popen(  # holds the write lock for a second
        [
            sys.executable,
            "-c",
            "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None);"
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(1);"
            "c.execute('COMMIT')",
            str(tmp_path / CACHE_FILE),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    store.mset([("second", b"2")])
    assert holder.wait(timeout=30) == 0
    assert store.mget(["first", "second"]) == [b"1", b"2"] and store.db.failures == 0
    with closing(sqlite3.connect(tmp_path / CACHE_FILE)) as db:
        assert db.execute("SELECT count(*) FROM embeddings").fetchone() == (2,)


@pytest.mark.parametrize("bad", [-700, 10**300])
def test_a_provider_s_usage_out_of_range_is_no_count(mock, bad):
    """Negative usage had been reported as '-700 out'; 10^300 tokens overflowed."""
    import json

    from memory_lab.models.accounting import Meter, MeterCallback

    body = {
        "id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": bad, "total_tokens": 12},
    }  # fmt: skip
    mock.always["chat"] = (200, json.dumps(body), {})
    meter = Meter()
    model = provider_chat_model("openai:gpt-4o-mini", base_url=mock.base_url)
    model.callbacks = [MeterCallback(meter)]
    model.invoke([HumanMessage("Hi")])
    usage = meter.take()
    assert usage.input_tokens == 12 and usage.output_tokens == 0
