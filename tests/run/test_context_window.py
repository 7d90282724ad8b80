"""--context-limit defaults to the answering model's window; records, summary and report say
what it cut; ``none`` lifts it; an unknown model has none; a resume keeps the recorded limit."""

from __future__ import annotations

import json

import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.errors import ConfigError
from memory_lab.log.config import RunConfig
from memory_lab.log.formats import migrate_run
from memory_lab.log.records import without_timings
from memory_lab.models import windows
from memory_lab.results.compare import differences
from memory_lab.results.read import RECORDS_FILE
from memory_lab.results.summary import summarize
from memory_lab.run.benchmark import resume_benchmark
from memory_lab.views.report import render_report
from memory_lab.views.tables import format_summary

from ..conftest import FIXTURES

MINI = str(FIXTURES / "dialogues" / "mini.yaml")
SMALL = 200  # a window the fixture dialogue's buffer outgrows


@pytest.fixture
def small_offline_window(monkeypatch):
    """The model table with the offline reader's window at ``SMALL`` tokens."""
    table = json.loads(json.dumps(windows._table()))
    table["offline"] = SMALL
    monkeypatch.setattr(windows, "_table", lambda: table)
    return monkeypatch


def run(out, memories=("buffer",), **settings):
    return run_benchmark(
        resolve_memories(list(memories)),
        load_dialogues(MINI),
        out,
        sources=[MINI],
        progress=False,
        **settings,
    )


def rows(folder):
    lines = (folder / RECORDS_FILE).read_text().splitlines()
    return [without_timings(json.loads(x)) for x in lines if x.strip()]


def test_the_default_limit_is_the_answering_models_window():
    assert RunConfig().window() == windows.ContextWindow(128_000, "model")  # the offline reader
    for model, window in [
        ("openai:gpt-4o-mini", 128_000),
        ("openai:gpt-4o-2024-08-06", 128_000),  # a snapshot: its family's window
        ("openai:gpt-4.1", 1_047_576),
        ("anthropic:claude-3-5-sonnet-latest", 200_000),
    ]:
        assert RunConfig(llm=model).window() == windows.ContextWindow(window, "model"), model
    for model in ("openai:llama3.1", "ollama:llama3.1", "openai:gpt-4o-mini-tts"):
        assert RunConfig(llm=model).window() == windows.ContextWindow(None, "unknown"), model
    assert RunConfig(context_limit=None).window() == windows.ContextWindow(None, "none")
    assert RunConfig(context_limit=500).window() == windows.ContextWindow(500, "given")
    # a config recorded before the default existed ran with the limit it recorded, or none
    old = migrate_run({"config": {}}, "run.json")["config"]  # format 1 (log/formats.py)
    assert RunConfig.from_json(old).window() == windows.ContextWindow(None, "none")
    for bad in (0, -3, 2.5, True, "big"):
        with pytest.raises(ConfigError, match="--context-limit must be"):
            RunConfig(context_limit=bad)


def test_the_option_takes_tokens_none_or_model():
    from memory_lab.cli import build_parser
    from memory_lab.cli.run_commands import run_config

    def limit(*given):
        return run_config(build_parser().parse_args(["run", *given])).window()

    assert limit() == windows.ContextWindow(128_000, "model")
    assert limit("--llm", "openai:gpt-4o") == windows.ContextWindow(128_000, "model")
    assert limit("--context-limit", "none") == windows.ContextWindow(None, "none")
    assert limit("--context-limit", "NONE") == windows.ContextWindow(None, "none")
    assert limit("--context-limit", "4000") == windows.ContextWindow(4000, "given")
    assert limit("--context-limit", "model") == windows.ContextWindow(128_000, "model")


@pytest.mark.parametrize("value", ["0", "-5", "12k", "1e5", ""])
def test_a_bad_context_limit_is_one_line_naming_the_option(tmp_path, capsys, value):
    argv = ["run", "--memory", "buffer", "--dialogues", MINI, "--context-limit", value]
    assert main([*argv, "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--context-limit must be a positive whole number" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_small_model_window_cuts_and_every_record_summary_and_report_says_so(
    tmp_path, small_offline_window
):
    cut = run(tmp_path / "cut")
    info = json.loads((cut.path / "run.json").read_text())
    assert (info["config"]["limits"]["context_limit"], info["context_limit_source"]) == (
        SMALL,
        "model",
    )  # recorded as the number it resolved to
    whole = run(tmp_path / "whole", context_limit=None)  # the same prompts, never cut
    assert json.loads((whole.path / "run.json").read_text())["context_limit_source"] == "none"
    limited, full = read_results(cut.path), read_results(whole.path)
    for kind in ("turns", "probes"):
        a, b = getattr(limited, kind), getattr(full, kind)
        assert a["truncated"].any() and not a["truncated"].all(), kind
        assert not b["truncated"].any() and (b["context_cut_tokens"] == 0).all(), kind
        # the tokens cut are what the uncut prompt held beyond the kept text
        assert (a["context_cut_tokens"] == b["context_tokens"] - a["context_tokens"]).all(), kind
        assert ((a["context_cut_tokens"] > 0) == a["truncated"]).all(), kind
    assert limited.probes["prompt_tokens"].max() <= SMALL

    row = summarize(limited).iloc[0]
    users = limited.turns[limited.turns["prompt_tokens"] > 0]
    assert row["prompts"] == len(users) + len(limited.probes)
    assert row["prompts_cut"] == users["truncated"].sum() + limited.probes["truncated"].sum()
    tokens = users["context_cut_tokens"].sum() + limited.probes["context_cut_tokens"].sum()
    assert row["context_cut_tokens"] == tokens > 0
    csv = (cut.path / "summary.csv").read_text().splitlines()
    assert "prompts_cut" in csv[0] and "context_cut_tokens" in csv[0]

    said = f"buffer: {row['prompts_cut']} of {row['prompts']} prompts cut, {tokens:,} tokens cut"
    table = format_summary(summarize(limited), limited.spec)
    assert f"context limit: {SMALL} tokens, the offline reader's emulated window" in table
    assert said in table and "truncated context" in table
    html = render_report(limited)
    assert said in html and f"{SMALL} tokens, the offline reader&#x27;s emulated window" in html
    compared = dict(differences([limited, full], ["cut", "whole"]))["context limit"]
    assert compared == {
        "cut": f"{SMALL} tokens, the offline reader's emulated window",
        "whole": "none (--context-limit none)",
    }
    lifted = format_summary(summarize(full), full.spec)
    assert "context limit: none (--context-limit none); no prompt was cut." in lifted


def test_an_unknown_model_has_no_default_limit_and_a_dry_run_takes_the_requested_window(
    tmp_path,
):
    unknown = run(tmp_path / "unknown", llm="openai:my-local-model", dry_run=True)
    info = json.loads((unknown.path / "run.json").read_text())
    assert (info["config"]["limits"]["context_limit"], info["context_limit_source"]) == (
        None,
        "unknown",
    )
    results = read_results(unknown.path)
    table = format_summary(summarize(results), results.spec)
    assert "context limit: none: the window of openai:my-local-model is not known" in table
    known = run(tmp_path / "known", llm="openai:gpt-4.1-mini", dry_run=True)
    info = json.loads((known.path / "run.json").read_text())
    assert (info["config"]["limits"]["context_limit"], info["context_limit_source"]) == (
        1_047_576,
        "model",
    )


def test_old_records_without_the_tokens_cut_still_read(tmp_path):
    outcome = run(tmp_path / "r", context_limit=SMALL)
    path = outcome.path / RECORDS_FILE
    old = [json.loads(x) for x in path.read_text().splitlines()]
    for record in old:
        record.pop("context_cut_tokens", None)
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    results = read_results(outcome.path)
    row = summarize(results).iloc[0]
    assert row["prompts_cut"] > 0 and row["context_cut_tokens"] != row["context_cut_tokens"]
    assert "tokens cut not recorded" in format_summary(summarize(results), results.spec)


def drop_last_cell(folder):
    """Leave the run as a kill after its first cell would: the second cell's records gone."""
    lines = (folder / RECORDS_FILE).read_text().splitlines(keepends=True)
    first_end = next(i for i, x in enumerate(lines) if json.loads(x)["type"] == "cell")
    (folder / RECORDS_FILE).write_text("".join(lines[: first_end + 1]))


def test_a_resume_keeps_the_limit_its_run_recorded(tmp_path, small_offline_window):
    memories = ("window:k=3", "buffer")  # buffer, whose prompts the window cuts, runs second
    outcome = run(tmp_path / "r", memories)
    before = rows(outcome.path)
    assert any(r.get("context_cut_tokens") for r in before)
    small_offline_window.undo()  # today's table: the offline reader's 128K again
    assert RunConfig().window().limit == 128_000
    drop_last_cell(outcome.path)
    resumed = resume_benchmark(outcome.path, progress=False)
    assert resumed.failed_cells == 0 and rows(outcome.path) == before


def test_an_old_run_without_a_recorded_limit_resumes_with_none(tmp_path):
    """A run.json from before the window default (config context_limit null, no source, no
    checksum for it) resumes with no limit, as it ran."""
    outcome = run(tmp_path / "r", ("window:k=3", "buffer"), context_limit=None)
    before = rows(outcome.path)
    run_file = outcome.path / "run.json"
    info = json.loads(run_file.read_text())
    del info["context_limit_source"], info["config_sha256"]["context_limit_source"]
    run_file.write_text(json.dumps(info))
    drop_last_cell(outcome.path)
    assert resume_benchmark(outcome.path, progress=False).failed_cells == 0
    assert rows(outcome.path) == before
    assert "context_limit_source" not in json.loads(run_file.read_text())  # none added
