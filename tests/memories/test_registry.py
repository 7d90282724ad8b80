"""The memory registry: specs, parameters, errors, and custom memories through the same runner."""

from __future__ import annotations

import pytest

from memory_lab import TextMemory, register_memory, replay_dialogue
from memory_lab.cli import main
from memory_lab.memories import (
    MemorySpecError,
    memory_factories,
    parse_memory_spec,
    unregister_memory,
)


def test_the_five_classic_memories_are_registered_with_typed_defaults():
    factories = memory_factories()
    assert list(factories)[:5] == ["buffer", "window", "summary", "summary_buffer", "vector"]
    assert factories["window"].defaults() == {"k": 5}
    assert factories["summary_buffer"].params[0].type is int


def test_spec_parsing_converts_types_and_labels_explicit_params():
    spec = parse_memory_spec("window:k=4")
    assert spec.params == {"k": 4} and spec.label == "window:k=4"
    assert parse_memory_spec("window").label == "window"
    assert parse_memory_spec("summary_buffer:max_token_limit=300").params["max_token_limit"] == 300


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("windw", "unknown memory 'windw'"),
        ("window:size=3", "has no parameter 'size'"),
        ("window:k=many", "must be int"),
        ("window:k", "expected key=value"),
        ("window:k=2,k=7", "parameter 'k' is given twice"),
        ("vector:k=99999999999999999999", "must be between -2,147,483,647 and 2,147,483,647"),
        ("hybrid:dense_weight=nan", "must be a finite number, got 'nan'"),
        ("hybrid:dense_weight=inf", "must be a finite number, got 'inf'"),
        ("hybrid:dense_weight=-1e400", "must be a finite number"),
    ],
)
def test_bad_specs_give_clear_errors(spec, message):
    with pytest.raises(MemorySpecError, match=message):
        parse_memory_spec(spec)


def test_list_command_shows_every_memory_with_parameters(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("buffer", "window", "summary", "summary_buffer", "vector"):
        assert name in out
    assert "k: int = 5" in out and "max_token_limit: int = 600" in out


def test_factories_must_declare_typed_defaulted_parameters():
    with pytest.raises(TypeError, match="annotation and a default"):

        @register_memory("broken_memory", "no defaults")
        def broken(ctx, size):  # pragma: no cover - never called
            return None


def test_a_custom_memory_runs_through_the_unchanged_runner(mini_dialogue, run_models):
    class LastUserLine(TextMemory):
        last: str = ""

        def context(self, query: str) -> str:
            return f"Human: {self.last}" if self.last else ""

        def remember(self, user: str, assistant: str) -> None:
            self.last = user

    @register_memory("last_user_line", "remembers only the last user line")
    def last_user_line(ctx) -> LastUserLine:
        return LastUserLine()

    try:
        records: list[dict] = []
        replay_dialogue(
            parse_memory_spec("last_user_line"), mini_dialogue, run_models, records.append
        )
        turns = [r for r in records if r["type"] == "turn"]
        assert turns[1]["prompt"].count("Human:") == 2  # its one line plus the input
        assert "Hi! I'm Jisoo" in turns[1]["prompt"]
        assert {r["memory"] for r in records} == {"last_user_line"}
    finally:
        unregister_memory("last_user_line")


def test_a_memorys_preflight_fails_the_run_before_a_results_folder(tmp_path, capsys, monkeypatch):
    """``preflight`` sees the parameters and the run's resources; its error is one line, exit 2."""
    seen = []

    def check(params, resource):
        seen.append((params, resource("queue")))
        raise ValueError(f"queue at {resource('queue')} is closed for size={params['size']}")

    @register_memory("queued", "needs a queue", preflight=check)
    def queued(res, size: int = 3):  # pragma: no cover - never built
        return None

    monkeypatch.setenv("MEMORY_LAB_QUEUE", "q-7")
    try:
        out = tmp_path / "never"
        assert main(["run", "--memory", "queued:size=5", "--out", str(out), "--quiet"]) == 2
    finally:
        unregister_memory("queued")
    assert seen == [({"size": 5}, "q-7")]
    assert "queue at q-7 is closed for size=5" in capsys.readouterr().err
    assert not out.exists()


def test_a_module_attribute_that_is_no_memory_factory_is_bad_input():
    """``--memory os.path:join`` had ended in a TypeError traceback (exit 70)."""
    with pytest.raises(MemorySpecError, match="'join' is not a memory factory"):
        parse_memory_spec("os.path:join")
