"""BEAM's scoring: the rubric judge's prompt and parsing, the reference's quirks and the
corrected protocol, event ordering's τ-b, the offline grader, per-ability means."""

from __future__ import annotations

import math
import random

import pytest
from scipy.stats import kendalltau

from memory_lab.benchmarks.beam.grading import (
    LLMBeamGrader,
    OfflineBeamGrader,
    event_ordering_score,
    kendall_tau_b,
    score_question,
    value_of,
)
from memory_lab.benchmarks.beam.judge import (
    BeamPromptError,
    item_score,
    judge_prompt,
    load_beam_prompts,
    parse_judge_output,
)
from memory_lab.benchmarks.beam.scores import ability_means, published_lines

from ..models.openai_mock import OpenAIMock

# A made-up prompt in the shape of BEAM's (its text is not in this repository).
JUDGE = "Q: <question>\nITEM: <rubric_item>\nREPLY: <llm_response>\nAnswer in JSON."
METRICS = '''
def llm_equivalence(first_paragraph, second_paragraph, llm):
    system_msg = {"role": "system", "content": "Same thing? YES or NO."}
    user_msg = {"role": "user", "content": f"""A: {first_paragraph} \\n B: {second_paragraph}"""}
    return llm.invoke([system_msg, user_msg])
'''


def beam_copy_files(root):
    (root / "src" / "evaluation").mkdir(parents=True)
    (root / "src" / "prompts.py").write_text(
        f"other = 'x'\nunified_llm_judge_base_prompt = {JUDGE!r}\n"
    )
    (root / "src" / "evaluation" / "compute_metrics.py").write_text(METRICS)
    return root


def beam_copy(root):
    (root / "src" / "evaluation").mkdir(parents=True)
    (root / "src" / "prompts.py").write_text(
        f"other = 'x'\nunified_llm_judge_base_prompt = {JUDGE!r}\n"
    )
    (root / "src" / "evaluation" / "compute_metrics.py").write_text(METRICS)
    (root / "chats" / "100K").mkdir(parents=True)
    return root


def test_tau_b_is_scipys_on_random_rankings_with_ties():
    rng = random.Random(3)
    for _ in range(2000):
        n = rng.randint(0, 9)
        x, y = [rng.randint(1, 4) for _ in range(n)], [rng.randint(1, 5) for _ in range(n)]
        ours = kendall_tau_b(x, y)
        with pytest.warns() if n < 2 else _nothing():
            theirs = kendalltau(x, y, variant="b").statistic
        assert (math.isnan(ours) and math.isnan(theirs)) or abs(ours - theirs) < 1e-12


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_event_ordering_aligns_lines_then_ranks_them():
    exact = lambda r, s: r == s  # noqa: E731
    score = event_ordering_score(["a", "b", "c"], ["a", "c", "b"], exact)
    assert score["tau_norm"] == pytest.approx(2 / 3) and score["f1"] == 1  # tau 1/3
    assert event_ordering_score(["a", "b", "c"], ["c", "b", "a"], exact)["tau_norm"] == 0
    # a line judged equivalent takes the first unused item; unmatched lines rank as extra items
    loose = lambda r, s: r in s  # noqa: E731
    score = event_ordering_score(["a", "b"], ["x a", "noise", "y b"], loose)
    assert score["precision"] == pytest.approx(2 / 3) and score["recall"] == 1
    # one item only: its ranking is constant, tau undefined (NaN, as scipy and the reference)
    assert math.isnan(event_ordering_score(["a"], ["a"], exact)["tau_norm"])


def test_reference_prompt_leaves_question_out_and_corrected_fills_it():
    ref = judge_prompt(JUDGE, "When?", "should state: May", "In May.", "reference")
    assert ref == "Q: <question>\nITEM: should state: May\nREPLY: In May.\nAnswer in JSON."
    fixed = judge_prompt(JUDGE, "When?", "should state: May", "In May.", "corrected")
    assert fixed.startswith("Q: When?\nITEM: should state: May\nREPLY: In May.")
    # the reference replaces a placeholder that the rubric item carries; one pass does not
    assert (
        "REPLY: x"
        in judge_prompt(JUDGE, "q", "<llm_response>", "x", "reference").split("ITEM: ")[1]
    )
    assert "ITEM: <llm_response>" in judge_prompt(JUDGE, "q", "<llm_response>", "x", "corrected")


@pytest.mark.parametrize(
    "text, score",
    [
        ('{"score": 0.5, "reason": "r"}', 0.5),
        ('```json\n{"score": 1.0, "reason": "r"}\n```', 1.0),
        ('Evaluation: {"score": 0.0, "reason": "r"} done', 0.0),
        ('{"score": 1.0, "reason": "unterminated', 1.0),  # json_repair's case: the score is read
        ("I cannot grade this.", None),
        ('"score": 0.5 alone, no object', 0.5),  # no object at all: the score the text states
    ],
)
def test_judge_output_is_read_as_the_reference_reads_it(text, score):
    parsed = parse_judge_output(text)
    assert (parsed or {}).get("score") == score


@pytest.mark.parametrize(
    "text",
    [
        'I\'d give "score": 0.5 at first... {"score": 1, "reason": "it names {budget}"}',
        'A score: 0.5 would be harsh. {"score": 1.0, "reason": "cut sho',
        '{"reason": "a score: 0.5 is too low", "score": 1, "note": "{',
        '{"detail": {"score": 0.5}, "score": 1, "reason": "cut',
        "score: 0.5? No: {'score': 1, 'reason': 'single quotes'}",
    ],
)
def test_where_json_repair_reads_the_object_its_own_score_is_read(text):
    """Outputs the reference cannot parse and hands to json_repair, which reads the object:
    a score mentioned before it, in one of its strings or in a nested object is not its own."""
    assert parse_judge_output(text)["score"] == 1


def test_reference_truncates_half_scores_except_event_ordering():
    half = {"score": 0.5}
    assert item_score(half, "reference", "information_extraction") == 0
    assert item_score(half, "reference", "event_ordering") == 0.5
    assert item_score(half, "corrected", "summarization") == 0.5
    assert item_score(["score"], "corrected", "summarization") is None
    assert item_score({"score": "high"}, "reference", "summarization") is None


@pytest.mark.parametrize("score", [1e308, -5, 7, 99, 1.5, float("inf")])
@pytest.mark.parametrize("protocol", ["reference", "corrected"])
def test_a_score_outside_beams_scale_is_no_score(score, protocol):
    """A judge's 7 or 1e308 had given BEAM means of 631.5% and inf%: outside 0-1 it is
    unreadable (counted apart), never averaged."""
    assert item_score({"score": score}, protocol, "summarization") is None
    assert item_score({"score": score}, protocol, "event_ordering") is None
    assert item_score({"score": 1}, protocol, "summarization") == 1


class Scripted:
    """A judge model answering each prompt from a list, recording what it was sent."""

    def __init__(self, outputs):
        self.outputs, self.sent = list(outputs), []

    def invoke(self, prompt):
        self.sent.append(prompt)
        return type("Msg", (), {"content": self.outputs.pop(0)})()


def test_question_score_is_the_mean_of_its_items_under_each_protocol(tmp_path):
    prompts = load_beam_prompts(beam_copy(tmp_path / "BEAM") / "chats" / "100K")
    outputs = ['{"score": 1.0}', '{"score": 0.5}', '{"score": 0.0}', '{"score": 0.5}']
    model = Scripted(outputs * 2)
    grader = LLMBeamGrader(model, prompts)
    rubric = ["LLM response should state: A", "b", "c", "d"]
    ref = score_question(
        "knowledge_update", "Q?", rubric, "reply", grader, "reference", prompts.judge
    )
    fixed = score_question(
        "knowledge_update", "Q?", rubric, "reply", grader, "corrected", prompts.judge
    )
    assert ref.judge_score == 0.25 and fixed.judge_score == 0.5 and ref.score == 0.25
    assert model.sent[0].startswith("Q: <question>") and model.sent[4].startswith("Q: Q?")
    assert [g.how for g in ref.grades] == ["judge"] * 4 and ref.tau_norm is None


def test_event_ordering_scores_tau_and_asks_equivalence_with_beams_messages(tmp_path):
    prompts = load_beam_prompts(beam_copy(tmp_path / "BEAM"))
    with OpenAIMock() as mock:

        def reply(body):
            msgs = body["messages"]
            if msgs[0]["content"] == "Same thing? YES or NO.":
                a, b = msgs[1]["content"][3:].split(" \n B: ")
                return "YES" if a in b else "NO"
            return '{"score": 0.5}'

        mock.reply = reply
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(model="j", api_key="k", base_url=mock.base_url, max_retries=0)
        grader = LLMBeamGrader(model, prompts)
        result = score_question(
            "event_ordering",
            "Order?",
            ["paint", "roof", "budget"],
            "1. roof\n2. paint\n3. budget",
            grader,
            "reference",
            prompts.judge,
        )
    assert result.judge_score == 0.5  # event ordering's judge mean keeps 0.5 even in reference
    assert result.tau_norm == pytest.approx(2 / 3) and result.score == result.tau_norm


def test_offline_grades_value_nuggets_by_matching_and_leaves_the_rest_ungraded():
    grader = OfflineBeamGrader()
    rubric = ["LLM response should state: March 29", "LLM response should mention: the sprint goal"]
    q = score_question(
        "information_extraction", "When?", rubric, "It ends on March 29th.", grader, "reference"
    )
    assert (
        [g.how for g in q.grades] == ["match", "ungraded"]
        and q.judge_score == 1.0
        and q.graded == 1
    )
    q = score_question("information_extraction", "When?", rubric, "In April.", grader, "corrected")
    assert q.judge_score == 0.0
    q = score_question(
        "summarization", "Sum?", ["LLM response should contain: x"], "x", grader, "reference"
    )
    assert q.score is None and q.graded == 0  # ungraded is not zero
    q = score_question("event_ordering", "Order?", ["a", "b"], "a\nb", grader, "reference")
    assert q.tau_norm is None and q.score is None
    assert (
        value_of(
            "LLM response should state: there is contradictory information",
            "contradiction_resolution",
        )
        is None
    )
    assert (
        value_of("LLM response should state: 'category' and 'notes'", "multi_session_reasoning")
        == "category' and 'notes"
    )


def test_per_ability_means_average_conversations_as_beams_report():
    rows = [
        {
            "memory": "m",
            "scale": "100K",
            "conversation": "1",
            "ability": "abstention",
            "score": 1.0,
        },
        {
            "memory": "m",
            "scale": "100K",
            "conversation": "1",
            "ability": "abstention",
            "score": 0.0,
        },
        {
            "memory": "m",
            "scale": "100K",
            "conversation": "2",
            "ability": "abstention",
            "score": 1.0,
        },
        {
            "memory": "m",
            "scale": "100K",
            "conversation": "2",
            "ability": "abstention",
            "score": None,
        },
    ]
    assert ability_means(rows) == {("m", "100K", "abstention"): 0.75}


def test_prompts_are_read_from_the_users_copy_or_refused_in_one_line(tmp_path):
    root = beam_copy(tmp_path / "BEAM")
    prompts = load_beam_prompts(root / "chats")
    assert prompts.judge == JUDGE and prompts.source == str(root.resolve())
    assert prompts.equivalence_messages("{second}", "y")[1]["content"] == "A: {second} \n B: y"
    with pytest.raises(
        BeamPromptError, match="no BEAM copy with src/prompts.py here or above"
    ) as exc:
        load_beam_prompts(tmp_path / "elsewhere")
    assert "\n" not in str(exc.value)
    (root / "src" / "prompts.py").write_text("x = 1\n")
    with pytest.raises(BeamPromptError, match="prompts.py: no unified_llm_judge_base_prompt"):
        load_beam_prompts(root)
    (root / "src" / "prompts.py").write_text("def broken(:\n")
    with pytest.raises(BeamPromptError, match="prompts.py: line 1: not readable Python"):
        load_beam_prompts(root)


def test_beam_scores_command_scores_a_run_offline_and_with_a_judge(tmp_path, capsys, monkeypatch):
    import csv

    from memory_lab import read_results
    from memory_lab.cli import main
    from memory_lab.results.summary import summarize_by_category
    from memory_lab.views.report import render_report

    from ..dialogue.importers.beam_fixture import chats

    root = chats(tmp_path / "BEAM" / "chats")
    beam_copy_root = beam_copy_files(tmp_path / "BEAM")
    out = tmp_path / "run"
    source = f"beam:{root}#scale=100K,conversations=1+2"
    assert (
        main(["run", "--dialogues", source, "--memory", "buffer", "--out", str(out), "--quiet"])
        == 0
    )
    probes = read_results(out).probes
    answerable = probes[probes["category"] != "abstention"]
    with_evidence = answerable[answerable["evidence"].map(len) > 0]
    assert len(with_evidence) == 2 * 8 and with_evidence["evidence_recall"].notna().all()
    assert (with_evidence["evidence_recall"] == 1).all()  # a buffer holds the whole chat
    table = summarize_by_category(read_results(out))
    assert "beam_ability=event_ordering" in set(table["source_category"])  # apart from temporal
    capsys.readouterr()
    assert main(["score", "beam", str(out)]) == 0
    text = capsys.readouterr().out
    assert "OFFLINE: only value nuggets graded" in text and "buffer @ 100K" in text
    assert "summarization" in text and "—" in text  # ungraded, not zero
    assert "mean (4/10 abilities)" in text  # offline: a mean over the abilities it could score
    # the run's evidence recall beside it: a buffer carries every evidence turn
    assert "knowledge_update" in text and "100.0% (2/2)" in text and "100.0% (16/20)" in text
    html = render_report(read_results(out))
    assert (
        '<h2 id="beam">BEAM by ability</h2>' in html
        and 'href="#beam"' in html
        and "OFFLINE: only value nuggets graded" in html
    )
    assert "id=published-beam" in html and "BEAM corrected (offline)" in html
    rows = list(csv.DictReader(open(out / "beam_scores.csv")))
    assert len(rows) == 2 * 10 * 2 and {r["protocol"] for r in rows} == {"reference", "corrected"}
    # a model judge needs the user's BEAM copy: one line
    assert main(["score", "beam", str(out), "--judge", "openai:gpt-4o-mini"]) == 2
    assert "--prompts DIR" in capsys.readouterr().err
    # the old command, kept one release, says what it is an alias of and scores the same
    assert main(["beam-scores", str(out), "--beam-protocol", "reference"]) == 0
    said = capsys.readouterr()
    assert "beam-scores is an alias of memory-lab score beam" in said.err
    assert "BEAM scores (offline judge; reference protocol" in said.out
    with OpenAIMock() as mock:
        mock.reply = lambda body: (
            "YES" if body["messages"][0]["role"] == "system" else '{"score": 0.5}'
        )
        args = ["score", "beam", str(out), "--judge", "openai:j", "--base-url", mock.base_url]
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        assert main([*args, "--prompts", str(beam_copy_root), "--protocol", "reference"]) == 0
    text = capsys.readouterr().out
    assert "openai:j judge; reference protocol" in text
    rows = list(csv.DictReader(open(out / "beam_scores.csv")))
    # every item judged 0.5: the reference reads it as 0, but event ordering's judge mean as 0.5
    assert {r["score"] for r in rows if r["ability"] != "event_ordering"} == {"0.0"}
    (eo,) = [
        r for r in rows if r["ability"] == "event_ordering" and r["conversation"].endswith("-1")
    ]
    assert eo["judge_score"] == "0.5" and eo["tau_norm"] != "" and eo["score"] == eo["tau_norm"]


def test_published_figures_are_shown_per_scale_with_their_source_and_label():
    from memory_lab.benchmarks.beam import BENCHMARK
    from memory_lab.benchmarks.beam.importer import SCALES

    rows = BENCHMARK.published_figures()["rows"]
    assert rows and all(r["scale"] in SCALES and r["source"].startswith("https://") for r in rows)
    lines = "\n".join(published_lines(["100K", "10M"]))
    assert "vendors' own numbers" in lines and "not comparable digit for digit" in lines
    assert "100K: none published" in lines
    assert "10M: Hindsight" in lines and "64.1%" in lines and "1M:" not in lines


def _judged_beam_run(tmp_path):
    """A BEAM run (conversation 1, buffer, offline) and a BEAM copy with the judge's prompts."""
    from memory_lab.cli import main

    from ..dialogue.importers.beam_fixture import chats

    root = chats(tmp_path / "BEAM" / "chats")
    out = tmp_path / "run"
    source = f"beam:{root}#scale=100K,conversations=1"
    args = ["run", "--dialogues", source, "--memory", "buffer", "--out", str(out), "--quiet"]
    assert main(args) == 0
    return out, beam_copy_files(tmp_path / "BEAM")


def test_a_second_beam_scores_sends_no_request_and_names_its_judge(tmp_path, capsys, monkeypatch):
    import csv
    import hashlib
    import json

    from memory_lab.cli import main

    out, copy = _judged_beam_run(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "0")
    args = ["score", "beam", str(out), "--judge", "openai:gpt-4o-mini", "--prompts", str(copy)]
    sent, accounts, rows = [], [], []
    with OpenAIMock() as mock:
        mock.reply = lambda body: (
            "YES" if body["messages"][0]["role"] == "system" else 'Hmm, 0.5? {"score": 1}'
        )
        for _ in range(2):
            before = mock.calls("chat")
            assert main([*args, "--base-url", mock.base_url]) == 0
            sent.append(mock.calls("chat") - before)
            account = out / "beam-scores.judge.json"
            accounts.append(account.read_text("utf-8") if account.exists() else "null")
            rows.append(list(csv.DictReader(open(out / "beam_scores.csv", encoding="utf-8"))))
    printed = capsys.readouterr().out
    assert sent[0] > 0 and sent[1] == 0  # the second invocation: every call from the run's cache
    first, again = (json.loads(a) for a in accounts)
    assert first["requests"] == sent[0] and first["calls"] > sent[0]  # protocols share alignments
    assert (again["calls"], again["cache_hits"], again["requests"]) == (first["calls"],) * 2 + (0,)
    assert again["input_tokens"] == first["input_tokens"] == first["calls"] * 111
    assert first["judge"] == "openai:gpt-4o-mini" and first["price"]["model"] == "gpt-4o-mini"
    assert first["est_cost_usd"] == pytest.approx(first["calls"] * (111 * 0.15 + 7 * 0.6) / 1e6)
    rubric = hashlib.sha256(JUDGE.encode()).hexdigest()
    assert first["prompt_sha256"]["beam-rubric"] == rubric and first["run_id"]
    assert f"{first['calls']} from the call cache, 0 sent" in printed
    # every question names the judge and its prompt, with the calls and tokens it took
    assert {(r["judge"], r["judge_prompt_sha256"]) for r in rows[0]} == {
        ("openai:gpt-4o-mini", rubric)
    }
    assert sum(int(r["judge_calls"]) for r in rows[0]) == first["calls"]
    assert sum(int(r["judge_cache_hits"]) for r in rows[1]) == first["calls"]
    assert [r["score"] for r in rows[0]] == [r["score"] for r in rows[1]]
    assert {r["judge_score"] for r in rows[0]} == {"1.0"}  # the JSON's score, not the 0.5
    from memory_lab.results.judge_costs import judge_costs

    (cost,) = judge_costs(out)
    assert (cost.scorer, cost.judge, cost.calls) == (
        "beam-scores",
        "openai:gpt-4o-mini",
        again["calls"],
    )
    assert cost.est_cost_usd == pytest.approx(first["est_cost_usd"])
    # an offline scoring leaves no model judge's bill behind
    assert main(["score", "beam", str(out)]) == 0
    assert not (out / "beam-scores.judge.json").exists() and judge_costs(out) == []


def test_a_crafted_scores_file_is_refused_in_one_line(tmp_path):
    import os

    from memory_lab.benchmarks.beam.scores import SCORES_FILE, read_scores
    from memory_lab.results.read import ResultsError

    assert read_scores(tmp_path) is None  # not scored yet
    os.mkfifo(tmp_path / SCORES_FILE)  # never waited on
    with pytest.raises(ResultsError, match="FIFO|not a regular file"):
        read_scores(tmp_path)
    (tmp_path / SCORES_FILE).unlink()
    (tmp_path / SCORES_FILE).write_text("protocol,memory,score\nreference,buffer,lots\n")
    with pytest.raises(ResultsError, match=r"line 2: score: not a number: 'lots'"):
        read_scores(tmp_path)
