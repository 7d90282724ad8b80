"""What a judge of a finished run takes of it (its call cache, client settings and prices) and
its account in the results folder, read back for the summary: this run's only, read safely."""

from __future__ import annotations

import json
import os

import pytest

from memory_lab.models.accounting import Price
from memory_lab.results.judge_costs import (
    RunJudging,
    account_path,
    judge_costs,
    write_account,
)
from memory_lab.results.read import ResultsError
from memory_lab.scoring.judge import BUILTIN_TEMPLATE
from memory_lab.scoring.judge_core import Judge

from ..small_run import small_run  # noqa: F401 - a fixture


def _run_json(folder, **fields):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"run_id": "r1", **fields}), "utf-8")
    return folder


def _judge(calls=2):
    judge = Judge(object(), "openai:gpt-4o-mini", price=Price(0.15, 0.6), price_model="gpt-4o-mini")
    for _ in range(calls):
        judge.meter.add_llm(100, 10)
    return judge


def test_the_judge_takes_the_runs_cache_timeout_and_prices(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_LAB_MAX_RETRIES", "2")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"judge-9": {"input_per_mtok": 1.0}}}), "utf-8")
    config = {"request_timeout": 7.5, "prices_file": str(prices)}
    run = RunJudging.of(_run_json(tmp_path / "a", cache_dir="/x/cache", config=config))
    assert (run.run_id, run.cache_dir, run.client.timeout, run.client.max_retries) == (
        "r1",
        "/x/cache",
        7.5,
        2,
    )
    assert run.price("openai:judge-9") == (Price(1.0, 0.0), str(prices))
    assert run.price("openai:gpt-4o-mini") == (None, str(prices))  # not in the run's table
    prices.unlink()  # a table gone since: the bundled one
    assert run.price("openai:gpt-4o-mini") == (Price(0.15, 0.6), "memory_lab/data/prices.json")
    # a run made with --no-cache keeps its judge off the cache; one that names none: the default
    no_cache = _run_json(tmp_path / "b", config={"cache": False})
    assert RunJudging.of(no_cache).cache_dir is None
    monkeypatch.setenv("MEMORY_LAB_CACHE", str(tmp_path / "default"))
    assert RunJudging.of(_run_json(tmp_path / "c")).cache_dir == str(tmp_path / "default")


def test_an_account_is_read_back_for_its_run_only(tmp_path):
    folder = _run_json(tmp_path / "run")
    account = write_account(folder, "judge-cognitive", _judge(), [BUILTIN_TEMPLATE])
    assert account is not None and account.usage.llm_calls == 2
    (cost,) = judge_costs(folder)
    assert (cost.scorer, cost.judge, cost.calls, cost.input_tokens, cost.output_tokens) == (
        "judge-cognitive",
        "openai:gpt-4o-mini",
        2,
        200,
        20,
    )
    assert cost.prompt_sha256 == {"probe": BUILTIN_TEMPLATE.sha256}
    assert cost.est_cost_usd == pytest.approx((200 * 0.15 + 20 * 0.6) / 1e6)
    (folder / "run.json").write_text('{"run_id": "r2"}', "utf-8")
    assert judge_costs(folder) == []  # left by an earlier run in this folder
    assert write_account(folder, "judge-cognitive", None, []) is None
    assert not account_path(folder, "judge-cognitive").exists()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("[1]", "must hold an object"),
        ("{", "not valid JSON"),
        ('{"run_id": "r1", "judge": "j", "calls": -1}', "calls: must be a whole number"),
        (
            '{"run_id": "r1", "judge": "j", "prompt_sha256": {}, "calls": 1, "cache_hits": 0,'
            ' "input_tokens": 1, "output_tokens": 1, "est_cost_usd": "cheap"}',
            "est_cost_usd: must be null or a number",
        ),
    ],
)
def test_an_unreadable_account_is_one_line_naming_file_and_field(tmp_path, content, needle):
    folder = _run_json(tmp_path / "run")
    account_path(folder, "beam-scores").write_text(content, "utf-8")
    with pytest.raises(ResultsError) as caught:
        judge_costs(folder)
    assert needle in str(caught.value) and "beam-scores.judge.json" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_account_that_is_a_link_or_a_pipe_is_never_followed_or_waited_on(tmp_path):
    folder = _run_json(tmp_path / "run")
    outside = tmp_path / "elsewhere.json"
    outside.write_text("{}", "utf-8")
    account_path(folder, "beam-scores").symlink_to(outside)
    with pytest.raises(ResultsError, match="symbolic link"):
        judge_costs(folder)
    account_path(folder, "beam-scores").unlink()
    os.mkfifo(account_path(folder, "beam-scores"))
    with pytest.raises(ResultsError, match="FIFO"):
        judge_costs(folder)


def test_the_report_bills_the_judges_that_scored_the_run(small_run, tmp_path):  # noqa: F811
    """A real judge's tokens and cost, spent after the run, shown beside the memories' own."""
    import shutil

    from memory_lab.results.read import read_results
    from memory_lab.views.report import render_report

    folder = tmp_path / "run"
    shutil.copytree(small_run.path, folder)
    assert "judge of" not in render_report(read_results(folder))
    write_account(folder, "judge-cognitive", _judge(3), [BUILTIN_TEMPLATE])
    html = render_report(read_results(folder))
    assert (
        "judge of judge-cognitive: openai:gpt-4o-mini, 3 calls (0 from the cache), 300 tokens "
        "in, 30 out, est. $0.0001 (not in the table&#x27;s tokens)."
    ) in html
