"""BEAM's prompts read from a user's copy: the value Python would keep (the last assignment),
a one-line refusal for any prompt that is not plain text (never an empty prompt sent silently),
bounded parsing, and an unreachable judge as one line."""

from __future__ import annotations

import socket

import pytest

from memory_lab.benchmarks.beam.grading import LLMBeamGrader
from memory_lab.benchmarks.beam.judge import BeamPromptError, load_beam_prompts
from memory_lab.errors import BadInput, ProviderFailure

from .test_beam_scores import JUDGE, METRICS, beam_copy_files


def _copy(tmp_path, prompts=None, metrics=None):
    root = beam_copy_files(tmp_path / "BEAM")
    if prompts is not None:
        (root / "src" / "prompts.py").write_text(prompts, "utf-8")
    if metrics is not None:
        (root / "src" / "evaluation" / "compute_metrics.py").write_text(metrics, "utf-8")
    return root


def _refusal(root, *needles):
    with pytest.raises(BeamPromptError) as caught:
        load_beam_prompts(root)
    text = str(caught.value)
    assert "\n" not in text and isinstance(caught.value, BadInput)
    for needle in needles:
        assert needle in text, text
    return text


def test_the_prompt_is_the_last_assignment_as_python_keeps_it(tmp_path):
    root = _copy(
        tmp_path,
        prompts=(
            "unified_llm_judge_base_prompt = 'an early draft'\n"
            f"unified_llm_judge_base_prompt = (\n    {JUDGE[:20]!r}\n    {JUDGE[20:]!r}\n)\n"
        ),
    )
    assert load_beam_prompts(root).judge == JUDGE  # implicit concatenation is a literal
    (root / "src" / "prompts.py").write_text(
        f"other = 'x'\nunified_llm_judge_base_prompt = {JUDGE!r}\nunified_llm_judge_base_prompt"
        " = other\n"
    )
    _refusal(root, "prompts.py: line 3: unified_llm_judge_base_prompt: ", "a variable")


def test_a_second_llm_equivalence_replaces_the_first(tmp_path):
    later = METRICS.replace("Same thing? YES or NO.", "Equivalent? Say YES or NO.")
    root = _copy(tmp_path, metrics=METRICS + later)
    assert load_beam_prompts(root).equivalence_system == "Equivalent? Say YES or NO."


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ('f"A: {first_paragraph.strip()} B: {second_paragraph}"', "first_paragraph.strip()"),
        ("USER_TEMPLATE", "a variable"),
        ('f"A: {first_paragraph!r} B: {second_paragraph}"', "first_paragraph"),
        ('"A: " + first_paragraph', "an expression"),
    ],
)
def test_an_equivalence_prompt_that_is_not_text_is_refused_never_sent_empty(
    tmp_path, content, kind
):
    metrics = METRICS.replace('f"""A: {first_paragraph} \\n B: {second_paragraph}"""', content)
    assert metrics != METRICS
    root = _copy(tmp_path, metrics=metrics)
    _refusal(root, "compute_metrics.py: line 4: user_msg['content']: ", kind)


def test_an_f_string_judge_prompt_is_refused(tmp_path):
    root = _copy(tmp_path, prompts="unified_llm_judge_base_prompt = f'{open(\"x\").read()}'\n")
    _refusal(root, "line 1: unified_llm_judge_base_prompt: ", "f-string")


@pytest.mark.parametrize(
    "source",
    [
        "y = " + "+".join(["1"] * 60_000) + "\n",  # RecursionError in the parser
        "y = " + "-" * 100_000 + "1\n",  # MemoryError in the parser
        "y = [" + "1," * 300_000 + "]\n",  # a token flood: gigabytes of nodes at 8 MB
    ],
)
def test_a_pathological_prompts_file_is_refused_in_one_line(tmp_path, source):
    root = _copy(tmp_path, prompts=f"unified_llm_judge_base_prompt = {JUDGE!r}\n{source}")
    _refusal(root, "prompts.py: ")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_judge_is_one_line_naming_model_and_url(tmp_path, monkeypatch):
    from memory_lab.models.providers import provider_chat_model

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = provider_chat_model("openai:judge-x", base_url=url, max_retries=0, timeout=5)
    grader = LLMBeamGrader(model, load_beam_prompts(_copy(tmp_path)))
    for call in (
        lambda: grader.grade("p", "i", "r", "abstention"),
        lambda: grader.equivalent("a", "b"),
    ):
        with pytest.raises(ProviderFailure) as caught:
            call()
        text = str(caught.value)
        assert "\n" not in text and "judge-x" in text and url in text, text
