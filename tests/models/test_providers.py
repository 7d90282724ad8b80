"""Real providers through LangChain, against a loopback OpenAI mock (the real client code runs)."""

from __future__ import annotations

import json
import sys

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.models import ProviderError, resolve_chat_model
from memory_lab.models.providers import provider_chat_model

from ..conftest import FIXTURES
from .openai_mock import CHAT_USAGE, OpenAIMock

SECRET = "sk-test-memorylab-SECRET-0123456789"


@pytest.fixture
def mock(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "2")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIMock() as server:
        yield server


def run(tmp_path, mock, memories, **kw):
    return run_benchmark(
        resolve_memories(memories),
        load_dialogues(FIXTURES / "dialogues"),
        tmp_path / "run",
        base_url=mock.base_url,
        progress=False,
        **kw,
    )


def every_file_text(folder):
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_memory_llm_usage_reported_by_the_provider_reaches_the_records(tmp_path, mock):
    outcome = run(tmp_path, mock, ["summary"], memory_llm="openai:gpt-4o-mini")
    assert outcome.failed_cells == 0
    turns = read_results(outcome.path).turns
    calls = mock.calls("chat")
    assert calls == len(turns) == turns["memory_llm_calls"].sum()
    assert (turns["memory_input_tokens"] == CHAT_USAGE["prompt_tokens"]).all()
    assert (turns["memory_output_tokens"] == CHAT_USAGE["completion_tokens"]).all()
    sent = mock.requests[0]
    assert sent["body"]["model"] == "gpt-4o-mini" and sent["body"]["temperature"] == 0
    assert sent["headers"]["authorization"] == f"Bearer {SECRET}"  # the key was used ...
    assert SECRET not in every_file_text(outcome.path)  # ... and written nowhere


def test_answering_model_usage_sits_beside_our_token_count(tmp_path, mock):
    mock.reply = "You build services with FastAPI."
    outcome = run(tmp_path, mock, ["buffer"], llm="openai:gpt-4o-mini")
    probes = read_results(outcome.path).probes
    assert (probes["usage_source"] == "provider").all()
    assert (probes["prompt_tokens"] == CHAT_USAGE["prompt_tokens"]).all()
    assert (probes["prompt_tokens_counted"] > 0).all()
    assert probes.set_index("probe_id").loc["q-framework", "correct"]
    info = json.loads((outcome.path / "run.json").read_text())
    assert info["models"]["llm_model"] == "openai:gpt-4o-mini"
    assert info["pricing"]["llm_model"] == "gpt-4o-mini"


def test_provider_embeddings_power_the_vector_memory(tmp_path, mock):
    outcome = run(tmp_path, mock, ["vector:k=2"], embeddings="openai:text-embedding-3-small")
    assert outcome.failed_cells == 0
    assert mock.calls("embeddings") > 0
    turns = read_results(outcome.path).turns
    assert (turns["embedding_tokens"] > 0).all()
    assert SECRET not in every_file_text(outcome.path)


def test_429_then_success_is_retried(tmp_path, mock):
    mock.scripts["chat"].append(
        (429, '{"error": {"message": "slow down"}}', {"retry-after-ms": "10"})
    )
    outcome = run(tmp_path, mock, ["summary"], memory_llm="openai:gpt-4o-mini")
    assert outcome.failed_cells == 0
    turns = read_results(outcome.path).turns
    assert mock.calls("chat") == len(turns) + 1  # one retry, then every call succeeded


def test_persistent_500_fails_the_cell_and_the_run_finishes(tmp_path, mock, capsys):
    mock.always["chat"] = (500, '{"error": {"message": "boom"}}', {"retry-after-ms": "10"})
    args = ["run", "--memory", "summary", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    args += ["--memory-llm", "openai:gpt-4o-mini", "--base-url", mock.base_url]
    code = main([*args, "--out", str(tmp_path / "r"), "--quiet"])
    assert code == 1  # some cells failed
    results = read_results(tmp_path / "r")
    cells = results.cells.set_index("memory")
    assert cells.loc["summary", "status"] == "failed" and "500" in cells.loc["summary", "error"]
    assert cells.loc["buffer", "status"] == "ok"  # the rest of the run completed
    assert mock.calls("chat") == 3  # first try + MEMORY_LAB_MAX_RETRIES=2
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "failed"


def test_malformed_response_is_a_clear_cell_error(tmp_path, mock):
    mock.always["chat"] = (200, "this is not json", {})
    outcome = run(tmp_path, mock, ["summary"], memory_llm="openai:gpt-4o-mini")
    assert outcome.failed_cells == 1
    error = read_results(outcome.path).cells["error"].iloc[0]
    assert error and len(error.splitlines()) == 1


def test_token_counting_never_raises_for_unknown_model_names(mock):
    from langchain_core.messages import HumanMessage

    llm = provider_chat_model("openai:my-local-llama", base_url=mock.base_url)
    assert llm.get_num_tokens_from_messages([HumanMessage("hello world")]) > 0
    assert llm.get_num_tokens("hello world") == 2


def test_missing_package_or_key_is_one_line(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProviderError, match="set OPENAI_API_KEY"):
        resolve_chat_model("openai:gpt-4o-mini", "reader")
    # langchain-anthropic may be installed (langmem needs it): make it missing for this check
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)
    with pytest.raises(ProviderError, match="pip install langchain-anthropic"):
        resolve_chat_model("anthropic:claude-x", "reader")
    with pytest.raises(ProviderError, match="unknown provider"):
        resolve_chat_model("acme:model", "reader")


def test_a_provider_judge_is_recorded_beside_string_matching(tmp_path, mock):
    mock.reply = "WRONG"
    outcome = run(tmp_path, mock, ["buffer"], judge="openai:gpt-4o-mini")
    probes = read_results(outcome.path).probes
    assert mock.calls("chat") == len(probes)  # one judge call per probe, nothing else
    assert (probes["judge_correct"] == False).all()  # noqa: E712 - a Series comparison
    assert (probes["judge_input_tokens"] == CHAT_USAGE["prompt_tokens"]).all()
    answerable = probes[probes["category"] != "abstention"]  # the probes recall is over
    assert outcome.summary.loc[0, "disagreement_rate"] == answerable["correct"].mean()
    asked = mock.requests[0]["body"]["messages"][0]["content"]
    assert "CORRECT or WRONG" in asked and probes["question"].iloc[0] in asked
    assert SECRET not in every_file_text(outcome.path)


def test_a_repeated_run_is_served_from_the_cache_with_the_original_usage(tmp_path, mock):
    common = {
        "memory_llm": "openai:gpt-4o-mini",
        "judge": "openai:gpt-4o-mini",
        "embeddings": "openai:text-embedding-3-small",
        "cache": tmp_path / "cache",
    }
    memories = resolve_memories(["summary", "vector:k=2"])
    dialogues = load_dialogues(FIXTURES / "dialogues")
    first = run_benchmark(
        memories, dialogues, tmp_path / "a", base_url=mock.base_url, progress=False, **common
    )
    calls = len(mock.requests)
    assert calls > 0 and first.failed_cells == 0
    second = run_benchmark(
        memories, dialogues, tmp_path / "b", base_url=mock.base_url, progress=False, **common
    )
    assert len(mock.requests) == calls  # zero provider calls the second time
    a, b = read_results(first.path), read_results(second.path)
    assert not a.turns["memory_cache_hits"].any()
    # within one run, only a repeated (question, reply) pair is a judge cache hit
    repeated = a.probes.duplicated(["question", "reply"])
    assert (a.probes["judge_cache_hit"] == repeated).all()
    summary_turns = b.turns[b.turns["memory"] == "summary"]
    assert (summary_turns["memory_cache_hits"] == summary_turns["memory_llm_calls"]).all()
    assert b.probes["judge_cache_hit"].all()
    assert (b.turns["memory_input_tokens"] == a.turns["memory_input_tokens"]).all()
    assert SECRET not in every_file_text(tmp_path / "cache")
    third = run_benchmark(
        memories,
        dialogues,
        tmp_path / "c",
        base_url=mock.base_url,
        progress=False,
        **{**common, "cache": False},
    )
    assert third.failed_cells == 0 and len(mock.requests) > calls  # --no-cache calls again


def test_a_closed_provider_port_fails_once_before_the_run(tmp_path, monkeypatch, capsys):
    import socket

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "run"
    code = main(
        ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
        + ["--llm", "openai:gpt-4o-mini", "--base-url", f"http://127.0.0.1:{port}/v1"]
        + ["--out", str(out), "--quiet"]
    )
    assert code == 2 and "cannot reach the provider" in capsys.readouterr().err
    assert not out.exists()


def test_a_provider_that_never_answers_times_out(tmp_path, monkeypatch):
    import socket
    import threading

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list = []
    stop = threading.Event()

    def accept_and_hold():  # accepts connections and never answers (bounded by the test)
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_hold, daemon=True)
    thread.start()
    try:
        out = tmp_path / "run"
        code = main(
            ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
            + ["--llm", "openai:gpt-4o-mini", "--request-timeout", "1", "--no-cache"]
            + ["--base-url", f"http://127.0.0.1:{server.getsockname()[1]}/v1"]
            + ["--out", str(out), "--quiet"]
        )
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
    assert code == 1  # the cell failed with a timeout and was recorded
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "failed" and info["config"]["limits"]["request_timeout"] == 1.0
    assert "timed out" in info["errors"][0]["traceback"].lower()


RACE = """
import json, sys, threading, warnings
warnings.simplefilter("ignore")
from memory_lab.models.providers import provider_chat_model, provider_embeddings
url, errors, start = sys.argv[1], [], threading.Barrier(12)
assert "langchain_openai" not in sys.modules and "openai" not in sys.modules

def work(i):
    try:
        start.wait()
        if i % 2:
            provider_chat_model("openai:gpt-4o-mini", base_url=url).invoke("hi")
        else:
            provider_embeddings("openai:text-embedding-3-small", base_url=url).embed_query("x")
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(errors))
"""


def test_threads_building_clients_at_once_in_a_fresh_interpreter_all_succeed(mock):
    """12 threads build and call clients while nothing of the provider is imported yet."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", RACE, mock.base_url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert mock.calls("chat") == 6 and mock.calls("embeddings") == 6


def test_prepare_clients_imports_the_provider_stack_in_the_calling_thread(mock):
    import subprocess

    script = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "from memory_lab.models.providers import prepare_clients\n"
        "assert 'langchain_openai' not in sys.modules\n"
        "prepare_clients(['openai:gpt-4o-mini', 'anthropic:nope', 'acme:x'], sys.argv[1])\n"
        "print(sorted(m for m in ('openai', 'langchain_openai.chat_models',"
        " 'langchain_openai.embeddings', 'langchain_core.tracers.langchain')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, mock.base_url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]  # unservable specs are left to their cells
    assert done.stdout.split("\n")[-2] == str(
        ["langchain_core.tracers.langchain", "langchain_openai.chat_models"]
        + ["langchain_openai.embeddings", "openai"]
    )
    assert mock.requests == []  # no request made


@pytest.mark.parametrize("key", ["", "  "])
def test_an_empty_key_without_a_base_url_is_a_one_line_error(tmp_path, monkeypatch, capsys, key):
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "run"
    code = main(
        ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
        + ["--llm", "openai:gpt-4o-mini", "--out", str(out), "--quiet"]
    )
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.strip().splitlines() == [
        "memory-lab: error: provider 'openai' needs an API key: set OPENAI_API_KEY (it is empty)"
    ]


@pytest.mark.parametrize("key", [None, "", "  "])
def test_a_base_url_runs_keyless_when_the_key_is_unset_or_empty(tmp_path, monkeypatch, key):
    """OpenAI-compatible local servers often need no key: the run goes on without one."""
    with OpenAIMock() as server:
        if key is None:
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        else:
            monkeypatch.setenv("OPENAI_API_KEY", key)
        out = tmp_path / "run"
        code = main(
            ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
            + ["--llm", "openai:gpt-4o-mini", "--base-url", server.base_url, "--no-cache"]
            + ["--out", str(out), "--quiet"]
        )
        assert code == 0 and server.calls("chat") > 0
        assert {r["headers"]["authorization"] for r in server.requests} == {"Bearer not-needed"}


def test_building_a_provider_model_prints_no_deprecation_warning():
    """Every real-model run printed LangChain's deprecation of langchain-classic's
    ``init_chat_model``: the model is built with langchain's own."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        provider_chat_model("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert [str(w.message) for w in caught if "deprecated" in str(w.message)] == []
