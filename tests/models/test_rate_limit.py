"""``run --rpm/--tpm``: one bucket shared by threads and processes keeps a run under a provider's
limit, a 429 is waited out for its Retry-After (and pauses everyone) and counted, bad values are
one-line errors, and the limits survive ``--resume`` (``models/rate_limit.py``, ``throttle.py``).

Timings are checked with tolerances (a loaded machine wakes threads late, never early)."""

from __future__ import annotations

import email.utils
import json
import multiprocessing
import threading
import time

import pytest

from memory_lab.cli import main
from memory_lab.errors import ConfigError
from memory_lab.log.config import RunConfig
from memory_lab.log.run_spec import RunSpec
from memory_lab.models.providers import (
    client_settings,
    provider_chat_model,
    provider_embeddings,
    use_client_settings,
)
from memory_lab.models.rate_limit import (
    FileBucket,
    RateLimits,
    parse_rates,
    retry_after,
)
from memory_lab.models.spec import ClientSettings
from memory_lab.models.throttle import Throttle, estimate_tokens

from ..fault_runs import write_dialogues
from .openai_mock import OpenAIMock

SLACK = 0.12  # seconds a request may arrive early against its slot (HTTP and thread jitter)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # the client settings threads set (use_client_settings) end with the test
    monkeypatch.setattr("memory_lab.models.providers._ACTIVE", None)


def settings(tmp_path, rpm=None, tpm=None, retries=0) -> ClientSettings:
    limits = RateLimits.of(rpm, tpm, str(tmp_path / "bucket.json"))
    return ClientSettings(10.0, retries, limits)


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


# -- the setting ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "value"),
    [(["600"], 600), (["0.5"], 0.5), (["openai=600"], {"openai": 600}), (["1e3"], 1000.0)],
)
def test_rates_parse_as_numbers_or_per_provider(given, value):
    assert parse_rates(given, "--rpm") == value
    config = RunConfig(rpm=value)
    assert config.to_json()["limits"]["rpm"] == value


@pytest.mark.parametrize("bad", ["0", "-5", "abc", "nan", "inf", "openai=0", "foo=5", "=5"])
def test_a_bad_rpm_is_a_one_line_error_before_anything_runs(bad, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--dry-run", "--rpm", bad, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("memory-lab: error: --rpm")
    assert repr(bad) in err or "unknown provider 'foo'" in err
    assert not out.exists()


def test_a_run_without_limits_writes_no_rpm_key_and_is_unchanged():
    limits = RunConfig().to_json()["limits"]
    assert "rpm" not in limits and "tpm" not in limits
    assert RunConfig.from_json(RunConfig(rpm=60).to_json()).rpm == 60
    with pytest.raises(ConfigError, match="--tpm must be a positive number"):
        RunConfig(tpm=-1)


def test_retry_after_reads_milliseconds_seconds_and_http_dates():
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "2"}) == 2.0
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after({"retry-after": date}, now=1_000_000.0) == pytest.approx(30.0)
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_a_chat_request_is_estimated_as_its_prompt_and_its_output_budget():
    body = {"messages": [{"role": "user", "content": "hello there " * 50}], "max_tokens": 100}
    prompt = estimate_tokens({**body, "max_tokens": 1}) - 1
    assert 100 <= prompt <= 110  # 100 tokens of text and one message's overhead
    assert estimate_tokens(body) == prompt + 100
    assert estimate_tokens({"input": ["one two", "three"]}) == 3


# -- the bucket -----------------------------------------------------------------------------


def test_the_bucket_spaces_requests_and_a_pause_holds_every_key(tmp_path):
    bucket = FileBucket(tmp_path / "b.json")
    delays = [bucket.reserve([("openai:rpm", 2.0, 1.0)]) for _ in range(4)]
    assert delays[0] == pytest.approx(0.0, abs=0.05)
    assert delays[3] == pytest.approx(1.5, abs=0.05)  # 0.5 s apart at 120 a minute
    bucket.pause(["openai:rpm", "openai:tpm"], 5.0)
    assert bucket.reserve([("openai:tpm", 1000.0, 1.0)]) == pytest.approx(5.0, abs=0.05)
    stats = bucket.stats()
    assert stats["requests"] == 5 and stats["responses_429"] == 1
    bucket.settle("openai:tpm", 1000.0, 1000.0)  # 1,000 tokens given back: one second sooner
    assert bucket.reserve([("openai:tpm", 1000.0, 1.0)]) == pytest.approx(4.0, abs=0.05)


def _calls(n: int, url: str, client: ClientSettings) -> None:
    use_client_settings(client)
    model = provider_chat_model("openai:gpt-4o-mini", base_url=url)
    for _ in range(n):
        model.invoke("hi")


def test_threads_share_the_bucket_and_the_provider_never_refuses(tmp_path):
    client = settings(tmp_path, rpm=120)
    with OpenAIMock(delay=0.05, rpm=120) as mock:  # a provider enforcing the same limit
        threads = [
            threading.Thread(target=_calls, args=(1, mock.base_url, client)) for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    served = mock.served()
    assert len(served) == 8 and mock.throttled == 0
    assert min(gaps(served)) >= 0.5 - SLACK  # 120 a minute: one every 0.5 s
    assert served[-1] - served[0] >= 7 * 0.5 - SLACK  # 8 requests take 3.5 s, not 50 ms
    assert FileBucket(tmp_path / "bucket.json").stats()["requests"] == 8


def test_without_the_limit_the_same_calls_are_refused(tmp_path):
    """The control: the mock does enforce its limit (the test above could fail)."""
    with OpenAIMock(delay=0.05, rpm=120) as mock, client_settings(ClientSettings(10.0, 0)):
        model = provider_chat_model("openai:gpt-4o-mini", base_url=mock.base_url)
        model.invoke("warm")  # the first call's imports out of the way: the 8 arrive at once
        errors = []

        def call():
            try:
                model.invoke("hi")
            except Exception as exc:  # noqa: BLE001 - the 429, raised without retries
                errors.append(exc)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    assert mock.throttled >= 4 and len(errors) == mock.throttled


def test_processes_share_the_bucket(tmp_path):
    client = settings(tmp_path, rpm=120)
    fork = multiprocessing.get_context("fork")
    with OpenAIMock(delay=0.05) as mock:
        workers = [fork.Process(target=_calls, args=(4, mock.base_url, client)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(30)
        assert [w.exitcode for w in workers] == [0, 0]
    served = mock.served()
    assert len(served) == 8
    assert min(gaps(served)) >= 0.5 - SLACK
    assert served[-1] - served[0] >= 7 * 0.5 - SLACK


def test_tokens_a_minute_hold_requests_back_and_usage_settles_them(tmp_path):
    # 6,000 tokens a minute = 100 a second; each request is estimated at its prompt plus
    # max_tokens 400 (4 s of the bucket), and the mock's usage (118 tokens) settles it
    client = settings(tmp_path, tpm=6000)
    with OpenAIMock() as mock, client_settings(client):
        model = provider_chat_model("openai:gpt-4o-mini", base_url=mock.base_url)
        model = model.bind(max_tokens=400)
        started = time.monotonic()
        for _ in range(3):
            model.invoke("hi")
        elapsed = time.monotonic() - started
    served = mock.served()
    assert len(served) == 3
    # each request holds the bucket 118 tokens / 100 a second = 1.18 s once settled
    assert 1.18 - SLACK <= min(gaps(served)) and max(gaps(served)) <= 1.18 + 1.0
    assert elapsed < 6  # unsettled, the estimates alone would hold it 8 s


def test_embeddings_wait_for_the_bucket_too(tmp_path):
    with OpenAIMock() as mock, client_settings(settings(tmp_path, rpm=240)):
        embeddings = provider_embeddings("openai:text-embedding-3-small", base_url=mock.base_url)
        for text in ("a", "b", "c"):
            embeddings.embed_query(text)
    served = mock.served()
    assert len(served) == 3 and min(gaps(served)) >= 0.25 - SLACK


# -- a 429 --------------------------------------------------------------------------------


def test_a_429_is_waited_out_for_its_retry_after_and_counted(tmp_path):
    client = settings(tmp_path, rpm=6000, retries=2)
    with OpenAIMock() as mock, client_settings(client):
        refusal = (429, '{"error": {"message": "slow down"}}', {"retry-after": "1"})
        mock.scripts["chat"].append(refusal)
        model = provider_chat_model("openai:gpt-4o-mini", base_url=mock.base_url)
        started = time.monotonic()
        assert model.invoke("hi").content == "Mock reply."
        elapsed = time.monotonic() - started
    statuses = [r["status"] for r in mock.requests]
    assert statuses == [429, 200]
    assert mock.requests[1]["at"] - mock.requests[0]["at"] >= 1.0 - SLACK
    assert elapsed >= 1.0 - SLACK
    stats = FileBucket(tmp_path / "bucket.json").stats()
    assert stats["responses_429"] == 1 and stats["requests"] == 2  # the retry waited too
    assert stats["paused_seconds"] == pytest.approx(1.0)


def test_a_provider_over_its_limit_is_waited_out_by_every_caller(tmp_path):
    client = settings(tmp_path, rpm=6000, retries=3)  # ours far above the provider's 60
    with OpenAIMock(rpm=60, burst=1, retry_after_ms=True) as mock:
        threads = [
            threading.Thread(target=_calls, args=(1, mock.base_url, client)) for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    served = mock.served()
    assert len(served) == 2 and mock.throttled >= 1
    assert served[1] - served[0] >= 1.0 - SLACK  # one a second, as the provider allows
    stats = FileBucket(tmp_path / "bucket.json").stats()
    assert stats["responses_429"] == mock.throttled
    assert stats["requests"] == 2 + mock.throttled


def test_a_429_pauses_other_threads_for_its_retry_after(tmp_path):
    client = settings(tmp_path, rpm=6000, retries=1)
    throttle = Throttle(client.limits, "openai")
    throttle.throttled({"retry-after-ms": "800"})
    started = time.monotonic()
    slept = throttle.wait()
    assert slept == pytest.approx(0.8, abs=0.1) and time.monotonic() - started >= 0.7


# -- a run ------------------------------------------------------------------------------------


def test_a_run_keeps_its_limit_reports_its_429s_and_resumes_with_it(tmp_path, capsys):
    dialogues = write_dialogues(tmp_path / "dialogues") + "/cafe.yaml"
    out = tmp_path / "run"
    with OpenAIMock(delay=0.02) as mock:
        mock.scripts["chat"].append((429, '{"error": {}}', {"retry-after": "1"}))
        argv = ["run", "--memory", "buffer", "--dialogues", dialogues, "--llm"]
        argv += ["openai:gpt-4o-mini", "--base-url", mock.base_url, "--no-cache", "--quiet"]
        argv += ["--concurrency", "4", "--rpm", "600", "--tpm", "1000000", "--out", str(out)]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        served = mock.served()
        resume = ["run", "--resume", str(out), "--base-url", mock.base_url, "--quiet"]
        assert main([*resume, "--rpm", "openai=1200"]) == 0  # a resume may change the limits
        capsys.readouterr()
    assert len(served) >= 2 and min(gaps(served)) >= 0.1 - SLACK  # 600 a minute
    info = json.loads((out / "run.json").read_text("utf-8"))
    assert info["config"]["limits"]["rpm"] == 600  # as recorded: the resume changed no record
    counts = info["rate_limits"]
    assert counts["rpm"] == {"openai": 1200}  # the resume's execution: no request left to send
    assert counts["requests"] == 0 and len(info["resumed"]) == 1
    assert len(mock.requests) == len(served) + 1  # the refused one, counted in the line too
    assert f"limits:  600 rpm; 1,000,000 tpm: {len(served) + 1} requests, 1 answered 429" in printed

    spec = RunSpec.load(out).resumed()
    assert spec.run_config.rpm == 600 and spec.run_config.tpm == 1_000_000
    assert spec.client.limits.rate("rpm", "openai") == 600
    assert spec.client.limits.file == str((out / ".rate-limits.json").resolve())
    faster = RunSpec.load(out).resumed(rpm={"openai": 1200})
    assert faster.client.limits.rate("rpm", "openai") == 1200 and faster.config.rpm == 600


def test_a_dry_run_has_no_bucket_and_calls_no_provider(tmp_path):
    with OpenAIMock() as mock:
        dialogues = write_dialogues(tmp_path / "dialogues") + "/cafe.yaml"
        argv = ["run", "--memory", "buffer", "--dialogues", dialogues, "--dry-run"]
        argv += ["--llm", "openai:gpt-4o-mini", "--base-url", mock.base_url, "--quiet"]
        assert main([*argv, "--rpm", "60", "--out", str(tmp_path / "dry")]) == 0
    assert mock.requests == []
    spec = RunSpec.load(tmp_path / "dry")
    assert spec.config.rpm == 60 and spec.client.limits is None
    assert not (tmp_path / "dry" / ".rate-limits.json").exists()


@pytest.mark.slow  # a local Ray: its start alone takes longer than this file's other tests
def test_ray_tasks_share_the_runs_bucket_actor(tmp_path):
    pytest.importorskip("ray")
    dialogues = write_dialogues(tmp_path / "dialogues")  # two dialogues: two cells, two tasks
    out = tmp_path / "ray"
    with OpenAIMock(delay=0.02, rpm=120) as mock:
        argv = ["run", "--memory", "buffer", "--dialogues", dialogues, "--executor", "ray"]
        argv += ["--llm", "openai:gpt-4o-mini", "--base-url", mock.base_url, "--no-cache"]
        argv += ["--jobs", "2", "--rpm", "120", "--quiet", "--out", str(out)]
        assert main(argv) == 0
    served = mock.served()
    assert len(served) >= 4 and mock.throttled == 0
    assert min(gaps(served)) >= 0.5 - SLACK  # both tasks' requests spaced by one bucket
    counts = json.loads((out / "run.json").read_text("utf-8"))["rate_limits"]
    assert counts["requests"] == len(served)  # the actor's counts, handed to the run folder
    assert json.loads((out / ".rate-limits.json").read_text())["tat"] == {}  # no task used it
