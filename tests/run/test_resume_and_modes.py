"""--resume after a killed run, --concurrency, --mode live and --dry-run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark
from memory_lab.cli import main
from memory_lab.log.records import without_timings
from memory_lab.results.read import RECORDS_FILE

from ..conftest import FIXTURES

SOURCES = [str(FIXTURES / "dialogues"), "builtin:classic"]


def records(folder):
    rows = [json.loads(x) for x in (folder / RECORDS_FILE).read_text().splitlines() if x.strip()]
    return [without_timings(r) for r in rows]


# slow: the CLI run killed once; tests/log/test_faults.py kills runs at many points in the
# default run
@pytest.mark.slow
def test_a_killed_run_resumes_without_losing_or_duplicating_records(tmp_path):
    memories = ["buffer", "window:k=1", "summary"]
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "memory_lab.cli", "run", "--memory", *memories]
    cmd += ["--dialogues", *SOURCES, "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:  # kill once at least one cell is complete and the run is under way
        while time.monotonic() < deadline:
            path = out / RECORDS_FILE
            if path.exists() and path.read_text().count('"type": "cell"') >= 2:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    before = records(out)
    n_cells = len(memories) * len(load_dialogues(*SOURCES))
    assert 2 <= sum(r["type"] == "cell" for r in before) < n_cells  # killed mid-way
    assert json.loads((out / "run.json").read_text())["status"] == "running"

    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    after = records(out)
    keys = [
        (r["memory"], r["dialogue"], r["type"], r.get("turn_id") or r.get("probe_id"))
        + ((r["exchange"], r["role"]) if r["type"] == "usage" else ())
        for r in after
    ]
    assert len(keys) == len(set(keys))  # nothing duplicated
    fresh = run_benchmark(
        resolve_memories(memories),
        load_dialogues(*SOURCES),
        tmp_path / "fresh",
        sources=SOURCES,
        progress=False,
    )
    assert after == records(fresh.path)  # nothing lost: same as an uninterrupted run
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete" and info["resumed"][0]["cells_kept"] >= 2


# slow: test_parallel_and_limits runs every memory with --concurrency 4 against one at a time
@pytest.mark.slow
def test_concurrency_gives_the_same_records_as_one_at_a_time(tmp_path):
    memories = resolve_memories(["buffer", "vector", "summary_buffer"])
    dialogues = load_dialogues(*SOURCES)[:3]
    one = run_benchmark(memories, dialogues, tmp_path / "one", progress=False)
    three = run_benchmark(memories, dialogues, tmp_path / "three", concurrency=3, progress=False)
    assert records(one.path) == records(three.path)


def test_live_mode_saves_the_models_replies_not_the_script(tmp_path):
    dialogue = load_dialogues(FIXTURES / "dialogues")
    outcome = run_benchmark(
        resolve_memories(["buffer"]), dialogue, tmp_path / "live", mode="live", progress=False
    )
    turns = read_results(outcome.path).turns
    assert "reply" in turns and turns["reply"].notna().all()
    last_prompt = turns.sort_values("exchange")["prompt"].iloc[-1]
    assert "Nice to meet you, Jisoo!" not in last_prompt  # the scripted reply never entered
    assert f"AI: {turns.sort_values('exchange')['reply'].iloc[0]}" in last_prompt
    assert (
        json.loads((outcome.path / "run.json").read_text())["config"]["protocol"]["mode"] == "live"
    )


def test_dry_run_calls_no_provider_and_prices_the_requested_models(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a real call would fail without it
    out = tmp_path / "dry"
    args = ["run", "--memory", "summary", "vector", "--dialogues", str(FIXTURES / "dialogues")]
    args += ["--llm", "openai:gpt-4o", "--memory-llm", "openai:gpt-4o-mini", "--dry-run"]
    assert main([*args, "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "DRY RUN" in printed and "no provider was called" in printed
    total = re.search(
        r"DRY RUN total: ([\d,]+) tokens, est\. \$([\d.]+) for the whole run", printed
    )
    assert total, printed
    rows = pd.read_csv(out / "summary.csv")  # no judge: the roles add up to the summary
    assert int(total[1].replace(",", "")) == rows["total_tokens"].sum()
    assert abs(float(total[2]) - rows["est_cost_usd"].sum()) < 1e-4
    roles = [line.split()[0] for line in printed.splitlines() if line.startswith("  ")]
    assert roles[:3] == ["reader", "memory", "embeddings"], printed
    info = json.loads((out / "run.json").read_text())
    assert info["config"]["run"]["dry_run"] and info["config"]["models"]["llm"] == "openai:gpt-4o"
    assert info["pricing"]["llm_model"] == "gpt-4o"
    assert info["models"]["llm"] == "offline"
    assert read_results(out).turns["memory_tokens"].sum() > 0


def test_a_dry_run_with_a_judge_sends_no_request_and_prices_the_judge(
    tmp_path, capsys, monkeypatch
):
    """With a key set and a provider listening, a dry run with --judge sends it nothing: the
    judge is stood in for like every other model, and its tokens are on the estimate's own
    line, priced as the requested judge."""
    from ..models.openai_mock import OpenAIMock

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dry-run-must-not-send-this")
    out = tmp_path / "dry"
    args = ["run", "--memory", "buffer", "vector", "--dialogues", str(FIXTURES / "dialogues")]
    args += ["--llm", "openai:gpt-4o-mini", "--judge", "openai:gpt-4o-mini", "--dry-run"]
    with OpenAIMock() as mock:
        args += ["--base-url", mock.base_url, "--no-cache", "--out", str(out), "--quiet"]
        assert main(args) == 0
    assert mock.requests == []
    printed = capsys.readouterr().out
    judge = next(line for line in printed.splitlines() if line.startswith("  judge "))
    probes = read_results(out).probes
    judge_in = int(probes["judge_input_tokens"].sum())
    judge_out = int(probes["judge_output_tokens"].sum())
    assert judge_in > 0 and f"{judge_in:,} in" in judge, judge
    cost = (judge_in * 0.15 + judge_out * 0.6) / 1e6  # gpt-4o-mini's list price
    assert f"${cost:.4f}" in judge and "(gpt-4o-mini)" in judge, judge
    total = re.search(r"DRY RUN total: ([\d,]+) tokens, est\. \$([\d.]+)", printed)
    rows = pd.read_csv(out / "summary.csv")
    assert int(total[1].replace(",", "")) == rows["total_tokens"].sum() + judge_in + judge_out
    assert abs(float(total[2]) - rows["est_cost_usd"].sum() - cost) < 1e-4
    assert "judge=openai:gpt-4o-mini" in printed  # the models it stood in for
    info = json.loads((out / "run.json").read_text())  # the judge it executed, and the one asked
    assert info["judge"]["model"] == "offline"
    assert info["config"]["judge"]["model"] == "openai:gpt-4o-mini"


def test_judge_scores_sit_beside_string_matching(tmp_path, capsys):
    out = tmp_path / "judged"
    args = ["run", "--memory", "buffer", "window:k=1", "--dialogues", str(FIXTURES / "dialogues")]
    assert main([*args, "--judge", "offline", "--out", str(out), "--quiet"]) == 0
    probes = read_results(out).probes
    assert probes["judge_correct"].notna().all()
    assert (probes["judge_correct"] == probes["correct"]).all()  # the offline judge agrees
    assert (probes["judge_input_tokens"] > 0).all()
    summary = (out / "summary.csv").read_text().splitlines()[0]
    assert "judge_accuracy" in summary and "disagreement_rate" in summary
    info = json.loads((out / "run.json").read_text())
    assert info["judge"]["model"] == "offline" and len(info["judge"]["prompt_version"]) == 12
    assert "judge (offline)" in capsys.readouterr().out


def test_resume_with_jobs_discards_parts_left_by_a_killed_run(tmp_path):
    memories = ["buffer", "window:k=1", "window:k=2"]
    sources = [str(FIXTURES / "dialogues")]
    dialogues = load_dialogues(*sources)
    full = run_benchmark(
        resolve_memories(memories), dialogues, tmp_path / "full", sources=sources, progress=False
    )
    out = tmp_path / "killed"
    run_benchmark(resolve_memories(memories), dialogues, out, sources=sources, progress=False)
    lines = (out / RECORDS_FILE).read_text().splitlines(keepends=True)
    first_cell_end = next(i for i, x in enumerate(lines) if '"type": "cell"' in x)
    # killed while appending the second cell's part: it is half in records.jsonl, and parts of
    # the cells that were running are left behind
    (out / RECORDS_FILE).write_text("".join(lines[: first_cell_end + 5]))
    (out / "parts").mkdir()
    (out / "parts" / "cell-00000.jsonl").write_text("".join(lines[first_cell_end + 1 :][:7]))
    (out / "parts" / "cell-00001.jsonl").write_text(lines[0])
    assert main(["run", "--resume", str(out), "--jobs", "2", "--quiet"]) == 0
    assert records(out) == records(full.path)  # nothing lost, nothing twice
    assert not (out / "parts").exists()


def test_a_local_model_costs_nothing_and_the_cost_column_says_local(tmp_path, capsys, monkeypatch):
    """A model the price table does not know, on --base-url (vLLM, llama.cpp, LM Studio) or
    Ollama, was priced as gpt-4o-mini; it is local: 0, said so, unless --prices prices it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = ["run", "--memory", "summary", "--dialogues", str(FIXTURES / "dialogues" / "mini.yaml")]
    args += ["--llm", "openai:llama3.1", "--base-url", "http://127.0.0.1:9/v1", "--dry-run"]
    assert main([*args, "--out", str(tmp_path / "local"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    pricing = json.loads((tmp_path / "local" / "run.json").read_text())["pricing"]
    assert pricing["llm_model"] == pricing["embeddings_model"] == "local"
    assert pricing["llm"] == {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
    assert pd.read_csv(tmp_path / "local" / "summary.csv")["est_cost_usd"].sum() == 0
    row = next(line for line in printed.splitlines() if line.startswith("summary "))
    assert " local " in row and "costs nothing" in printed
    # priced by the user: an entry of their own table
    table = tmp_path / "prices.json"
    entries = {"llama3.1": {"input_per_mtok": 0.2}, "text-embedding-3-small": {"input_per_mtok": 0}}
    table.write_text(json.dumps({"models": entries}))
    assert main([*args, "--prices", str(table), "--out", str(tmp_path / "priced"), "--quiet"]) == 0
    capsys.readouterr()
    pricing = json.loads((tmp_path / "priced" / "run.json").read_text())["pricing"]
    assert pricing["llm_model"] == "llama3.1" and pricing["llm"]["input_per_mtok"] == 0.2
    # a model the table knows keeps its price on a --base-url proxy; Ollama's is local
    from memory_lab.models.accounting import load_prices
    from memory_lab.models.spec import ModelSpec
    from memory_lab.run.prepare import _price_entry

    prices = load_prices()
    url = "http://127.0.0.1:9/v1"
    assert _price_entry(ModelSpec.parse("openai:gpt-4o-mini"), url, prices, "x") == "gpt-4o-mini"
    assert _price_entry(ModelSpec.parse("ollama:qwen3"), None, prices, "x") == "local"
    assert _price_entry(ModelSpec.parse("offline"), None, prices, "gpt-4o-mini") == "gpt-4o-mini"
