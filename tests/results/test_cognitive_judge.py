"""The Cognitive judge of LoCoMo-Plus: its prompt read (never run) from the user's copy, the
reference's parsing of the judge's output, its 1 / 0.5 / 0 scale and its aggregation."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from memory_lab.benchmarks.locomo_plus.judge import (
    PROMPT_FILE,
    CognitiveJudgeError,
    judge_records,
    label_score,
    load_cognitive_prompt,
    parse_judge_response,
    summarize,
)

from ..dialogue.importers.test_locomo_plus import checkout


def test_the_prompt_is_read_from_the_checkout_without_running_it(tmp_path):
    prompt = load_cognitive_prompt(checkout(tmp_path))  # its first line would raise SystemExit
    text = prompt.format("Ada：I gave up coffee.", "  Have you tried tea?  ")
    assert text.startswith("Two people, A and B, talk. Dates head each session.\n\nDoes the reply")
    assert "Cue:\nAda：I gave up coffee.\nReply:\n  Have you tried tea?  \n" in text  # unstripped
    assert text.endswith('{"label": "correct"|"wrong", "reason": "..."}')  # braces unescaped


def test_a_missing_or_unusable_prompt_is_one_line_naming_file_and_field(tmp_path):
    with pytest.raises(CognitiveJudgeError, match="no such file"):
        load_cognitive_prompt(tmp_path)
    root = checkout(tmp_path)
    file = root / PROMPT_FILE
    file.write_text('CONV_START_PROMPT = "{} {}"\nPROMPT_TEMPLATES = {"default": "x"}\n')
    with pytest.raises(CognitiveJudgeError) as info:
        load_cognitive_prompt(root)
    assert str(file) in str(info.value) and "PROMPT_TEMPLATES['Cognitive']" in str(info.value)
    file.write_text('PROMPT_TEMPLATES = {"Cognitive": "{pred}"}\n')
    with pytest.raises(CognitiveJudgeError, match="CONV_START_PROMPT: not assigned"):
        load_cognitive_prompt(file)
    file.write_text('CONV_START_PROMPT = "{} {}"\nPROMPT_TEMPLATES = {"Cognitive": "{answer}"}\n')
    with pytest.raises(CognitiveJudgeError, match="unusable placeholder"):
        load_cognitive_prompt(root)
    file.write_text("PROMPT_TEMPLATES = {")
    with pytest.raises(CognitiveJudgeError, match="prompt.py: line 1: not readable Python"):
        load_cognitive_prompt(root)
    for error in (info.value,):
        assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("raw", "label", "score"),
    [
        ('{"label": "correct", "reason": "links the cue"}', "correct", 1.0),
        ('Sure.\n```json\n{"label": "Partial", "reason": "vague"}\n```', "Partial", 0.5),
        ('{"reason": "no link", "label": "wrong"}', "wrong", 0.0),  # JSON, reason first
        ("The prediction is incorrect.", "correct", 1.0),  # the reference's keyword order
        ("It is partially right.", "partial", 0.5),
        ('{"label": "wrong", "reason": 3}', "wrong", 0.0),  # JSON, then the keyword fallback
        ('{"label": "maybe", "reason": 3}', "maybe", 0.0),  # no keyword: the JSON label stays
        ("(empty)", "", 0.0),
    ],
)
def test_judge_output_is_read_as_the_reference_reads_it(raw, label, score):
    assert parse_judge_response(raw)[0] == label
    assert label_score(label) == score


def test_aggregation_is_the_references_with_its_rounding():
    summary = summarize([("Cognitive", 1.0), ("Cognitive", 0.5), ("Cognitive", 0.0)])
    assert summary == {
        "total_score": 1.5,
        "total_samples": 3,
        "max_possible": 3,
        "overall_avg": 0.5,
        "by_category": {"Cognitive": {"score": 1.5, "count": 3, "avg": 0.5}},
    }
    assert summarize([("Cognitive", 1.0)] * 2 + [("Cognitive", 0.0)])["overall_avg"] == 0.6667
    assert summarize([])["overall_avg"] == 0.0


def test_a_runs_cognitive_probes_are_judged_against_their_cue(tmp_path):
    prompt = load_cognitive_prompt(checkout(tmp_path))
    records = [
        {"type": "turn", "dialogue": "d0"},
        {
            "type": "probe",
            "dialogue": "d1",
            "memory": "buffer",
            "probe_id": "trigger",
            "category": "cognitive",
            "reply": "Maybe skip coffee then?",
            "probe_metadata": {"judge_evidence": "Ada：I gave up coffee."},
        },
        {"type": "probe", "dialogue": "d2", "category": "single-hop", "reply": "x"},
    ]
    model = FakeListChatModel(responses=['{"label": "correct", "reason": "coffee"}'])
    (verdict,) = judge_records(records, model, prompt)
    assert (verdict["dialogue"], verdict["judge_label"], verdict["judge_score"]) == (
        "d1",
        "correct",
        1.0,
    )
    records[1]["probe_metadata"] = {}
    with pytest.raises(CognitiveJudgeError, match="judge_evidence"):
        judge_records(records, model, prompt)


def cognitive_run(tmp_path, limit):
    """A Locomo-Plus checkout, an offline run (``window``) over its first ``limit`` samples, and
    ``score locomo-plus``'s arguments for it (``--out tmp_path/judged.json``; no judge yet)."""
    from memory_lab.cli import main

    root = checkout(tmp_path)
    run = tmp_path / "run"
    source = f"locomo-plus:{root}#limit={limit},host=cycle"
    args = ["run", "--dialogues", source, "--memory", "window", "--out", str(run), "--quiet"]
    assert main(args) == 0
    out = tmp_path / "judged.json"
    return root, run, ["score", "locomo-plus", str(run), "--prompts", str(root), "--out", str(out)]


def test_judge_cognitive_scores_a_run_through_a_provider(tmp_path, capsys, monkeypatch):
    import json

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cognitive")

    from memory_lab.cli import main

    from ..models.openai_mock import OpenAIMock

    root, run, argv = cognitive_run(tmp_path, 2)
    out = tmp_path / "judged.json"
    assert main([*argv, "--judge", "offline"]) == 2
    assert "needs PROVIDER:MODEL" in capsys.readouterr().err
    with OpenAIMock() as mock:
        mock.reply = lambda body: (
            '{"label": "partial", "reason": "r"}'
            if "Ada：" in body["messages"][-1]["content"]
            else "wrong"
        )
        code = main([*argv, "--judge", "openai:gpt-4o-mini", "--base-url", mock.base_url])
        sent = [r["body"] for r in mock.requests]
    assert code == 0
    assert [b["temperature"] for b in sent] == [0.0, 0.0]
    assert sent[0].get("max_completion_tokens", sent[0].get("max_tokens")) == 512  # the reference's
    assert sent[0]["messages"][-1]["content"].startswith("Two people, A and B, talk.")
    document = json.loads(out.read_text("utf-8"))
    assert [j["judge_score"] for j in document["judged"]] == [0.5, 0.0]  # conv-1 (Ada), conv-2
    assert document["summaries"]["window"]["overall_avg"] == 0.25
    assert "window: Cognitive score 0.25 over 2 probe(s)" in capsys.readouterr().out


def test_a_second_judge_cognitive_sends_no_request_and_names_its_judge(
    tmp_path, capsys, monkeypatch
):
    import hashlib
    import json

    from memory_lab.cli import main

    from ..models.openai_mock import CHAT_USAGE, OpenAIMock

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cognitive")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    root, run, argv = cognitive_run(tmp_path, 3)
    out = tmp_path / "judged.json"
    sent, documents = [], []
    with OpenAIMock() as mock:
        mock.reply = '{"label": "correct", "reason": "r"}'
        for _ in range(2):
            before = mock.calls("chat")
            assert main([*argv, "--judge", "openai:gpt-4o-mini", "--base-url", mock.base_url]) == 0
            sent.append(mock.calls("chat") - before)
            documents.append(json.loads(out.read_text("utf-8")))
    assert sent == [3, 0]  # the second invocation: every verdict from the run's call cache
    first, again = (d["judge"] for d in documents)
    prompt = load_cognitive_prompt(root)
    texts = {
        "PROMPT_TEMPLATES['Cognitive']": prompt.template,
        "CONV_START_PROMPT": prompt.conv_start,
    }
    sha = hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()
    assert first["judge"] == "openai:gpt-4o-mini" and first["prompt_sha256"] == {"cognitive": sha}
    assert (first["calls"], first["cache_hits"], first["requests"]) == (3, 0, 3)
    assert (again["calls"], again["cache_hits"], again["requests"]) == (3, 3, 0)
    assert again["input_tokens"] == 3 * CHAT_USAGE["prompt_tokens"]
    assert again["output_tokens"] == 3 * CHAT_USAGE["completion_tokens"]
    assert again["est_cost_usd"] == pytest.approx(3 * (111 * 0.15 + 7 * 0.60) / 1e6)
    assert [j["judge_cache_hit"] for j in documents[1]["judged"]] == [True] * 3
    assert documents[0]["summaries"] == documents[1]["summaries"]
    assert "3 from the call cache, 0 sent" in capsys.readouterr().out
    from memory_lab.results.judge_costs import judge_costs

    (cost,) = judge_costs(run)  # the same account, in the results folder
    assert (cost.scorer, cost.calls, cost.cache_hits) == ("judge-cognitive", 3, 3)
    assert cost.prompt_sha256 == {"cognitive": sha}
