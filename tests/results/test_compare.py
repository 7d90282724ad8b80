"""Several runs at once: finding them, combining them, the comparison page, and the report's
headline, contents, hidden empty columns and notes (issue 33 items 1 and 2)."""

from __future__ import annotations

import json
import math
import shutil
from html import escape

import pandas as pd
import pytest

from memory_lab.cli import main
from memory_lab.results.compare import combine, compare_summary, find_runs, run_names
from memory_lab.results.pairs import paired_comparison
from memory_lab.results.read import read_results
from memory_lab.results.standings import run_facts
from memory_lab.results.summary import recall_probes
from memory_lab.scoring.metrics import RunFacts, lead_metric, metric
from memory_lab.views.headline import headline, recall_line
from memory_lab.views.report import CONVERSATIONAL_NOTE, render_report

from ..conftest import FIXTURES
from ..small_run import SMALL_MEMORIES, small_run  # noqa: F401 - a fixture

MINI = str(FIXTURES / "dialogues" / "mini.yaml")


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    """mini.yaml through two memories, short answers, graded by the offline judge."""
    out = tmp_path_factory.mktemp("judged") / "judged"
    argv = ["run", "--memory", "buffer", "window:k=1", "--dialogues", MINI, "--judge", "offline"]
    argv += ["--answer-style", "short", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    return read_results(out)


def test_find_runs_lists_nested_folders_with_unique_names(small_run, judged_run, tmp_path):  # noqa: F811
    root = tmp_path / "results"
    for i, source in enumerate((small_run.path, judged_run.path)):
        shutil.copytree(source, root / f"group{i}" / "run")
    runs = find_runs([root])
    assert [r.name for r in runs] == ["group0/run", "group1/run"]
    first, second = runs
    assert first.status == "complete" and first.memories == SMALL_MEMORIES
    assert first.dialogues == 2 and first.probes == len(small_run.probes) // len(SMALL_MEMORIES)
    assert second.models["judge"] == "offline" and second.answer_style == "short"
    assert "judge" not in first.models
    # a results folder given directly is itself; twice is once
    assert [r.key for r in find_runs([root / "group0" / "run", root / "group0"])] == [
        str(root / "group0" / "run")
    ]


def test_find_runs_refuses_a_missing_or_empty_folder_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^.*/nope: no such folder$"):
        find_runs([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty: no results folder"):
        find_runs([tmp_path / "empty"])


def test_a_broken_run_json_is_listed_as_unreadable(small_run, tmp_path):  # noqa: F811
    broken = tmp_path / "broken"
    shutil.copytree(small_run.path, broken)
    (broken / "run.json").write_text("{not json", "utf-8")
    (entry,) = find_runs([broken])
    assert entry.status == "unreadable" and "run.json" in entry.error


def test_run_names_add_parents_only_when_needed(tmp_path):
    names = run_names([tmp_path / "a" / "run", tmp_path / "b" / "run", tmp_path / "c"])
    assert names == ["a/run", "b/run", f"{tmp_path.name}/c"]
    assert run_names([tmp_path / "x", tmp_path / "y"]) == ["x", "y"]


def test_combine_labels_memories_by_run_and_pairs_shared_probes(small_run, judged_run):  # noqa: F811
    runs, names = [small_run, judged_run], ["small", "judged"]
    combined = combine(runs, names)
    assert combined.memory_order() == [f"small/{m}" for m in SMALL_MEMORIES] + [
        "judged/buffer",
        "judged/window:k=1",
    ]
    assert len(combined.probes) == len(small_run.probes) + len(judged_run.probes)
    pairs = paired_comparison(combined)
    across = pairs[(pairs["memory_a"] == "small/buffer") & (pairs["memory_b"] == "judged/buffer")]
    # mini.yaml's probes are shared; the Korean dialogue is only in the small run; paired over
    # the probes recall is over (its abstention probe is not)
    assert int(across.iloc[0]["probes"]) == len(recall_probes(judged_run)) // 2 == 3
    # each run's own summary: the small run has no judge, the judged one does
    summary = compare_summary(runs, names).set_index("memory")
    assert math.isnan(summary.loc["small/buffer", "judge_accuracy"])
    assert summary.loc["judged/buffer", "judge_accuracy"] >= 0
    mine = read_results(small_run.path)
    assert summary.loc["small/buffer", "accuracy"] == pytest.approx(
        mine.probes[(mine.probes.memory == "buffer") & (mine.probes.category != "abstention")][
            "correct"
        ].mean()
    )


def test_combine_never_pairs_a_dialogue_whose_content_changed(small_run, tmp_path):  # noqa: F811
    changed = tmp_path / "changed"
    shutil.copytree(small_run.path, changed)
    run = json.loads((changed / "run.json").read_text("utf-8"))
    for entry in run["dialogues"]:
        entry["sha256"] = "0" * 64
    (changed / "run.json").write_text(json.dumps(run), "utf-8")
    combined = combine([small_run, read_results(changed)], ["before", "after"])
    assert set(combined.probes["dialogue"]) == {
        f"{d}@{name}" for d in small_run.probes["dialogue"].unique() for name in ("before", "after")
    }
    pairs = paired_comparison(combined)
    across = pairs[
        pairs["memory_a"].str.startswith("before") & pairs["memory_b"].str.startswith("after")
    ]
    assert (across["probes"] == 0).all()


def summary_of(rows):
    return pd.DataFrame(rows)


def test_the_headline_names_the_best_and_those_within_its_interval():
    summary = summary_of(
        [
            {"memory": "a", "accuracy": 0.8, "accuracy_low": 0.7, "accuracy_high": 0.88},
            {"memory": "b", "accuracy": 0.75, "accuracy_low": 0.65, "accuracy_high": 0.83},
            {"memory": "c", "accuracy": 0.3, "accuracy_low": 0.2, "accuracy_high": 0.4},
        ]
    )
    line = recall_line(summary, pd.DataFrame())  # no shared probes: by a's Wilson interval
    assert line.startswith("Recall: a 80.0% [95% CI 70.0%–88.0%]")
    assert "not distinguishable from it at 95%: b 75.0%." in line and "c 30.0%" not in line
    pairs = pd.DataFrame(  # on shared probes a is ahead of b: the paired interval excludes 0
        [
            {
                "memory_a": "b",
                "memory_b": "a",
                "probes": 50,
                "difference": -0.05,
                "ci_low": -0.09,
                "ci_high": -0.01,
            }
        ]
    )
    assert recall_line(summary, pairs).endswith("; ahead of every other memory at 95%.")


def test_report_leads_with_the_answer_and_a_table_of_contents(small_run):  # noqa: F811
    html = render_report(small_run)
    order = [
        html.index(s)
        for s in (
            'id="headline"',
            'id="toc"',
            'id="summary"',
            'id="charts"',
            'id="metrics"',
            'id="probes-section"',
        )
    ]
    assert order[1] < order[0] < order[2] < order[3] < order[4] < order[5]  # charts before tables
    toc = html.split('<nav id="toc">')[1].split("</nav>")[0]
    for anchor in ("#headline", "#summary", "#charts", "#pairs", "#metrics", "#probes-section"):
        assert f'href="{anchor}"' in toc
    summary = read_results(small_run.path)
    from memory_lab.results.summary import summarize

    table = summarize(summary)
    facts = run_facts([summary], table)
    for line in headline(table, paired_comparison(small_run), facts):
        assert escape(line) in html or line.replace("&", "&amp;") in html or line in html
    assert "Cost frontier by evidence recall" in html


FOUR = [  # a memory that answers well and retrieves badly, and three others
    {"memory": "a", "accuracy": 0.8, "accuracy_low": 0.7, "accuracy_high": 0.88,
     "evidence_recall": 0.30, "judge_accuracy": 0.5, "judge_accuracy_sd": 0.01,
     "total_tokens": 1000},
    {"memory": "b", "accuracy": 0.5, "accuracy_low": 0.4, "accuracy_high": 0.6,
     "evidence_recall": 0.90, "judge_accuracy": 0.9, "judge_accuracy_sd": 0.01,
     "total_tokens": 900},
    {"memory": "c", "accuracy": 0.2, "accuracy_low": 0.1, "accuracy_high": 0.3,
     "evidence_recall": 0.60, "judge_accuracy": 0.2, "judge_accuracy_sd": 0.01,
     "total_tokens": 500},
]  # fmt: skip


def test_with_the_offline_reader_the_answer_ranks_by_evidence_recall_not_recall():
    """On BEAM the offline reader scored every memory 5.6% while evidence recall ran from 31%
    to 63%: recall must not lead, name a best memory or draw the cost frontier there."""
    offline = RunFacts(real_answering_model=False, real_judge=False, evidence=True)
    lines = headline(summary_of(FOUR), pd.DataFrame(), offline)
    assert lines[0] == "Evidence recall (retrieval; no interval): b 90.0%."
    assert not any(line.startswith(("Recall:", "J:", "F1")) for line in lines)
    assert any("offline reader's" in line and "ranks nothing" in line for line in lines)
    assert lines[-1].startswith("Cost frontier by evidence recall")
    assert "b (900 tokens, 90.0%)" in lines[-1] and "a (" not in lines[-1]


def test_with_a_real_model_recall_leads_and_with_a_real_judge_j_leads():
    real = RunFacts(real_answering_model=True, real_judge=False, evidence=True)
    lines = headline(summary_of(FOUR), pd.DataFrame(), real)
    assert lines[0].startswith("Recall: a 80.0%") and lines[1].startswith("Evidence recall")
    assert not any(line.startswith("J:") for line in lines)  # no real judge: J is no figure
    assert lines[-1].startswith("Cost frontier by recall") and "a (1,000 tokens" in lines[-1]
    judged = RunFacts(real_answering_model=True, real_judge=True, evidence=True)
    lines = headline(summary_of(FOUR), pd.DataFrame(), judged)
    assert lines[0].startswith("J: b 90.0%") and lines[1].startswith("Recall: a")
    assert lines[-1].startswith("Cost frontier by J (no other memory has both higher J")


def test_the_lead_is_the_first_declared_figure_the_run_can_measure():
    no_evidence = RunFacts(real_answering_model=False, real_judge=False, evidence=False)
    assert lead_metric(no_evidence) is None
    assert lead_metric(RunFacts(False, False, True)).name == "evidence_recall"
    assert lead_metric(RunFacts(True, False, True)).name == "accuracy"
    assert lead_metric(RunFacts(True, True, True)).name == "judge_accuracy"
    # a judged run whose summary has no J yet: recall leads
    assert lead_metric(RunFacts(True, True, True), {"accuracy"}).name == "accuracy"
    assert metric("stale_rate").higher_is_better is False
    assert metric("accuracy").missing(RunFacts(False, False, True)) == ["a real answering model"]


def test_columns_with_no_data_are_hidden_and_named(small_run):  # noqa: F811
    html = render_report(small_run)  # no judge: J is empty everywhere
    metrics = html.split("id=metrics>")[1].split("</table>")[0]
    assert "<th>J</th>" not in metrics and "<th>F1 LoCoMo</th>" in metrics
    assert "No data, so not shown: J" in html


def test_conversational_scores_are_explained_and_short_answers_named(small_run, judged_run):  # noqa: F811
    assert escape(CONVERSATIONAL_NOTE) in render_report(small_run)
    assert "--answer-style short" in CONVERSATIONAL_NOTE
    assert "Low by construction" not in render_report(judged_run)  # short answers


def test_the_summary_note_is_the_price_note_when_a_judge_is_used(judged_run):
    """A review finding: the note under the HTML summary was the last line of the terminal
    table, which with a judge is the κ legend."""
    html = render_report(judged_run)
    section = html.split('id="summary"')[1].split("<h2")[0]
    notes = [n.split("</p>")[0] for n in section.split("<p class=note>")[1:]]
    assert any(
        n.startswith("est. cost is an estimate: LLM tokens priced as gpt-4o-mini") for n in notes
    )
    assert any(n.startswith("recall and abstain are the offline reader&#x27;s") for n in notes)
    assert not any("κ" in n or "kappa" in n for n in notes)
    assert "J is the offline judge" in html


def test_cli_report_of_several_folders_writes_one_comparison(
    small_run,  # noqa: F811
    judged_run,
    tmp_path,
    capsys,
):
    out = tmp_path / "both.html"
    argv = ["report", str(small_run.path), str(judged_run.path), "--out", str(out)]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == f"report: {out}"
    html = out.read_text("utf-8")
    assert f"memory-lab comparison — {small_run.path.name}, {judged_run.path.name}" in html
    for memory in SMALL_MEMORIES:
        assert f"<td>{small_run.path.name}/{memory}</td>" in html
    assert f"<td>{judged_run.path.name}/window:k=1</td>" in html
    assert "Settings that differ between the runs" in html and html.count("<img class=chart") == 6
    assert f'id="run-{judged_run.path.name}"' in html
    assert not (small_run.path / "both.html").exists()
    assert main(["report", str(small_run.path), "--out", str(out)]) == 2
    assert "--out is for a comparison of several folders" in capsys.readouterr().err
