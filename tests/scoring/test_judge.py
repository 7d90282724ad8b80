"""The LLM judge: prompt, verdict parsing, the offline judge, a real client and the summary."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import statistics
import time

import pandas as pd
import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.log.formats import migrate_record
from memory_lab.log.record_log import dump_record
from memory_lab.log.records import without_timings
from memory_lab.models.providers import provider_chat_model
from memory_lab.models.tokens import count_tokens
from memory_lab.results.judge_metrics import judge_metrics
from memory_lab.results.read import read_records
from memory_lab.run.benchmark import resume_benchmark
from memory_lab.scoring.judge import (
    BUILTIN_FILE,
    BUILTIN_TEMPLATE,
    JUDGE_PROMPT,
    JUDGE_PROMPT_TEXT,
    JUDGE_PROMPT_VERSION,
    JudgePromptError,
    OfflineJudge,
    Verdict,
    judge_prompt,
    judge_reply,
    judge_templates,
    load_judge_template,
    parse_verdict,
    record_fields,
    resolve_judge,
)
from memory_lab.scoring.judge_panel import build_panel
from memory_lab.text.normalize import find_any

from ..conftest import FIXTURES
from ..models.openai_mock import CHAT_USAGE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CORRECT", True),
        ("Correct.", True),
        ("**correct**", True),
        ("Verdict: CORRECT", True),
        ("WRONG", False),
        ("wrong!", False),
        ("incorrect", False),
        ("INCORRECT.", False),
        ("not correct", False),
        ("WRONG - the correct answer is Busan", False),
        ("CORRECT, not wrong", True),
        ("I cannot tell.", None),
        ("I cannot tell if this is correct.", None),  # a hedge before it: no verdict
        ("I can't say whether it is wrong", None),
        ("Unsure, maybe correct", None),
        ("I can confirm: CORRECT", True),
        ("", None),
        ("correctly", None),
    ],
)
def test_parse_verdict(text, expected):
    assert parse_verdict(text) is expected


def test_prompt_file_has_placeholders_and_the_one_word_instruction():
    assert set(JUDGE_PROMPT.input_variables) == {"question", "answers", "reply", "abstention"}
    assert "exactly one word: CORRECT or WRONG" in JUDGE_PROMPT_TEXT
    assert "outdated" in JUDGE_PROMPT_TEXT and "never given" in JUDGE_PROMPT_TEXT
    assert len(JUDGE_PROMPT_VERSION) == 12


def test_prompt_sections_round_trip():
    prompt = judge_prompt(
        "Where did I move?", ["Busan", "부산"], "You moved to Busan.", abstention=False
    )
    assert "- Busan\n- 부산" in prompt
    assert BUILTIN_TEMPLATE.parse(prompt) == (
        "Where did I move?",
        ["Busan", "부산"],
        "You moved to Busan.",
        False,
    )
    prompt = judge_prompt("What is my cat's name?", [], "I don't know.", abstention=True)
    assert BUILTIN_TEMPLATE.parse(prompt) == ("What is my cat's name?", [], "I don't know.", True)


def _string_match(answers, reply, abstention):
    from memory_lab.scoring.probes import is_abstention

    if abstention:
        return is_abstention(reply)
    return not is_abstention(reply) and find_any(reply, answers) is not None


@pytest.mark.parametrize(
    ("question", "answers", "reply", "abstention"),
    [
        ("Where do I live now?", ["Busan"], "You live in Busan now.", False),
        ("Where do I live now?", ["Busan"], "You live in Seoul.", False),
        ("How old is my sister?", ["13"], "She is 3 years old.", False),
        ("Where do I live now?", ["Busan"], "I don't know.", False),
        ("제 고향이 어디였죠?", ["부산"], "고향은 부산이에요.", False),
        ("제 고향이 어디였죠?", ["부산"], "서울이에요.", False),
        ("What is my cat's name?", [], "I don't know.", True),
        ("What is my cat's name?", [], "Your cat is called Tom.", True),
        ("제 차 번호가 뭐였죠?", [], "잘 모르겠어요.", True),
    ],
)
def test_offline_judge_agrees_with_string_match(question, answers, reply, abstention):
    verdict = judge_reply(OfflineJudge(), question, answers, reply, abstention=abstention)
    assert verdict.correct is _string_match(answers, reply, abstention)
    assert verdict.raw in ("CORRECT", "WRONG")
    prompt = judge_prompt(question, answers, reply, abstention=abstention)
    assert verdict.input_tokens == count_tokens(prompt)
    assert verdict.output_tokens == count_tokens(verdict.raw)


def test_resolve_judge_offline():
    judge = resolve_judge("offline")
    assert isinstance(judge, OfflineJudge)
    assert judge.get_num_tokens("hello world") == count_tokens("hello world")


def test_judge_reply_through_a_real_client(mock):
    mock.reply = "CORRECT"
    model = provider_chat_model("openai:gpt-4o-mini", base_url=mock.base_url)
    verdict = judge_reply(
        model,
        "Which city did I move to?",
        ["Busan", "Pusan"],
        "You told me you moved to Busan last spring.",
        abstention=False,
    )
    assert verdict == Verdict(
        True, "CORRECT", CHAT_USAGE["prompt_tokens"], CHAT_USAGE["completion_tokens"]
    )
    assert mock.calls("chat") == 1
    content = mock.requests[0]["body"]["messages"][0]["content"]
    assert "Which city did I move to?" in content
    assert "- Busan\n- Pusan" in content
    assert "You told me you moved to Busan last spring." in content


def test_judge_reply_through_resolve_judge_unparseable(mock):
    mock.reply = "Hmm, hard to say."
    verdict = judge_reply(
        resolve_judge("openai:gpt-4o-mini", base_url=mock.base_url),
        "What is my cat's name?",
        [],
        "I don't know.",
        abstention=True,
    )
    assert verdict.correct is None and verdict.raw == "Hmm, hard to say."


def _judged_probes(memory: list[str], correct: list[bool], verdicts: list) -> pd.DataFrame:
    """Probe rows of a run from before several prompts and runs (one verdict, no
    judge_verdicts), read as the records' reader gives them: migrated (``log/formats.py``)."""
    rows = [
        {
            "type": "probe",
            "memory": m,
            "category": "single-hop",
            "correct": c,
            "judge_correct": v,
            "judge_raw": "CORRECT" if v else "WRONG" if v is False else "?",
            "judge_input_tokens": 0,
            "judge_output_tokens": 0,
        }
        for m, c, v in zip(memory, correct, verdicts, strict=True)
    ]
    return pd.DataFrame([migrate_record(row, 1) for row in rows])


def test_judge_metrics_rates():
    probes = _judged_probes(
        ["buffer"] * 4 + ["window"] * 3,
        [True, True, False, False, True, False, False],
        [True, False, False, None, None, None, True],
    )
    summary = judge_metrics(probes).set_index("memory")
    assert list(summary.index) == ["buffer", "window"]
    buffer = summary.loc["buffer"]
    assert buffer.judge_unparseable == 1
    assert buffer.judge_accuracy == pytest.approx(1 / 3)
    assert buffer.disagreement_rate == pytest.approx(1 / 3)
    window = summary.loc["window"]
    assert window.judge_unparseable == 2
    assert window.judge_accuracy == 1.0
    assert window.disagreement_rate == 1.0


def test_judge_metrics_with_no_verdicts():
    row = judge_metrics(_judged_probes(["a"], [True], [None])).iloc[0]
    assert row.judge_unparseable == 1
    assert math.isnan(row.judge_accuracy) and math.isnan(row.disagreement_rate)


# ---------------------------------------------------------------------- user grading prompts

MEM0_STYLE = (
    "Question: {question}\nGold answer: {answers}\nGenerated answer: {reply}\n"
    'Return JSON {{"label": "CORRECT"}} or {{"label": "WRONG"}}.'
)


def test_a_user_prompt_formats_and_reads_back(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(MEM0_STYLE, "utf-8")
    template = load_judge_template(str(path), "p2")
    assert template.placeholders == ("question", "answers", "reply")
    assert template.version == template.sha256[:12] and template.file == str(path)
    prompt = template.format("Where do I live?", ["Busan"], " Busan. ", abstention=False)
    assert prompt.endswith('{"label": "CORRECT"} or {"label": "WRONG"}.')
    assert "Gold answer: - Busan\nGenerated answer: Busan." in prompt
    assert template.parse(prompt) == ("Where do I live?", ["Busan"], "Busan.", False)
    # without {abstention}, no accepted answers reads as an abstention probe
    none = template.format("What is my cat's name?", [], "I don't know.", abstention=True)
    assert template.parse(none) == ("What is my cat's name?", [], "I don't know.", True)
    offline = resolve_judge("offline", template=template)
    verdict = judge_reply(offline, "Q?", ["Busan"], "Busan", abstention=False, template=template)
    sent = template.format("Q?", ["Busan"], "Busan", abstention=False)
    assert verdict == Verdict(True, "CORRECT", count_tokens(sent), count_tokens("CORRECT"))


def test_builtin_names_our_prompt_and_no_prompt_means_ours():
    assert judge_templates([]) == [BUILTIN_TEMPLATE]
    ours = judge_templates(["builtin", "builtin"])
    assert [t.label for t in ours] == ["p1", "p2"] and ours[1].text == JUDGE_PROMPT_TEXT
    assert BUILTIN_TEMPLATE.version == JUDGE_PROMPT_VERSION


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (
            "Q: {question}\nA: {reply}\nGold: {gold_answer}",
            r"unknown placeholder\(s\) \{gold_answer\}",
        ),
        (b"Q: {question} A: {reply} \xff\xfe", r"not UTF-8 text \(byte 25\)"),
        ("Q: {question}\nanswers: {answers}", r"needs the placeholder\(s\) \{reply\}"),
        ("Q: {question} A: {reply} JSON: {label}", r"unknown placeholder\(s\) \{label\}"),
        ("Q: {question} A: {reply} {", "Single '{' encountered"),
        ("Q: {question!r} A: {reply}", "takes no format spec or conversion"),
        ("Q: {} A: {reply} {question}", r"unknown placeholder\(s\) \{\}"),
    ],
)
def test_a_bad_prompt_file_is_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "bad prompt.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, "utf-8")
    with pytest.raises(JudgePromptError, match=message) as caught:
        load_judge_template(str(path))
    text = str(caught.value)
    assert text.startswith(f"--judge-prompt {path}: ") and "\n" not in text


def test_a_bad_prompt_file_stops_the_cli_before_any_folder(tmp_path, capsys):
    bad = tmp_path / "judge.txt"
    bad.write_text("Grade {reply} against {gold}.", "utf-8")
    out = tmp_path / "run"
    args = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    assert main([*args, "--judge", "offline", "--judge-prompt", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "{gold}" in err
    assert not out.exists()
    assert main([*args, "--judge-runs", "3", "--out", str(out)]) == 2
    assert "--judge-runs needs --judge MODEL" in capsys.readouterr().err


def test_parse_verdict_reads_a_json_label_first():
    assert parse_verdict('{"reasoning": "it is not correct", "label": "WRONG"}') is False
    assert parse_verdict('{"reasoning": "wrong city? no", "label": "CORRECT"}') is True
    assert parse_verdict("label: correct") is True


def test_offline_panel_runs_every_prompt_every_run(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(MEM0_STYLE, "utf-8")
    panel = build_panel("offline", judge_templates(["builtin", str(path)]), 3)
    gradings = panel.grade("Where do I live?", ["Busan"], "In Busan.", abstention=False)
    assert [(g.prompt, g.run) for g in gradings] == [(p, r) for p in ("p1", "p2") for r in range(3)]
    assert all(g.verdict.correct is True for g in gradings)
    fields = record_fields(gradings)
    assert fields["judge_correct"] is True and fields["judge_calls"] == 6
    assert fields["judge_input_tokens"] == sum(g.verdict.input_tokens for g in gradings)
    assert fields["judge_cache_hit"] is False
    assert [v["prompt"] for v in fields["judge_verdicts"]] == ["p1"] * 3 + ["p2"] * 3


# ---------------------------------------------------------------------- several runs, a provider

VERDICT_CYCLE = ["CORRECT", "WRONG", "CORRECT", "WRONG", "WRONG"]  # runs differ on mini.yaml


def _scripted_verdicts(mock):
    """The mock answers judge calls with verdicts in a fixed cycle (runs then differ)."""
    replies = itertools.cycle(VERDICT_CYCLE)
    original = mock.success

    def success(kind, body):
        mock.reply = next(replies)
        return original(kind, body)

    mock.success = success


def test_three_runs_of_two_prompts_through_a_provider_then_from_the_cache(tmp_path, mock, capsys):
    _scripted_verdicts(mock)
    mine = tmp_path / "mine.txt"
    mine.write_text(MEM0_STYLE, "utf-8")
    args = [
        "run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml"),
        "--judge", "openai:gpt-4o-mini", "--judge-runs", "3", "--judge-temperature", "0.7",
        "--judge-prompt", "builtin", "--judge-prompt", str(mine), "--base-url", mock.base_url,
        "--cache-dir", str(tmp_path / "cache"), "--quiet",
    ]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out
    a = read_results(tmp_path / "a")
    probes = a.probes
    calls = mock.calls("chat")
    assert calls == 6 * len(probes)  # 2 prompts x 3 runs, every one a request of its own
    assert {r["body"]["temperature"] for r in mock.requests} == {0.7}
    # every judge call metered: the provider's usage, per call and summed per probe
    assert (probes["judge_calls"] == 6).all()
    assert (probes["judge_input_tokens"] == 6 * CHAT_USAGE["prompt_tokens"]).all()
    assert (probes["judge_output_tokens"] == 6 * CHAT_USAGE["completion_tokens"]).all()
    per_call = [v for vs in probes["judge_verdicts"] for v in vs]
    assert {(v["input_tokens"], v["output_tokens"]) for v in per_call} == {(111, 7)}
    # raw outputs kept per (prompt, run), in the order the mock answered them
    assert [v["raw"] for v in per_call] == list(
        itertools.islice(itertools.cycle(VERDICT_CYCLE), calls)
    )
    # J over runs, computed here from the raw verdicts with the standard library
    summary = a.path / "summary.csv"
    row = pd.read_csv(summary).iloc[0]
    answerable = probes[probes["category"] != "abstention"]
    for label, suffix in (("p1", ""), ("p2", "_p2")):
        per_run = [
            statistics.mean(
                next(v["raw"] == "CORRECT" for v in vs if v["prompt"] == label and v["run"] == r)
                for vs in answerable["judge_verdicts"]
            )
            for r in range(3)
        ]
        assert row[f"judge_accuracy{suffix}"] == pytest.approx(statistics.mean(per_run))
        assert row[f"judge_accuracy_sd{suffix}"] == pytest.approx(statistics.stdev(per_run))
        assert row[f"judge_accuracy_sd{suffix}"] > 0  # the runs differ
        assert not math.isnan(row[f"judge_kappa{suffix}"])
    assert "judge_kappa_p1_p2" in row and row["judge_tokens"] == len(probes) * 6 * 118
    # the terminal shows J mean ± sd beside recall, and kappa
    assert "J p1 (mean ± sd)" in printed and "J p2 (mean ± sd)" in printed
    assert "κ p1~recall" in printed and "κ p1~p2" in printed
    j = f"{100 * row['judge_accuracy']:.1f}% ± {100 * row['judge_accuracy_sd']:.1f}"
    assert j in printed
    info = json.loads((a.path / "run.json").read_text())
    judge = info["judge"]
    assert (judge["model"], judge["runs"], judge["temperature"]) == ("openai:gpt-4o-mini", 3, 0.7)
    assert [p["file"] for p in judge["prompts"]] == [BUILTIN_FILE, str(mine)]
    assert judge["prompts"][1]["sha256"] == hashlib.sha256(mine.read_bytes()).hexdigest()
    assert judge["params"]["temperature"] == 0.7
    # a rerun of the whole benchmark: every judge call from the cache, the same verdicts
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert mock.calls("chat") == calls
    b = read_results(tmp_path / "b").probes
    assert b["judge_cache_hit"].all()
    assert [v["raw"] for vs in b["judge_verdicts"] for v in vs] == [v["raw"] for v in per_call]
    assert all(v["cache_hit"] for vs in b["judge_verdicts"] for v in vs)
    assert (b["judge_input_tokens"] == probes["judge_input_tokens"]).all()


def test_a_resumed_run_refuses_a_changed_prompt_file(tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text(MEM0_STYLE, "utf-8")
    common = dict(judge="offline", judge_prompts=[str(mine)], judge_runs=2, progress=False)
    dialogues = load_dialogues(FIXTURES / "dialogues" / "mini.yaml")
    out = tmp_path / "run"
    run_benchmark(
        resolve_memories(["buffer"]),
        dialogues,
        out,
        **common,
        sources=[str(FIXTURES / "dialogues" / "mini.yaml")],
    )
    mine.write_text(MEM0_STYLE + "\nBe strict.", "utf-8")
    with pytest.raises(ValueError, match="judge prompt .*mine.txt changed since the run started"):
        resume_benchmark(out, progress=False)


def test_a_prompt_file_is_read_within_64_kib_whatever_it_is(tmp_path):
    fits = tmp_path / "fits.txt"
    head = "Q: {question} A: {reply}\n"
    fits.write_text(head + "x" * (64 * 1024 - len(head)), "utf-8")
    assert load_judge_template(str(fits)).text.startswith(head)
    big = tmp_path / "big.txt"
    big.write_text(head + "x" * 5_600_000, "utf-8")
    cases = [
        (str(big), "the limit is 65,536"),
        ("/dev/zero", "is a character device, not a regular file"),  # never read: it never ends
    ]
    for source, message in cases:
        started = time.perf_counter()
        with pytest.raises(JudgePromptError, match=message) as caught:
            load_judge_template(source)
        assert time.perf_counter() - started < 5
        assert str(caught.value).startswith(f"--judge-prompt {source}: ")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--judge-runs", "101", "--judge-runs must be a whole number from 1 to 100, got 101"),
        ("--judge-runs", "1000000000", "--judge-runs must be a whole number from 1 to 100"),
        ("--judge-runs", "0", "--judge-runs must be a whole number from 1 to 100, got 0"),
        ("--judge-temperature", "inf", "--judge-temperature must be a number from 0 to 2, got inf"),
        ("--judge-temperature", "nan", "--judge-temperature must be a number from 0 to 2, got nan"),
        ("--judge-temperature", "2.5", "--judge-temperature must be a number from 0 to 2"),
        ("--judge-temperature", "-0.5", "--judge-temperature must be a number from 0 to 2"),
    ],
)
def test_judge_runs_and_temperature_out_of_range_are_one_line(
    tmp_path, capsys, option, value, message
):
    out = tmp_path / "run"
    args = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    args += ["--judge", "offline", option, value, "--out", str(out), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("memory-lab: error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_run_json_names_each_prompt_by_file_and_hash_and_a_resume_grades_alike(tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text(MEM0_STYLE, "utf-8")
    mini = str(FIXTURES / "dialogues" / "mini.yaml")
    out = tmp_path / "run"
    run_benchmark(
        resolve_memories(["buffer", "window:k=1"]),
        load_dialogues(mini),
        out,
        judge="offline",
        judge_prompts=[str(mine)],
        sources=[mini],
        progress=False,
    )
    text = (out / "run.json").read_text("utf-8")
    prompts = json.loads(text)["judge"]["prompts"]
    assert [set(p) for p in prompts] == [{"label", "file", "sha256", "version", "placeholders"}]
    assert prompts[0]["file"] == str(mine)
    assert prompts[0]["sha256"] == hashlib.sha256(mine.read_bytes()).hexdigest()
    assert "Gold answer" not in text  # the file and its hash name the prompt, not its text
    # a resume reads the prompt from its file again and grades the redone cell alike
    records = read_records(out)
    first = next(i for i, r in enumerate(records) if r["type"] == "cell") + 1
    (out / "records.jsonl").write_text("".join(dump_record(r) for r in records[:first]), "utf-8")
    resume_benchmark(out, progress=False)
    again = read_records(out)
    assert [without_timings(r) for r in again] == [without_timings(r) for r in records]
    assert any(r.get("judge_verdicts") for r in again[first:])
