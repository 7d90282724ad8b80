"""RealMem's LLM metrics: the judge prompts read (never run) from a checkout's
``eval/compute_llm_metrics_for_realmem.py``, filled and read as that script does, aggregated as it
does, through the judge core (the run's call cache, the judge's account). The prompt file here is
written for these tests in the same shape as the authors' (its own short text)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from memory_lab.benchmarks.realmem.judge import (
    ACCOUNT,
    LLM_SCORES_FILE,
    SCRIPT,
    VERDICTS_FILE,
    RealMemJudgeError,
    extract_json,
    ground_truth,
    load_prompts,
    session_chunks,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "realmem"
ADA_Q1 = "I finished the first week of the running plan. What comes next?"
ADA_Q2 = "Can you remind me how often I run now, and suggest a breakfast?"
ADA_Q3 = "Did I mention new shoes?"
ADA_Q4 = "Plan my race week around savoury breakfasts and my knee."
BO_Q = "Which shrine did you tell me to visit first?"

# the same shape as the authors' script: two module-level prompts, the QA prompt assembled by an
# f-string in evaluate_single_item, the retrieved items written by construct_evidence_text
SCRIPT_TEXT = '''
import sys
raise SystemExit("this file is read, never run")

QA_eval_prompt = """QA-TEST: grade the candidate against the memory, 0 to 3.
Reply as ```json {"score": int}```"""

Mem_eval_prompt = """MEM-TEST: does the retrieved memory hold the gold?
Q= {question}
GOLD= {groundtruth_memory}
GOT= {retrieved_memory}
Reply {{"Mem_recall": float, "Mem_helpful_score": int}}"""

def construct_evidence_text(ranked_items, evidence_type='chunk', top_k=5):
    evidence_texts = []
    for i, item in enumerate(ranked_items[:top_k]):
        content = item.get('content', '').strip()
        evidence_texts.append(f"## item {i+1} ##\\n{content}")
    return "\\n--\\n".join(evidence_texts)

def evaluate_single_item(qid, question, generated_answer, ranked_items, gt_info, client):
    gt_memory = gt_info.get('memory', '')
    gt_answer = gt_info.get('answer', '')
    qa_formatted_prompt = f"""{QA_eval_prompt}
Q: {question}
M: {gt_memory}
A: {gt_answer}
C: {generated_answer}
"""
    return qa_formatted_prompt
'''


def checkout(tmp_path: Path, text: str = SCRIPT_TEXT) -> Path:
    root = tmp_path / "RealMemBench"
    (root / SCRIPT).parent.mkdir(parents=True, exist_ok=True)
    (root / SCRIPT).write_text(textwrap.dedent(text), "utf-8")
    return root


def test_the_prompts_are_read_from_the_checkout_without_running_it(tmp_path):
    root = checkout(tmp_path)
    for given in (root, root / "eval", root / SCRIPT):
        prompts = load_prompts(given)
        assert prompts.source == str(root / SCRIPT)
    qa = prompts.qa.fill("q{x}?", "mem", "ans", "reply {y}")
    assert qa.startswith("QA-TEST: grade")
    assert qa.endswith("\nQ: q{x}?\nM: mem\nA: ans\nC: reply {y}\n")  # braces left as they are
    evidence = prompts.memory.evidence(["  one\ntwo  ", "three"])
    assert evidence == "## item 1 ##\none\ntwo\n--\n## item 2 ##\nthree"
    mem = prompts.memory.fill("q", "gold", evidence)
    assert "Q= q\nGOLD= gold\nGOT= ## item 1 ##" in mem
    assert mem.endswith('Reply {"Mem_recall": float, "Mem_helpful_score": int}')


def test_an_absent_or_unusable_prompt_file_is_one_line_naming_it(tmp_path):
    with pytest.raises(RealMemJudgeError) as info:
        load_prompts(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(info.value) and "no such file" in str(info.value)
    with pytest.raises(RealMemJudgeError, match=str(tmp_path / SCRIPT)):
        load_prompts(tmp_path)  # a folder without the script: the file it looked for
    cases = {
        "QA_eval_prompt = 'x'\n": "Mem_eval_prompt: not assigned",
        SCRIPT_TEXT.replace("{generated_answer}", "{generated_answer!r}"): "placeholder",
        SCRIPT_TEXT.replace("{gt_answer}", "{open('x').read()}"): "placeholder",
        SCRIPT_TEXT.replace("{groundtruth_memory}", "{gold}"): "unusable placeholder",
        SCRIPT_TEXT.replace('QA_eval_prompt = """', 'QA_eval_prompt = PREFIX + """'): "QA_eval",
        "QA_eval_prompt = (": "not readable Python",
    }
    for text, message in cases.items():
        root = checkout(tmp_path / str(len(message)), text)
        with pytest.raises(RealMemJudgeError) as info:
            load_prompts(root)
        assert message in str(info.value) and str(root / SCRIPT) in str(info.value)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('```json\n{"score": 2, "reason": "r"}\n```', {"score": 2, "reason": "r"}),
        ('Verdict: {"score": 1} and {"x": 2}', None),  # greedy braces: not JSON, as theirs
        ('I think {"score": 3}.', {"score": 3}),
        ('```json\n{"score": 3 # a comment\n}\n```', None),  # a failed fenced block: nothing
        ("3", 3),
        ("", None),
    ],
)
def test_the_judge_output_is_read_as_their_extract_json_reads_it(raw, parsed):
    assert extract_json(raw) == parsed


def test_ground_truth_and_chunks_are_theirs():
    data = json.loads((FIXTURES / "Ada_Test_dialogues_256k.json").read_text("utf-8"))
    truth = ground_truth(data["dialogues"])
    # a later User turn of the same text (not a query) replaces the query's ground truth
    assert truth[ADA_Q1] == (
        "You asked that before; it was about breakfasts too.",
        "prefers savoury breakfasts",
    )
    assert truth[ADA_Q2][1] == "three mornings a week\nweek two adds a fourth run"
    assert truth["My left knee sometimes hurts on hills."][1] == (
        "No specific memory annotation found."
    )
    bo = json.loads((FIXTURES / "Bo_Test_dialogues_256k.json").read_text("utf-8"))
    chunks = session_chunks(bo["dialogues"])
    assert chunks["Travel_9:S2_01"] == (  # a blank turn is content to eval_mem0.py
        "Speaker User: Day 2 of planning: note 2.\nSpeaker Assistant: Noted for day 2.\n"
        "Speaker User:    \nSpeaker Assistant: (no reply)"
    )


QA_REPLIES = {
    ADA_Q1: '```json\n{"score": 3, "reason": "all of it"}\n```',
    ADA_Q2: 'Here: {"score": 2, "reason": "part"}',
    ADA_Q3: '{"score": 2 # unreadable, as theirs reads it\n}',
    ADA_Q4: '{"score": 1}',
    BO_Q: '{"score": 3}',
}
MEM_REPLIES = {
    ADA_Q1: '{"Mem_recall": 1.0, "Mem_helpful_score": 2}',
    ADA_Q2: '{"Mem_recall": 0.5, "Mem_helpful_score": 1}',
    ADA_Q3: "no JSON here",
    ADA_Q4: '{"Mem_recall": 0, "Mem_helpful_score": 0}',
    BO_Q: '{"Mem_recall": 1, "Mem_helpful_score": 2, "Mem_hits": ["Fushimi Inari first"]}',
}


def _reply(body):
    prompt = body["messages"][-1]["content"]
    if prompt.startswith("QA-TEST"):
        question = prompt.split("\nQ: ", 1)[1].split("\nM: ", 1)[0]
        return QA_REPLIES[question]
    question = prompt.split("Q= ", 1)[1].split("\nGOLD= ", 1)[0]
    return MEM_REPLIES[question]


def test_score_realmem_with_a_judge_model(tmp_path, capsys, monkeypatch):
    from memory_lab.benchmarks.realmem.scores import SCORES_FILE
    from memory_lab.cli import main
    from memory_lab.results.judge_costs import judge_costs

    from ..models.openai_mock import CHAT_USAGE, OpenAIMock

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-realmem")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    root = checkout(tmp_path)
    run = tmp_path / "run"
    source = f"realmem:{FIXTURES}"
    args = ["run", "--dialogues", source, "--memory", "vector", "--out", str(run), "--quiet"]
    assert main(args) == 0
    argv = ["score", "realmem", str(run), "--prompts", str(root)]
    sent, bodies = [], []
    with OpenAIMock() as mock:
        mock.reply = _reply
        for _ in range(2):
            before = mock.calls("chat")
            code = main([*argv, "--judge", "openai:gpt-4o-mini", "--base-url", mock.base_url])
            assert code == 0, capsys.readouterr().err
            sent.append(mock.calls("chat") - before)
            bodies.append([r["body"] for r in mock.requests[before:]])
    assert sent == [10, 0]  # 5 QA and 5 memory verdicts; the second scoring: all from the cache
    first = bodies[0]
    assert {b["temperature"] for b in first} == {0.0}
    prompts = [b["messages"][-1]["content"] for b in first]
    assert [len(b["messages"]) for b in first] == [1] * 10  # one user message, as theirs
    (q1,) = [p for p in prompts if p.startswith("QA-TEST") and f"Q: {ADA_Q1}" in p]
    assert "\nM: prefers savoury breakfasts\nA: You asked that before;" in q1  # their gt_map
    records = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    (probe,) = [r for r in records if r.get("question") == BO_Q]
    (bo_qa,) = [p for p in prompts if p.startswith("QA-TEST") and f"Q: {BO_Q}" in p]
    assert bo_qa.endswith(f"\nC: {probe['reply']}\n")  # the memory's reply is the candidate
    (bo_mem,) = [p for p in prompts if p.startswith("MEM-TEST") and f"Q= {BO_Q}" in p]
    assert "GOLD= Fushimi Inari first\nGOT= ## item 1 ##\nSpeaker User: Where should I go" in bo_mem
    assert "--\n## item 2 ##\nSpeaker User: Day 2 of planning: note 2." in bo_mem
    assert "Speaker User:    \nSpeaker Assistant: (no reply)" in bo_mem  # the file's text

    table = {
        r["persona"]: r
        for r in __import__("csv").DictReader((run / LLM_SCORES_FILE).open(encoding="utf-8"))
    }
    ada, bo, both = table["Ada_Test"], table["Bo_Test"], table["all"]
    assert (ada["questions"], ada["qa_scored"], ada["mem_judged"]) == ("4", "3", "4")
    assert float(ada["average_qa_score"]) == 2.0  # (3 + 2 + 1) / 3: the unreadable one left out
    assert [ada[f"qa_score_{i}"] for i in range(4)] == ["0", "1", "1", "1"]
    assert float(ada["qa_hallucination_rate"]) == 0.0
    assert float(ada["qa_perfect_rate"]) == 0.3333  # rounded to 4 places, as theirs
    assert float(ada["average_mem_recall"]) == 0.5  # (1 + 0.5 + 0) / 3
    assert float(ada["average_mem_helpful_score"]) == 1.0
    assert float(bo["average_qa_score"]) == 3.0 and float(bo["qa_perfect_rate"]) == 1.0
    # collect_all_llm_metrics.py: each figure's mean over the personas, distributions summed
    assert float(both["average_qa_score"]) == 2.5
    assert float(both["qa_perfect_rate"]) == pytest.approx((0.3333 + 1.0) / 2)
    assert float(both["average_mem_recall"]) == 0.75
    assert (both["questions"], both["qa_score_3"]) == ("5", "2")
    assert (run / SCORES_FILE).is_file()  # the retrieval metrics, as before

    verdicts = json.loads((run / VERDICTS_FILE).read_text("utf-8"))
    summary = verdicts["summaries"]["vector"]["Ada_Test"]
    assert summary["qa_score_distribution"] == {"0": 0, "1": 1, "2": 1, "3": 1}
    (row,) = [r for r in verdicts["judged"] if r["question"] == BO_Q]
    assert row["result"]["Mem_hits"] == ["Fushimi Inari first"]  # their merged result
    assert all(r["cache_hit"] for r in verdicts["judged"])  # the second scoring's file

    account = json.loads((run / f"{ACCOUNT}.judge.json").read_text("utf-8"))
    prompt_set = load_prompts(root)
    assert account["judge"] == "openai:gpt-4o-mini"
    assert account["prompt_sha256"] == {
        "realmem-qa": prompt_set.qa.prompt_sha256,
        "realmem-memory": prompt_set.memory.prompt_sha256,
    }
    assert (account["calls"], account["cache_hits"], account["requests"]) == (10, 10, 0)
    assert account["input_tokens"] == 10 * CHAT_USAGE["prompt_tokens"]
    (cost,) = judge_costs(run)  # the report bills it
    assert (cost.scorer, cost.calls, cost.cache_hits) == (ACCOUNT, 10, 10)
    out = capsys.readouterr().out
    assert "RealMem LLM metrics" in out and "10 from the call cache, 0 sent" in out


def test_score_realmem_with_a_bad_prompts_path_is_one_line_naming_it(tmp_path, capsys):
    from memory_lab.cli import main

    run = tmp_path / "run"
    args = ["run", "--dialogues", f"realmem:{FIXTURES}", "--memory", "window"]
    assert main([*args, "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    bad = tmp_path / "no-checkout"
    argv = ["score", "realmem", str(run), "--judge", "openai:gpt-4o-mini", "--prompts", str(bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and "no such file" in err and "\n" not in err
    assert not (run / LLM_SCORES_FILE).exists()
    assert main(argv[:-2]) == 2  # no --prompts at all
    assert "--prompts CHECKOUT" in capsys.readouterr().err


def test_a_moved_dataset_is_found_in_the_checkout_and_a_changed_one_refused(
    tmp_path, capsys, monkeypatch
):
    import shutil

    from memory_lab.cli import main

    from ..models.openai_mock import OpenAIMock

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-realmem")
    root = checkout(tmp_path)
    data = tmp_path / "data"
    shutil.copytree(FIXTURES, data)
    run = tmp_path / "run"
    args = ["run", "--dialogues", f"realmem:{data}#persona=Bo_Test", "--memory", "window"]
    assert main([*args, "--out", str(run), "--quiet"]) == 0
    shutil.move(data, root / "dataset")  # the run's source is gone; the checkout holds it
    argv = ["score", "realmem", str(run), "--prompts", str(root), "--judge", "openai:gpt-4o-mini"]
    with OpenAIMock() as mock:
        mock.reply = _reply
        assert main([*argv, "--base-url", mock.base_url]) == 0
        assert mock.calls("chat") == 1  # window ranks nothing: the QA verdict only
        capsys.readouterr()
        bo = root / "dataset" / "Bo_Test_dialogues_256k.json"
        bo.write_text(bo.read_text("utf-8").replace("Noted for day 2.", "Noted."), "utf-8")
        assert main([*argv, "--base-url", mock.base_url]) == 2
    err = capsys.readouterr().err.strip()
    assert f"realmem:{data}#persona=Bo_Test" in err and "no longer what it read" in err
    assert "\n" not in err
