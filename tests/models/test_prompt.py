"""The answering prompt: LangChain's conversation template by default, ``--answer-style short``
for the field's short-answer protocol; the offline reader reads both."""

from __future__ import annotations

import json

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.errors import ConfigError
from memory_lab.log.config import ANSWER_STYLES, RunConfig
from memory_lab.models.prompt import (
    SHORT_TEMPLATE,
    TEMPLATE,
    TEMPLATES,
    render_prompt,
    split_prompt,
)

from ..conftest import FIXTURES

SHORT_INSTRUCTION = "in the form of a short phrase"


def test_every_style_has_a_template_with_the_shared_markers():
    assert tuple(TEMPLATES) == ANSWER_STYLES
    assert TEMPLATES["conversation"] == TEMPLATE and SHORT_INSTRUCTION in SHORT_TEMPLATE
    for style in ANSWER_STYLES:
        prompt = render_prompt("Human: I live in Busan.", "Where do I live?", style)
        assert split_prompt(prompt) == ("Human: I live in Busan.", "Where do I live?")
    assert render_prompt("x", "y") == render_prompt("x", "y", "conversation")
    with pytest.raises(ConfigError, match="--answer-style must be one of conversation, short"):
        RunConfig(answer_style="terse")


@pytest.fixture(scope="module")
def styled_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("styles")
    dialogues = load_dialogues(FIXTURES / "dialogues" / "mini.yaml")
    memories = resolve_memories(["buffer", "window:k=1"])
    runs = {}
    for style in ANSWER_STYLES:
        outcome = run_benchmark(
            memories, dialogues, folder / style, answer_style=style, progress=False
        )
        assert outcome.failed_cells == 0
        runs[style] = read_results(outcome.path)
    return runs


def test_short_style_is_in_every_probe_prompt_and_in_run_json(styled_runs):
    short, default = styled_runs["short"], styled_runs["conversation"]
    assert len(short.probes) == len(default.probes) > 0
    assert short.probes["prompt"].str.startswith(SHORT_TEMPLATE.split("\n")[0]).all()
    assert not default.probes["prompt"].str.contains(SHORT_INSTRUCTION).any()
    assert (short.probes["prompt"] != default.probes["prompt"]).all()
    user_turns = short.turns[short.turns["prompt"].notna()]
    assert len(user_turns) and user_turns["prompt"].str.contains(SHORT_INSTRUCTION).all()
    info = json.loads((short.path / "run.json").read_text())
    assert info["config"]["protocol"]["answer_style"] == "short" and "answer_style" not in info
    assert info["prompt_template"] == SHORT_TEMPLATE
    plain = json.loads((default.path / "run.json").read_text())
    assert plain["config"]["protocol"]["answer_style"] == "conversation"
    assert plain["prompt_template"] == TEMPLATE


def test_the_offline_reader_answers_with_the_short_style(styled_runs):
    short, default = styled_runs["short"], styled_runs["conversation"]
    assert short.probes["reply"].str.len().gt(0).all()
    # the reader reads memory and question only: the instruction changes no reply or score
    assert (short.probes["reply"] == default.probes["reply"]).all()
    assert (short.probes["correct"] == default.probes["correct"]).all()
