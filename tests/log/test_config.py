"""RunConfig: grouped as run.json holds it, and built from the command line in one place."""

from __future__ import annotations

import dataclasses

import pytest

from memory_lab.cli.parser import build_parser
from memory_lab.errors import ConfigError
from memory_lab.log.config import GROUPS, OPTIONS, RunConfig

NOT_OPTIONS = {"embedding_price_model"}  # resolved from the price model, never given


def test_every_field_is_written_in_one_section_and_reads_back():
    config = RunConfig(llm="openai:gpt-4o", judge="offline", judge_runs=3, jobs=2, device="cuda")
    config = config.replace(rpm=600, tpm={"openai": 90_000})  # written only when set
    data = config.to_json()
    assert list(data) == list(GROUPS)
    keys = [k for section in data.values() for k in section]
    assert len(keys) == len(dataclasses.fields(RunConfig))  # each field once
    assert data["judge"] == {"model": "offline", "prompts": [], "runs": 3, "temperature": 0.0}
    assert data["models"]["llm"] == "openai:gpt-4o" and data["run"]["jobs"] == 2
    assert RunConfig.from_json(data) == config


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"llm": "offline"}, "config has unknown field\\(s\\): llm"),
        ({"models": {"reader": "x"}}, "config.models has unknown field\\(s\\): reader"),
        ({"run": []}, "config.run must be an object, got list"),
    ],
)
def test_a_bad_config_is_refused_naming_the_file_and_the_field(data, message):
    with pytest.raises(ConfigError, match=f"r.json: {message}"):
        RunConfig.from_json(data, "r.json")


def test_the_run_options_build_the_config_field_by_field():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    dests = {a.dest for a in run._actions}
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(OPTIONS) == fields - NOT_OPTIONS
    assert {d for reads, _ in OPTIONS.values() for d in reads} <= dests
    args = build_parser().parse_args(
        ["run", "--llm", "openai:gpt-4o", "--model", "extractor=offline", "--no-cache"]
        + ["--context-limit", "none", "--timestamps", "off", "--judge", "offline"]
        + ["--judge-prompt", "builtin", "--no-prompts", "--jobs", "2"]
    )
    config = RunConfig.from_options(args)
    assert (config.llm, config.roles, config.cache) == (
        "openai:gpt-4o",
        {"extractor": "offline"},
        False,
    )
    assert (config.context_limit, config.timestamps, config.record_prompts) == (None, False, False)
    assert (config.judge_prompts, config.jobs) == (("builtin",), 2)
    defaults = RunConfig.from_options(build_parser().parse_args(["run"]))
    assert defaults == RunConfig()


def test_serve_builds_its_config_from_the_options_it_has():
    args = build_parser().parse_args(["serve", "--llm", "offline", "--request-timeout", "5"])
    config = RunConfig.from_options(args, mode="live", cache=False)
    assert (config.mode, config.cache, config.request_timeout) == ("live", False, 5.0)
    assert config.jobs == 1  # serve has no --jobs: the default


def test_keyword_settings_beside_a_config_change_it_rather_than_being_dropped():
    config = RunConfig(llm="openai:gpt-4o", jobs=2)
    assert RunConfig.given(config, {"jobs": 1}) == RunConfig(llm="openai:gpt-4o")
    assert RunConfig.given(None, {"jobs": 2}) == RunConfig(jobs=2)
    with pytest.raises(TypeError):
        RunConfig.given(config, {"no_such_setting": 1})
