"""``memory-lab serve`` through a real HTTP client against uvicorn on loopback (offline models)."""

from __future__ import annotations

import json
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest
import yaml

from memory_lab.dialogue.model import parse_documents
from memory_lab.log.config import RunConfig
from memory_lab.run.context import RunModels
from memory_lab.run.prepare import resolve_memories
from memory_lab.serve.chat import cell_id
from memory_lab.serve.guard import Limits

from ..models.openai_mock import CHAT_USAGE, OpenAIMock


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120)


def by_memory(body: dict) -> dict[str, dict]:
    return {m["memory"]: m for m in body["memories"]}


def test_chat_snapshot_and_delete(serve):
    with serve(["buffer", "window:k=1"]) as url, client(url) as http:
        first = http.post("/chat/alice", json={"message": "My sister is called Ingrid."})
        assert first.status_code == 200, first.text
        assert first.json()["reply"]  # the offline reader answered
        turn = by_memory(first.json())["buffer"]
        assert turn["prompt_context"] == ""  # nothing was remembered before the first message
        assert turn["tokens"]["prompt"] > 0 and turn["tokens"]["completion"] > 0
        assert "Ingrid" in turn["state"]["context"]  # saved after the reply
        second = http.post("/chat/alice", json={"message": "I keep bees on the roof."}).json()
        views = by_memory(second)
        assert "Ingrid" in views["buffer"]["prompt_context"]
        assert views["buffer"]["tokens"]["context"] > 0
        # the window of one exchange has let the first one go; the buffer has not
        assert "Ingrid" not in views["window:k=1"]["state"]["context"]
        assert "Ingrid" in views["buffer"]["state"]["context"]

        snap = http.get("/memory/alice").json()
        memories = by_memory(snap)
        assert memories["buffer"]["snapshot"]["messages"] == 4
        assert "bees" in memories["window:k=1"]["context"]
        one = http.get("/memory/alice", params={"memory": "window:k=1"}).json()
        assert [m["memory"] for m in one["memories"]] == ["window:k=1"]

        # another user shares nothing with alice
        bob = by_memory(http.get("/memory/bob").json())
        assert bob["buffer"]["context"] == "" and bob["buffer"]["snapshot"]["messages"] == 0

        gone = http.delete("/memory/alice")
        assert gone.status_code == 200 and gone.json()["forgotten"] == ["buffer", "window:k=1"]
        after = by_memory(http.get("/memory/alice").json())
        assert after["buffer"]["context"] == "" and after["buffer"]["snapshot"]["messages"] == 0


def test_chat_with_one_memory_and_save_as_dialogue(serve):
    with serve(["buffer", "window:k=1"]) as url, client(url) as http:
        said = ["I moved to Lyon in May.", "My cat is called Mochi.", "I work nights."]
        for message in said:
            body = http.post("/chat/carol_1", json={"message": message, "memory": "buffer"})
            assert [m["memory"] for m in body.json()["memories"]] == ["buffer"]
        saved = http.get("/dialogue/carol_1", params={"memory": "buffer"})
        assert saved.status_code == 200
        assert saved.headers["content-type"].startswith("application/yaml")
        assert 'filename="chat-carol_1.yaml"' in saved.headers["content-disposition"]
        dialogues, problems = parse_documents(list(yaml.safe_load_all(saved.text)), "saved.yaml")
        assert not problems
        (dialogue,) = dialogues
        users = [t.text for t in dialogue.turns if t.role == "user"]
        assert users == said and dialogue.probes == ()
        assert len([t for t in dialogue.turns if t.role == "assistant"]) == 3
        # the window memory was not spoken to: nothing to save
        empty = http.get("/dialogue/carol_1", params={"memory": "window:k=1"})
        assert empty.status_code == 404 and "said nothing" in empty.json()["error"]


def test_bad_inputs_are_json_errors(serve):
    limits = Limits(max_message_chars=200, rate=6, rate_window=60)
    with serve(["buffer"], limits=limits) as url, client(url) as http:

        def error(response, status: int) -> str:
            assert response.status_code == status, response.text
            assert response.headers["content-type"] == "application/json"
            return response.json()["error"]

        assert "200" in error(http.post("/chat/dave", json={"message": "x" * 201}), 413)
        raw = b'{"message": "' + b"y" * 20_000 + b'"}'  # refused before it is parsed
        headers = {"content-type": "application/json"}
        assert "bytes" in error(http.post("/chat/dave", content=raw, headers=headers), 413)
        chunks = iter([raw[:8000], raw[8000:]])  # chunked: no length to read, counted as it comes
        assert "bytes" in error(http.post("/chat/dave", content=chunks, headers=headers), 413)
        for bad in ("has space", "-dash", "dots.are.out", "x" * 65, "é"):
            assert "not valid" in error(http.post(f"/chat/{bad}", json={"message": "hi"}), 400)
        unknown = error(http.post("/chat/erin", json={"message": "hi", "memory": "nope"}), 404)
        assert "'nope' is not served here (served: buffer)" in unknown
        assert "not served" in error(http.get("/memory/erin", params={"memory": "nope"}), 404)
        assert "JSON" in error(http.post("/chat/erin", content=b"{", headers=headers), 422)
        assert "message: required" in error(http.post("/chat/erin", json={}), 422)
        assert "unknown field" in error(
            http.post("/chat/erin", json={"message": "hi", "colour": "red"}), 422
        )
        assert "control" in error(http.post("/chat/erin", json={"message": "a\x00b"}), 422)
        assert "empty" in error(http.post("/chat/erin", json={"message": "   "}), 422)
        assert error(http.get("/no/such/route"), 404) == "no such route"

        for n in range(6):  # the seventh request within the minute is refused
            assert http.post("/chat/frank", json={"message": f"hello {n}"}).status_code == 200
        limited = http.post("/chat/frank", json={"message": "one more"})
        assert "--rate" in error(limited, 429)
        assert int(limited.headers["retry-after"]) >= 1
        assert http.get("/memory/frank").status_code == 429  # every route counts
        assert http.get("/memory/grace").status_code == 200  # another user is not limited
        # a refused request saved nothing
        assert by_memory(http.get("/memory/erin").json())["buffer"]["snapshot"]["messages"] == 0


def test_max_users(serve):
    with serve(["buffer"], limits=Limits(max_users=2)) as url, client(url) as http:
        # reads of users the server does not hold take no slot
        for user in ("r1", "r2", "r3"):
            assert http.get(f"/memory/{user}").status_code == 200
            assert http.get(f"/dialogue/{user}").status_code == 404
        said = {"message": "hello"}
        assert http.post("/chat/u1", json=said).status_code == 200
        assert http.post("/chat/u2", json=said).status_code == 200
        full = http.post("/chat/u3", json=said)
        assert full.status_code == 503 and "--max-users" in full.json()["error"]
        assert http.delete("/memory/r1").status_code == 200  # nor do forgets
        assert http.get("/memory/u3").status_code == 200  # a read still answers
        assert http.delete("/memory/u1").status_code == 200
        assert http.post("/chat/u3", json=said).status_code == 200


def test_logs_hold_no_message_text_unless_asked(serve, caplog):
    secret = "my PIN is 4471 and my code word is quartzmoth"
    caplog.set_level(logging.INFO, logger="memory_lab.serve")
    with serve(["buffer"]) as url, client(url) as http:
        assert http.post("/chat/hank", json={"message": secret}).status_code == 200
        assert http.get("/memory/hank", params={"query": "quartzmoth?"}).status_code == 200
    assert "chat user=hank memory=buffer" in caplog.text and "GET /memory/hank 200" in caplog.text
    assert "quartzmoth" not in caplog.text and "4471" not in caplog.text
    caplog.clear()
    with serve(["buffer"], log_messages=True) as url, client(url) as http:
        assert http.post("/chat/hank", json={"message": secret}).status_code == 200
    assert "quartzmoth" in caplog.text


def test_concurrent_users_keep_apart(serve):
    users = [f"user{n}" for n in range(6)]
    with serve(["buffer"]) as url, client(url) as http:

        def talk(user: str) -> None:
            for i in range(3):
                reply = http.post(f"/chat/{user}", json={"message": f"{user} fact {i}: kw{user}x"})
                assert reply.status_code == 200, reply.text

        with ThreadPoolExecutor(len(users)) as pool:
            list(pool.map(talk, users))
        for user in users:
            context = http.get(f"/memory/{user}").json()["memories"][0]["context"]
            assert all(f"Human: {user} fact {i}: kw{user}x" in context for i in range(3))
            assert not [o for o in users if o != user and f"kw{o}x" in context]


PG_MEMORIES = ["thread:saver=postgres", "store:backend=postgres,search=recent"]


def thread_rows(url: str, thread_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s", (thread_id,)
        ).fetchone()
        return row[0]


def test_postgres_state_survives_a_restart_until_deleted(serve, postgres_url):
    user = f"pg-{uuid.uuid4().hex[:8]}"
    pg = {"postgres": postgres_url}
    thread_id = cell_id(resolve_memories(PG_MEMORIES[:1])[0], user)
    with serve(PG_MEMORIES, resources=pg) as url, client(url) as http:
        for message in ("My sister is called Ingrid.", "I keep bees on the roof."):
            assert http.post(f"/chat/{user}", json={"message": message}).status_code == 200
        before = by_memory(http.get(f"/memory/{user}").json())
    assert thread_rows(postgres_url, thread_id) > 0  # the server stopped; the thread stayed

    with serve(PG_MEMORIES, resources=pg) as url, client(url) as http:  # a new server
        after = by_memory(http.get(f"/memory/{user}").json())
        for label in PG_MEMORIES:
            assert "Ingrid" in after[label]["context"] and "bees" in after[label]["context"]
        assert after["thread:saver=postgres"]["snapshot"]["thread_id"] == thread_id
        assert after["thread:saver=postgres"]["snapshot"]["messages"] == 4
        facts = after[PG_MEMORIES[1]]["snapshot"]["facts"]
        assert facts == before[PG_MEMORIES[1]]["snapshot"]["facts"]
        assert any("Ingrid" in v for v in facts.values())
        # the reply's prompt after the restart holds what was said before it
        turn = by_memory(http.post(f"/chat/{user}", json={"message": "Who is Ingrid?"}).json())
        for label in PG_MEMORIES:
            assert "My sister is called Ingrid." in turn[label]["prompt_context"]
        assert http.delete(f"/memory/{user}").status_code == 200
        assert thread_rows(postgres_url, thread_id) == 0
        gone = by_memory(http.get(f"/memory/{user}").json())
        assert gone[PG_MEMORIES[1]]["snapshot"]["facts"] == {}

    with serve(PG_MEMORIES, resources=pg) as url, client(url) as http:  # and stays deleted
        again = by_memory(http.get(f"/memory/{user}").json())
        for label in PG_MEMORIES:
            assert again[label]["context"] == ""


def test_keep_false_forgets_at_stop(serve, postgres_url):
    user = f"pg-{uuid.uuid4().hex[:8]}"
    spec = "thread:keep=false,saver=postgres"
    with serve([spec], resources={"postgres": postgres_url}) as url, client(url) as http:
        assert http.post(f"/chat/{user}", json={"message": "Note this."}).status_code == 200
        thread_id = http.get(f"/memory/{user}").json()["memories"][0]["snapshot"]["thread_id"]
        assert thread_rows(postgres_url, thread_id) > 0
    assert thread_rows(postgres_url, thread_id) == 0


def test_a_provider_answers_with_the_memory_in_its_prompt(serve, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-serve-0123456789")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    with OpenAIMock() as mock:
        config = RunConfig(
            llm="openai:gpt-4o-mini", base_url=mock.base_url, mode="live", cache=False
        )
        models = RunModels.create(config)
        with serve(["buffer"], models=models) as url, client(url) as http:
            http.post("/chat/kim", json={"message": "My bike is a green Brompton."})
            second = http.post("/chat/kim", json={"message": "What bike do I ride?"}).json()
    turn = second["memories"][0]
    assert second["reply"] == mock.reply
    assert turn["tokens"]["prompt"] == CHAT_USAGE["prompt_tokens"]  # the provider's own count
    chats = [r["body"] for r in mock.requests if r["kind"] == "chat"]
    assert len(chats) == 2
    prompt = json.dumps(chats[-1]["messages"])
    assert "green Brompton" in prompt and "What bike do I ride?" in prompt


def test_cli_refuses_bad_options_in_one_line(capsys):
    from memory_lab.cli import main

    assert main(["serve", "--memory", "nope"]) == 2
    assert "unknown memory 'nope'" in capsys.readouterr().err
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
    assert main(["serve", "--rate", "0"]) == 2
    assert "--rate must be at least 1" in capsys.readouterr().err
    assert main(["serve", "--postgres-pool", "0"]) == 2
    assert "--postgres-pool must be at least 1" in capsys.readouterr().err
    assert main(["serve", "--postgres-wait", "0"]) == 2
    assert "--postgres-wait must be a positive number" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["thread:saver=postgres"])
def test_cli_names_an_unreachable_postgres(spec, capsys, monkeypatch):
    from memory_lab.cli import main

    monkeypatch.delenv("MEMORY_LAB_POSTGRES", raising=False)
    url = "postgresql://nobody:hunter2@127.0.0.1:1/none"
    assert main(["serve", "--memory", spec, "--resource", f"postgres={url}"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach PostgreSQL at 127.0.0.1:1/none" in err and "hunter2" not in err


def test_lone_surrogates_are_refused_before_anything_is_saved(serve):
    headers = {"content-type": "application/json"}
    with serve(["buffer"]) as url, client(url) as http:
        for raw in (
            rb'{"message": "hi \ud800 there"}',  # a lone high surrogate, JSON-escaped
            rb'{"message": "hi \udc00"}',  # a lone low one
            rb'{"message": "hi", "memory": "buffer\ud800"}',  # every text field is checked
        ):
            refused = http.post("/chat/ines", content=raw, headers=headers)
            assert refused.status_code == 422, refused.text
            assert refused.headers["content-type"] == "application/json"
            assert "not well-formed" in refused.json()["error"]
        # nothing was saved: the user's memory, transcript and later chats are as new
        assert by_memory(http.get("/memory/ines").json())["buffer"]["snapshot"]["messages"] == 0
        assert http.get("/dialogue/ines").status_code == 404
        # a well-formed pair (an emoji, escaped) is one character and passes
        pair = http.post("/chat/ines", content=rb'{"message": "hi \ud83d\ude00"}', headers=headers)
        assert pair.status_code == 200, pair.text
        assert "hi \U0001f600" in by_memory(pair.json())["buffer"]["state"]["context"]
        assert http.get("/dialogue/ines").status_code == 200


def test_requests_for_another_host_are_refused(serve):
    """A page on another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own
    name in Host: refused, whatever the route."""
    with serve(["buffer"]) as url, client(url) as http:
        port = url.rsplit(":", 1)[1]
        for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example",
                     "127.0.0.1.nip.io", f"127.0.0.1:{port}@evil.example", ""):  # fmt: skip
            for method, path in (("GET", "/"), ("GET", "/memory/mona"), ("POST", "/chat/mona")):
                refused = http.request(method, path, headers={"Host": host}, json={"message": "hi"})
                assert refused.status_code == 421, (host, path, refused.text)
                assert refused.headers["content-type"] == "application/json"
                assert "127.0.0.1, localhost or [::1]" in refused.json()["error"]
        for host in ("127.0.0.1", f"127.0.0.1:{port}", "localhost", f"LocalHost:{port}",
                     "[::1]", f"[::1]:{port}"):  # fmt: skip
            assert http.get("/memories", headers={"Host": host}).status_code == 200, host
        # the refused requests reached no memory
        assert by_memory(http.get("/memory/mona").json())["buffer"]["snapshot"]["messages"] == 0


def test_a_message_within_max_chars_is_never_refused_for_its_body_size(serve):
    """JSON may escape each astral character as two \\uXXXX escapes: 12 bytes for a character."""
    headers = {"content-type": "application/json"}
    with serve(["buffer"]) as url, client(url) as http:  # --max-message-chars 4000
        for n in (2400, 4000):
            raw = json.dumps({"message": "\U0001f600" * n, "memory": "buffer"}).encode()
            assert len(raw) > 12 * n  # escaped: ensure_ascii
            said = http.post("/chat/nina", content=raw, headers=headers)
            assert said.status_code == 200, said.text
            chunks = iter([raw[:100], raw[100:]])  # chunked: counted as it streams
            assert http.post("/chat/nina", content=chunks, headers=headers).status_code == 200
        raw = json.dumps({"message": "\U0001f600" * 4001}).encode()
        over = http.post("/chat/nina", content=raw, headers=headers)
        assert over.status_code == 413 and "4001 characters" in over.json()["error"]


def test_users_of_different_memories_never_share_a_thread(serve, postgres_url):
    """User ``summarizer-node-bob`` of one memory and ``bob`` of a memory whose label ends
    ``summarizer=node`` once had the same thread id (the Store's ``thread-per-session-bob`` and
    ``bob`` the same namespace too): one saw the other's messages, deleting one wiped the other."""
    bob = f"bob{uuid.uuid4().hex[:6]}"
    pairs = [  # (memory, user) that once shared their state on PostgreSQL
        (("thread:saver=postgres", f"summarizer-node-{bob}"),
         ("thread:saver=postgres,summarizer=node", bob)),
        (("store:backend=postgres,search=recent", f"thread-per-session-{bob}"),
         ("store:backend=postgres,search=recent,thread_per=session", bob)),
    ]  # fmt: skip
    specs = [spec for pair in pairs for spec, _ in pair]
    with serve(specs, resources={"postgres": postgres_url}) as url, client(url) as http:
        for (first, first_user), (second, second_user) in pairs:
            said = {"message": "My locker code is 8841.", "memory": first}
            assert http.post(f"/chat/{first_user}", json=said).status_code == 200
            other = http.get(f"/memory/{second_user}", params={"memory": second}).json()
            held = other["memories"][0]
            assert "8841" not in held["context"], (second, held["context"])
            assert held["snapshot"].get("facts", {}) == {}
            gone = http.delete(f"/memory/{second_user}", params={"memory": second})
            assert gone.status_code == 200
            mine = http.get(f"/memory/{first_user}", params={"memory": first}).json()
            assert "8841" in mine["memories"][0]["context"], first  # not wiped by the other
            gone = http.delete(f"/memory/{first_user}", params={"memory": first})
            assert gone.status_code == 200


def test_dialogue_after_a_restart_comes_from_the_thread(serve, postgres_url):
    """A restarted server has no transcript of its own: the dialogue is what the memory's thread
    on PostgreSQL holds, and new messages follow it."""
    user = f"pg-{uuid.uuid4().hex[:8]}"
    pg = {"postgres": postgres_url}
    said = ["My sister is called Ingrid.", "I keep bees on the roof."]
    with serve(PG_MEMORIES, resources=pg) as url, client(url) as http:
        for message in said:
            assert http.post(f"/chat/{user}", json={"message": message}).status_code == 200

    def users_turns(http, label: str) -> tuple[list[str], int]:
        saved = http.get(f"/dialogue/{user}", params={"memory": label})
        assert saved.status_code == 200, saved.text
        dialogues, problems = parse_documents(list(yaml.safe_load_all(saved.text)), "saved.yaml")
        assert not problems
        turns = dialogues[0].turns
        return [t.text for t in turns if t.role == "user"], len(turns)

    with serve(PG_MEMORIES, resources=pg) as url, client(url) as http:  # a new server
        for label in PG_MEMORIES:
            assert users_turns(http, label) == (said, 4)  # the replies too
        assert http.post(f"/chat/{user}", json={"message": "Who is Ingrid?"}).status_code == 200
        for label in PG_MEMORIES:
            assert users_turns(http, label) == ([*said, "Who is Ingrid?"], 6)
        query = http.get(f"/memory/{user}").json()  # the last message, as before the restart
        assert [m["query"] for m in query["memories"]] == ["Who is Ingrid?"] * 2
        assert http.delete(f"/memory/{user}").status_code == 200
        assert http.get(f"/dialogue/{user}").status_code == 404


@pytest.fixture
def limited_postgres(postgres_url):
    """``limited_postgres(n)``: the URL of a fresh database whose role may hold ``n``
    connections at once (the server refuses more, as one at max_connections does)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    made: list[tuple[str, str]] = []

    def make(connections: int) -> str:
        name = f"pool_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {name} LOGIN CONNECTION LIMIT {connections}")
            conn.execute(f"CREATE DATABASE {name} OWNER {name}")
        made.append((name, name))
        parts = {**conninfo_to_dict(postgres_url), "user": name, "dbname": name}
        return make_conninfo(**parts)

    yield make
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name, _ in made:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"DROP ROLE IF EXISTS {name}")


def test_more_users_than_postgres_connections(serve, limited_postgres):
    """Users share the server's pool: more users than the database allows connections."""
    pg = {"postgres": limited_postgres(6)}
    users = [f"many{n}" for n in range(16)]
    with serve(PG_MEMORIES, resources=pg) as url, client(url) as http:
        for user in users:
            said = http.post(f"/chat/{user}", json={"message": f"My code word is cw{user}x."})
            assert said.status_code == 200, (user, said.text)
        for user in users:
            for view in http.get(f"/memory/{user}").json()["memories"]:
                assert f"cw{user}x" in view["context"]
    # at once, with a pool smaller than the database allows: requests queue for a connection
    limits = Limits(postgres_pool=3)
    with serve(PG_MEMORIES, resources=pg, limits=limits) as url, client(url) as http:

        def talk(user: str) -> int:
            return http.post(f"/chat/{user}", json={"message": "And I like figs."}).status_code

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(talk, users)) == [200] * len(users)


def test_a_busy_postgres_pool_is_a_clean_503(serve, limited_postgres):
    """One request holds the pool's only connection (blocked on a table lock another session
    holds): another user's request waits --postgres-wait, then gets 503 with Retry-After."""
    import threading

    pg_url = limited_postgres(5)
    limits = Limits(postgres_pool=1, postgres_wait=0.5)
    spec = ["thread:saver=postgres"]
    with serve(spec, resources={"postgres": pg_url}, limits=limits) as url, client(url) as http:
        blocked: dict[str, httpx.Response] = {}
        with psycopg.connect(pg_url) as locker:
            locker.execute("LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE")  # a transaction
            first = threading.Thread(
                target=lambda: blocked.setdefault(
                    "r", http.post("/chat/olga", json={"message": "I am first."})
                )
            )
            first.start()
            waiting = 0
            for _ in range(400):  # until olga's request waits on the lock
                row = locker.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                ).fetchone()
                if (waiting := row[0]) > 0:
                    break
                first.join(0.05)
            assert waiting == 1
            busy = http.post("/chat/pavel", json={"message": "Me too."})
            assert busy.status_code == 503, busy.text
            assert busy.headers["content-type"] == "application/json"
            assert busy.headers["retry-after"] == "1"
            assert "pool of 1 connection" in busy.json()["error"]
            assert "busy" in busy.json()["error"]
            locker.commit()  # the lock goes; olga's request finishes
            first.join(60)
        assert blocked["r"].status_code == 200, blocked["r"].text
        assert http.post("/chat/pavel", json={"message": "Me too."}).status_code == 200


@pytest.fixture
def engine_loads(monkeypatch) -> list[tuple[str, tuple]]:
    """The embedding engines loaded from now on, as a fresh process would load them: each
    (loader, args) the first time it is asked for (the process's engines answer; none of this
    test's loads costs more than a cache hit when another test loaded it before)."""
    from functools import lru_cache

    from memory_lab.models import e5_onnx, minilm_onnx

    loads: list[tuple[str, tuple]] = []
    for module, name in ((minilm_onnx, "minilm_onnx"), (e5_onnx, "e5_onnx")):
        engine = getattr(module, name)

        def first_use(*args, engine=engine, name=name):
            loads.append((name, args))
            return engine(*args)

        monkeypatch.setattr(module, name, lru_cache(first_use))
    return loads


def test_serve_warm_up_loads_what_a_users_second_message_needs(engine_loads):
    """A fresh memory's first exchange has no context, so the offline reader answers it without
    its engines: serve's warm-up loads them itself (they loaded on a user's second message)."""
    from memory_lab.serve.chat import Chats, warm_up

    models = RunModels.create(RunConfig(mode="live", cache=False))
    specs = resolve_memories(["buffer"])
    assert warm_up(specs, models) == 1
    warmed = list(engine_loads)
    assert {name for name, _ in warmed} == {"minilm_onnx", "e5_onnx"}
    chats = Chats(specs, models, max_users=1)
    try:
        said = ["My cat is called Tom.", "What is my cat called?", "I live in Lisbon."]
        replies = [chats.chat("ada", message)[0]["reply"] for message in said]
    finally:
        chats.close()
    assert "Tom" in replies[1]  # the reader read the context, with its engines
    assert engine_loads == warmed  # no message of the user loaded one


def test_serve_warm_up_loads_the_engines_when_every_memory_is_on_postgres(engine_loads):
    """No throwaway exchange on PostgreSQL (nothing is written there), yet the engines load."""
    from memory_lab.serve.chat import warm_up

    models = RunModels.create(RunConfig(mode="live", cache=False))
    assert warm_up(resolve_memories(["thread:saver=postgres"]), models) == 0
    assert {name for name, _ in engine_loads} == {"minilm_onnx", "e5_onnx"}
