"""The Cognitive prompt read from a Locomo-Plus checkout: the value Python would keep, plain text
only, bounded format widths and parsing, and an unreachable judge as one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memory_lab.benchmarks.locomo_plus.judge import (
    PROMPT_FILE,
    CognitiveJudgeError,
    judge_cognitive,
    load_cognitive_prompt,
)
from memory_lab.errors import BadInput, ProviderFailure

from ..dialogue.importers.test_locomo_plus import PROMPT_PY, checkout
from .test_beam_prompt_reader import _closed_port

REPO = Path(__file__).resolve().parents[2]


def _refusal(path, *needles):
    with pytest.raises(CognitiveJudgeError) as caught:
        load_cognitive_prompt(path)
    text = str(caught.value)
    assert "\n" not in text and isinstance(caught.value, BadInput), text
    for needle in needles:
        assert needle in text, text
    return text


def test_the_last_assignment_wins_as_in_python(tmp_path):
    root = checkout(tmp_path)
    file = root / PROMPT_FILE
    file.write_text(PROMPT_PY + 'CONV_START_PROMPT = "Later: {} and {}. "\n', "utf-8")
    assert load_cognitive_prompt(root).format("e", "r").startswith("Later: A and B. Does")
    file.write_text(PROMPT_PY + 'PROMPT_TEMPLATES = {"Cognitive": "cue {evidence} / {pred}"}\n')
    assert load_cognitive_prompt(root).template == "cue {evidence} / {pred}"
    file.write_text(PROMPT_PY + "CONV_START_PROMPT = PREFIX\n")
    _refusal(root, str(file), "line 17: CONV_START_PROMPT: ", "a variable")


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        ('f"{evidence}"', "f-string"),
        ('"{pred}" + "x"', "an expression"),
        ('"{evidence:{pred}}"', "inside a format spec"),
        ('"{pred:>20000}"', "20000"),
    ],
)
def test_a_template_that_is_not_plain_bounded_text_is_refused(tmp_path, template, needle):
    root = checkout(tmp_path)
    (root / PROMPT_FILE).write_text(
        f'CONV_START_PROMPT = "{{}} {{}}"\nPROMPT_TEMPLATES = {{"Cognitive": {template}}}\n'
    )
    _refusal(root, "line 2: PROMPT_TEMPLATES['Cognitive']: ", needle)


def test_a_huge_format_width_is_refused_before_anything_is_allocated(tmp_path):
    """{pred:>3000000000} would build a 3 GB string at load: refused, under a 1 GiB cap on the
    process's extra memory (a child process, so an allocation cannot hurt the test run)."""
    root = checkout(tmp_path)
    (root / PROMPT_FILE).write_text(
        'CONV_START_PROMPT = "{} {}"\nPROMPT_TEMPLATES = {"Cognitive": "{pred:>3000000000}"}\n'
    )
    script = (
        "import resource, sys\n"
        "from memory_lab.benchmarks.locomo_plus.judge import load_cognitive_prompt\n"
        "used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (used + 2**30, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    load_cognitive_prompt(sys.argv[1])\n"
        "except BaseException as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.stdout.startswith("CognitiveJudgeError "), done.stdout + done.stderr
    assert "3000000000" in done.stdout and "10,000" in done.stdout


@pytest.mark.parametrize(
    "tail",
    [
        "y = " + "+".join(["1"] * 60_000),
        "y = " + "-" * 100_000 + "1",
        "y = [" + "1," * 300_000 + "]",
    ],
)
def test_a_pathological_prompt_file_is_refused_in_one_line(tmp_path, tail):
    root = checkout(tmp_path)
    (root / PROMPT_FILE).write_text(PROMPT_PY + tail + "\n")
    _refusal(root, str(root / PROMPT_FILE))


def test_an_unreachable_judge_is_one_line_naming_model_and_url(tmp_path, monkeypatch):
    from memory_lab.models.providers import provider_chat_model

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = provider_chat_model("openai:cog-judge", base_url=url, max_retries=0, timeout=5)
    prompt = load_cognitive_prompt(checkout(tmp_path))
    with pytest.raises(ProviderFailure) as caught:
        judge_cognitive(model, prompt, "cue", "reply")
    text = str(caught.value)
    assert "\n" not in text and "cog-judge" in text and url in text, text


def test_judge_cognitive_with_an_unreachable_judge_exits_4_in_one_line(
    tmp_path, capsys, monkeypatch
):
    from memory_lab.cli import main

    from .test_cognitive_judge import cognitive_run

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    _, _, argv = cognitive_run(tmp_path, 1)
    capsys.readouterr()
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    assert main([*argv, "--judge", "openai:cog-judge", "--base-url", url]) == 4
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("memory-lab: error: judge cog-judge at ") and url in line, line
