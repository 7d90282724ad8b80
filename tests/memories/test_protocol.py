"""The memory protocol end to end: a new memory in one file, model roles, resources, specs."""

from __future__ import annotations

import json
import sys

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.log.records import without_timings
from memory_lab.memories import (
    MemorySpecError,
    ParamDoc,
    parse_memory_spec,
    register_memory,
    unregister_memory,
)
from memory_lab.memories.registry import spec_from_json
from memory_lab.models.tasks import extract_prompt, parse_json_reply
from memory_lab.results.read import RECORDS_FILE, read_records

from ..conftest import FIXTURES

# A new memory, written as a user would: one file, the session date and the end-of-session hook.
DATED_NOTES = '''\
"""User lines with the date they were said, and a line for every session that ended."""

from memory_lab import Exchange, Item, MemoryResources, Query, Recall, SessionInfo
from memory_lab.memories import register_memory


class DatedNotes:
    def __init__(self, keep: int):
        self.keep, self.notes, self.ended = keep, [], []

    def observe(self, ex: Exchange) -> None:
        if ex.user:
            self.notes.append(Item(f"[{ex.session_date}] Human: {ex.user}", (ex.user_turn_id,)))

    def end_session(self, session: SessionInfo) -> None:
        self.ended.append(Item(f"Session {session.id} of {session.date} ended.", (), "summary"))

    def recall(self, query: Query) -> Recall:
        return Recall(tuple(self.ended + self.notes[-self.keep :]))

    def snapshot(self) -> dict:
        return {"notes": len(self.notes), "sessions_ended": len(self.ended)}

    def close(self) -> None:
        self.notes.clear()


@register_memory("dated_notes", "User lines with their session date.", {"keep": "notes shown"})
def dated_notes(res: MemoryResources, keep: int = 6) -> DatedNotes:
    return DatedNotes(keep)
'''


@pytest.fixture
def dated_notes_module(tmp_path, monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "dated_notes.py").write_text(DATED_NOTES, "utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))  # for --jobs workers
    yield "dated_notes:dated_notes"
    unregister_memory("dated_notes")
    sys.modules.pop("dated_notes", None)


def lines_of(folder):
    """records.jsonl's records as written, timings and its format header left out."""
    rows = [json.loads(x) for x in (folder / RECORDS_FILE).read_text().splitlines() if x.strip()]
    return [without_timings(r) for r in rows if r["type"] != "format"]


def test_a_one_file_memory_runs_with_jobs_and_resumes_from_another_directory(
    dated_notes_module, tmp_path, monkeypatch
):
    assert len(DATED_NOTES.splitlines()) <= 40
    monkeypatch.chdir(FIXTURES)  # the dialogue source is relative to this directory
    out = tmp_path / "run"
    spec = f"{dated_notes_module}:keep=3"
    argv = ["run", "--memory", spec, "buffer", "--dialogues", "dialogues", "--quiet"]
    assert main([*argv, "--jobs", "2", "--out", str(out)]) == 0
    complete = lines_of(out)
    restored = read_records(out)  # prompts as the memory computed them (stored as deltas)
    turns = [r for r in restored if r["type"] == "turn" and r["memory"] == "dated_notes:keep=3"]
    later = [t for t in turns if t["session"] == "s2"][-1]
    assert "Python backend developer" not in later["prompt"]  # keep=3: the oldest notes went
    assert "[2026-03-09] Human: Big news: I moved to Busan" in later["prompt"]
    assert "Session s1 of 2026-03-02 ended." in later["prompt"]
    probes = [r for r in complete if r["type"] == "probe" and r["memory"].startswith("dated")]
    assert probes and all(p["recalled_turns"] for p in probes)  # items carry their turn ids

    # interrupt: the last cell never finished; resume from elsewhere with no memory imported
    kept = [r for r in complete if r["memory"] == "buffer"]
    (out / RECORDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in kept))
    unregister_memory("dated_notes")
    sys.modules.pop("dated_notes", None)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--resume", str(out), "--jobs", "2", "--quiet"]) == 0
    resumed = lines_of(out)
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, resumed)) == sorted(map(key, complete))


def test_resume_uses_recorded_parameters_not_todays_defaults():
    @register_memory("wl", "a window whose default changed", {"k": ParamDoc(min=1)})
    def window_like(res, k: int = 3):  # pragma: no cover - never built here
        return None

    recorded = {"label": "wl", "name": "wl", "params": {"k": 5}, "source": None}
    try:
        assert spec_from_json(recorded).params == {"k": 5}  # not today's default of 3
        with pytest.raises(MemorySpecError, match="must be at least 1"):
            spec_from_json({**recorded, "params": {"k": 0}})
    finally:
        unregister_memory("wl")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("window:k=-1", "'k' must be at least 1, got -1"),
        ("vector:k=0", "'k' must be at least 1, got 0"),
        ("summary_buffer:max_token_limit=0", "must be at least 1"),
        ("window:k=2.5", "must be int"),
        ("nosuch.module:factory", "cannot import 'nosuch.module'"),
    ],
)
def test_bad_parameters_are_rejected_when_the_spec_is_parsed(spec, message, tmp_path, capsys):
    with pytest.raises(MemorySpecError, match=message):
        parse_memory_spec(spec)
    out = tmp_path / "never"
    assert main(["run", "--memory", spec, "--out", str(out), "--quiet"]) == 2
    assert message.split(",")[0].strip("'") in capsys.readouterr().err
    assert not out.exists()  # rejected before a results folder is made


def test_list_float_and_choice_parameters_are_typed():
    from typing import Literal

    @register_memory("tuned", "typed parameters")
    def tuned(res, weights: list[float] = [0.6, 0.4], mode: Literal["a", "b"] = "a"):  # noqa: B006
        return None

    try:
        spec = parse_memory_spec("tuned:weights=0.5+0.5,mode=b")
        assert spec.params == {"weights": [0.5, 0.5], "mode": "b"}
        assert spec.label == "tuned:mode=b,weights=0.5+0.5"
        with pytest.raises(MemorySpecError, match="must be one of a, b"):
            parse_memory_spec("tuned:mode=c")
        with pytest.raises(MemorySpecError, match=r"must be list\[float\]"):
            parse_memory_spec("tuned:weights=x+1")
    finally:
        unregister_memory("tuned")


class Facts:
    """Keeps the facts its ``extractor`` model extracts from every exchange."""

    def __init__(self, res):
        self.model, self.facts = res.model("extractor"), {}
        self.url = res.resource("store")  # read, never written anywhere

    def observe(self, ex):
        reply = self.model.invoke(extract_prompt(f"Human: {ex.user}\nAI: {ex.assistant}"))
        for fact in parse_json_reply(str(reply.content)).get("facts", []):
            self.facts[fact["key"]] = fact["value"]

    def end_session(self, session):
        pass

    def recall(self, query):
        from memory_lab import Item, Recall

        return Recall(tuple(Item(v, (), "fact") for v in self.facts.values()))

    def snapshot(self):
        return dict(self.facts)

    def close(self):
        pass


@pytest.fixture
def facts_memory():
    @register_memory("facts", "facts from an extractor role", roles=("extractor",))
    def facts(res):
        return Facts(res)

    yield "facts"
    unregister_memory("facts")


SECRET_URL = "postgresql://user:pw-0123456789@db.internal:5432/memlab"


def test_a_declared_role_runs_offline_with_its_own_usage(facts_memory, tmp_path):
    outcome = run_benchmark(
        resolve_memories(["facts"]),
        load_dialogues(FIXTURES / "dialogues"),
        tmp_path / "run",
        sources=[str(FIXTURES / "dialogues")],
        resources={"store": SECRET_URL},
        progress=False,
    )
    assert outcome.failed_cells == 0
    r = read_results(outcome.path)
    assert set(r.usage["role"]) == {"extractor"}
    assert (r.usage["model"] == "offline-memory-model").all()
    per_turn = r.usage.groupby("exchange")["input_tokens"].sum()
    assert per_turn.sum() == r.turns["memory_input_tokens"].sum() > 0
    assert any("Busan" in p for p in r.probes["prompt"])  # the extracted fact reached a prompt
    assert r.run["models"]["roles"]["extractor"]["spec"] == "offline"
    assert r.run["resources"] == ["store"]
    every_file = "\n".join(p.read_text() for p in outcome.path.rglob("*") if p.is_file())
    assert SECRET_URL not in every_file and "pw-0123456789" not in every_file


def test_a_declared_role_runs_against_the_provider_mock(facts_memory, tmp_path, monkeypatch):
    from ..models.openai_mock import CHAT_USAGE, OpenAIMock

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    with OpenAIMock() as mock:
        mock.reply = '{"facts": [{"key": "city", "value": "I live in Busan.", "kind": "fact"}]}'
        out = tmp_path / "run"
        code = main(
            ["run", "--memory", "facts", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
            + ["--model", "extractor=openai:gpt-4o-mini", "--base-url", mock.base_url]
            + ["--resource", f"store={SECRET_URL}", "--out", str(out), "--quiet"]
            + ["--no-cache"]
        )
        assert code == 0
        calls = mock.calls("chat")
    r = read_results(out)
    usage = r.usage
    assert calls == len(usage) > 0 and set(usage["role"]) == {"extractor"}
    assert (usage["input_tokens"] == CHAT_USAGE["prompt_tokens"]).all()
    assert (usage["model"] == "openai:gpt-4o-mini").all()
    buffer_turns = r.turns[r.turns["memory"] == "buffer"]
    assert buffer_turns["memory_llm_calls"].sum() == 0  # the other memory called nothing
    assert r.run["config"]["models"]["roles"] == {"extractor": "openai:gpt-4o-mini"}
    assert "I live in Busan." in r.probes[r.probes["memory"] == "facts"]["prompt"].iloc[-1]
    every_file = "\n".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert SECRET_URL not in every_file and "pw-0123456789" not in every_file
