"""LoCoMo-Plus import: seeded stitching, the cue as evidence, the gap in the dates, bad files,
and the Cognitive judge read from the user's copy. Fixtures are written here, in the dataset's
shape, with invented text (no dataset or prompt text is committed)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from memory_lab import load_dialogues
from memory_lab.benchmarks.locomo_plus.importer import gap_days, locomo_date
from memory_lab.dialogue.importers import import_source
from memory_lab.dialogue.model import DialogueError, parse_documents

HOSTS = ("conv-1", "conv-2", "conv-3")
DATES = ("10:00 am on 1 January, 2023", "10:00 am on 1 February, 2023", "10:00 am on 1 March, 2023")
SPEAKERS = {"conv-1": ("Ada", "Bo"), "conv-2": ("Cy", "Di"), "conv-3": ("Ed", "Flo")}


def _host(sample_id: str) -> dict:
    a, b = SPEAKERS[sample_id]
    conv = {"speaker_a": a, "speaker_b": b}
    for n, date in enumerate(DATES, 1):
        conv[f"session_{n}_date_time"] = date
        conv[f"session_{n}"] = [
            {"speaker": a, "dia_id": f"D{n}:1", "text": f"{a} talks about the garden, week {n}."},
            {"speaker": b, "dia_id": f"D{n}:2", "text": f"{b} answers about the kettle, week {n}."},
        ]
    return {"sample_id": sample_id, "conversation": conv, "qa": []}


def _sample(gap: str, n: int = 0) -> dict:
    return {
        "relation_type": "causal",
        "cue_dialogue": f"A: I gave up coffee for lent number {n}.\nB: Good luck with the tea.",
        "trigger_query": "A: This headache will not go away today.",
        "time_gap": gap,
    }


PROMPT_PY = '''raise SystemExit("prompt.py must be parsed, never run")
CONV_START_PROMPT = (
    "Two people, {} and {}, talk. "
    "Dates head each session.\\n\\n"
)
PROMPT_TEMPLATES = {
    "default": "{gold} {pred} {evidence}",
    "Cognitive": """
Does the reply remember the cue?
Cue:
{evidence}
Reply:
{pred}
Answer as JSON {{"label": "correct"|"wrong", "reason": "..."}}
""",
}
'''


def checkout(tmp_path: Path, samples: list[dict] | None = None, hosts=HOSTS) -> Path:
    """A Locomo-Plus checkout in the released layout, with invented text."""
    root = tmp_path / "Locomo-Plus"
    (root / "data").mkdir(parents=True)
    (root / "evaluation_framework" / "task_eval").mkdir(parents=True)
    gaps = ["two weeks later", "one year later", "several months later", "one week later"]
    samples = samples or [_sample(gaps[i % 4], i) for i in range(8)]
    (root / "data" / "locomo_plus.json").write_text(json.dumps(samples), "utf-8")
    (root / "data" / "locomo10.json").write_text(json.dumps([_host(h) for h in hosts]), "utf-8")
    (root / "evaluation_framework" / "task_eval" / "prompt.py").write_text(PROMPT_PY, "utf-8")
    return root


def test_hosts_are_drawn_by_the_recorded_seed_and_the_import_repeats(tmp_path):
    root = checkout(tmp_path)
    first = import_source("locomo-plus", root, {"seed": "7"})
    again = import_source("locomo-plus", root, {"seed": "7"})
    assert first.documents == again.documents
    rng = random.Random(7)  # build_conv.py: random.choice over the conversations, in order
    want = [rng.choice(HOSTS) for _ in range(8)]
    assert [d["metadata"]["host"] for d in first.documents] == want
    assert "drawn with seed 7" in first.report.text()
    hosts_by_seed = {
        s: [
            d["metadata"]["host"]
            for d in import_source("locomo-plus", root, {"seed": str(s)}).documents
        ]
        for s in range(4)
    }
    assert len({tuple(h) for h in hosts_by_seed.values()}) > 1  # the seed decides
    default = import_source("locomo-plus", root).documents
    assert [d["metadata"]["host"] for d in default] == hosts_by_seed[0]  # seed 0 by default
    cycle = import_source("locomo-plus", root, {"host": "cycle", "limit": "5"}).documents
    assert [d["metadata"]["host"] for d in cycle] == [HOSTS[i % 3] for i in range(5)]


def test_the_cue_turns_are_the_evidence_and_the_trigger_the_question(tmp_path):
    root = checkout(tmp_path)
    dialogues = load_dialogues(f"locomo-plus:{root}#host=cycle")  # validated as dialogues
    d = dialogues[0]  # hosted by conv-1: A is Ada (the user), B is Bo
    (probe,) = d.probes
    cue = next(s for s in d.sessions if s.id == "cue")
    assert [(t.role, t.text) for t in cue.turns] == [
        ("user", "Ada: I gave up coffee for lent number 0."),
        ("assistant", "Bo: Good luck with the tea."),
    ]
    assert probe.evidence == tuple(t.id for t in cue.turns)
    assert probe.question == "Ada: This headache will not go away today."
    assert probe.category == "cognitive" and probe.answers == ()
    assert probe.after == d.turns[-1].id  # asked at the end
    assert probe.metadata["judge_evidence"] == (
        "Ada：I gave up coffee for lent number 0.\nBo：Good luck with the tea."
    )
    assert probe.metadata["relation_type"] == "causal"
    assert dialogues[1].probes[0].question.startswith("Cy: ")  # conv-2's speakers


@pytest.mark.parametrize(
    ("gap", "days", "order", "cue_date"),
    [
        # the trigger is a week after the last session (8 March): the cue the gap before it
        ("two weeks later", 14, ["session-1", "session-2", "cue", "session-3"], "22 February"),
        ("one year later", 365, ["cue", "session-1", "session-2", "session-3"], "8 March, 2022"),
        ("several months later", 0, ["session-1", "session-2", "session-3", "cue"], "8 March"),
        ("one week later", 7, ["session-1", "session-2", "session-3", "cue"], "1 March"),  # tie
    ],
)
def test_the_time_gap_is_in_the_session_dates(tmp_path, gap, days, order, cue_date):
    root = checkout(tmp_path, [_sample(gap)])
    (doc,) = import_source("locomo-plus", root).documents
    assert [s["id"] for s in doc["sessions"]] == order
    cue = next(s for s in doc["sessions"] if s["id"] == "cue")
    assert cue_date in cue["date"] and cue["date"].startswith("10:00 am on ")
    meta = doc["probes"][0]["metadata"]
    assert (meta["time_gap"], meta["gap_days"]) == (gap, days)
    assert meta["query_date"] == "10:00 am on 8 March, 2023" and meta["cue_date"] == cue["date"]


def test_gap_days_reads_as_the_reference():
    assert gap_days("about six weeks later") == 42
    assert gap_days("a year after") == 365
    assert gap_days("3 months later") == 90
    assert gap_days("roughly three months later") == 90
    assert gap_days("several months later") == 0
    from datetime import datetime

    assert locomo_date(datetime(2023, 5, 8, 13, 56)) == "1:56 pm on 8 May, 2023"
    assert locomo_date(datetime(2023, 5, 8, 0, 5)) == "12:05 am on 8 May, 2023"


def test_lines_and_samples_it_cannot_use_are_reported_not_dropped(tmp_path):
    bad = _sample("two weeks later")
    bad["cue_dialogue"] = "A: Kept.\nNarrator: not a turn\nB: Also kept."
    empty = _sample("two weeks later")
    empty["trigger_query"] = "no speaker here"
    result = import_source("locomo-plus", checkout(tmp_path, [bad, empty]))
    assert len(result.documents) == 1
    reasons = dict(result.report.skipped)
    assert "Narrator" in reasons["sample 0 cue_dialogue"]
    assert "trigger_query" in reasons["sample 1"]
    assert "1 dialogue(s)" in result.report.text()


def _one_line_error(source: str) -> str:
    with pytest.raises(DialogueError) as info:
        load_dialogues(source)
    message = str(info.value).strip()
    assert "\n" not in message
    return message


def test_malformed_files_are_one_line_naming_the_file_and_the_field(tmp_path):
    root = checkout(tmp_path)
    plus = root / "data" / "locomo_plus.json"
    samples = json.loads(plus.read_text("utf-8"))
    samples[1]["trigger_query"] = 3
    plus.write_text(json.dumps(samples), "utf-8")
    message = _one_line_error(f"locomo-plus:{root}")
    assert str(plus) in message and "sample 1" in message and "trigger_query" in message

    plus.write_text("{not json", "utf-8")
    assert str(plus) in _one_line_error(f"locomo-plus:{root}")
    plus.write_text(json.dumps({"cue_dialogue": "A: hi"}), "utf-8")
    assert "must be a list" in _one_line_error(f"locomo-plus:{plus}")

    other = checkout(tmp_path / "b")
    hosts = other / "data" / "locomo10.json"
    data = json.loads(hosts.read_text("utf-8"))
    data[2]["conversation"]["session_2_date_time"] = "yesterday"
    hosts.write_text(json.dumps(data), "utf-8")
    message = _one_line_error(f"locomo-plus:{other}")
    assert str(hosts) in message and "conv-3" in message
    assert "conversation.session_2_date_time" in message

    hosts.unlink()
    message = _one_line_error(f"locomo-plus:{other}")
    assert str(hosts) in message and "locomo" in message
    elsewhere = tmp_path / "mine" / "locomo10.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps([_host("conv-2")]), "utf-8")
    named = load_dialogues(f"locomo-plus:{other}#locomo={elsewhere}")
    assert {d.metadata["host"] for d in named} == {"conv-2"}

    assert "holds no data/locomo_plus.json" in _one_line_error(f"locomo-plus:{tmp_path}")
    for option in ("seed=x", "seed=-1", "limit=0", "host=first", "colour=red"):
        assert "options" in _one_line_error(f"locomo-plus:{root}#{option}")


def test_a_cognitive_probe_is_checked_as_one(tmp_path):
    doc = import_source("locomo-plus", checkout(tmp_path, [_sample("one week later")])).documents[0]
    doc["probes"][0]["answers"] = ["tea"]
    _, problems = parse_documents([doc], "x.yaml")
    assert any("has no answers" in p.message for p in problems)
    doc["probes"][0].pop("answers")
    doc["probes"][0]["evidence"] = []
    _, problems = parse_documents([doc], "x.yaml")
    assert any("needs its evidence turns" in p.message for p in problems)


def test_a_run_measures_the_cue_by_evidence_recall_not_accuracy(tmp_path):
    from memory_lab.cli import main
    from memory_lab.results.read import read_results
    from memory_lab.results.summary import summarize, summarize_by_category
    from memory_lab.views.tables import format_category_table

    root = checkout(tmp_path)
    out = tmp_path / "run"
    source = f"locomo-plus:{root}#limit=4"
    args = ["run", "--dialogues", source, "--memory", "buffer", "--judge", "offline"]
    assert main([*args, "--out", str(out), "--quiet"]) == 0
    results = read_results(out)
    # the answer judge grades against accepted answers: it is not called for a cognitive probe
    assert results.probes["judge_calls"].fillna(0).eq(0).all()
    assert results.probes["judge_correct"].isna().all()
    row = summarize(results).set_index("memory").loc["buffer"]
    assert row["answerable"] == 4 and row["evidence_recall"] == 1.0  # a buffer keeps the cue
    assert math.isnan(row["accuracy"])  # nothing to match: judged against the cue instead
    table = summarize_by_category(results)
    cognitive = table[table["category"] == "cognitive"].iloc[0]
    assert cognitive["source_category"] == "relation_type=causal"
    assert math.isnan(cognitive["accuracy"]) and cognitive["evidence_recall"] == 1.0
    assert "evid-recall % by category" in format_category_table(table)
