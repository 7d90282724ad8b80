"""The HTML report: paired statistics, one self-contained file, and a real headless browser."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from html import escape
from pathlib import Path

import pytest

from memory_lab.cli import main
from memory_lab.results.pairs import paired_comparison
from memory_lab.results.summary import recall_probes, summarize, summarize_by_category
from memory_lab.views.report import REPORT_FILE, write_report

from ..conftest import FIXTURES
from ..small_run import SMALL_MEMORIES, small_run  # noqa: F401 - a fixture

CHROMIUM = Path("/usr/bin/chromium")
EXTERNAL = re.compile(
    r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|@import""",
    re.IGNORECASE,
)


def test_paired_comparison_covers_every_pair(small_run):  # noqa: F811
    pairs = paired_comparison(small_run)
    assert len(pairs) == 3
    assert list(zip(pairs["memory_a"], pairs["memory_b"], strict=True)) == [
        ("buffer", "window:k=1"),
        ("buffer", "summary"),
        ("window:k=1", "summary"),
    ]
    assert (pairs["p_mcnemar"].between(0, 1)).all()
    # over the probes the summary's recall is over: the same figures as the summary's
    summary = summarize(small_run).set_index("memory")
    probes = small_run.probes
    assert (probes["category"] == "abstention").any()  # left out of both
    for r in pairs.to_dict("records"):
        for side in ("a", "b"):
            row = summary.loc[r[f"memory_{side}"]]
            graded = recall_probes(small_run)
            assert r["probes"] == (graded["memory"] == r[f"memory_{side}"]).sum()
            assert r["probes"] < (probes["memory"] == r[f"memory_{side}"]).sum()
            assert r[f"accuracy_{side}"] == pytest.approx(row["accuracy"])


@pytest.fixture(scope="module")
def report(small_run):  # noqa: F811
    return write_report(small_run.path)


def test_report_is_one_self_contained_file(report):
    assert report.name == REPORT_FILE and report.parent.is_dir()
    html = report.read_text("utf-8")
    assert not EXTERNAL.search(html)
    assert "<script src" not in html and "<link" not in html
    images = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert len(images) == 6
    for image in images:  # nothing inside the charts points outside either
        svg = base64.b64decode(image).decode("utf-8")
        assert "<svg" in svg and not EXTERNAL.search(svg)


def test_report_escapes_dialogue_text_and_keeps_korean(report):
    html = report.read_text("utf-8")
    assert "제 고양이 이름이 뭐예요? &lt;b&gt;" in html
    assert "<b>\n" not in html.split('<h2 id="probes-section">Probes</h2>')[1].split("<script>")[
        0
    ].replace("<b>McNemar", "")
    assert "McNemar exact p" in html and "Newcombe" in html
    for memory in SMALL_MEMORIES:
        assert f'data-memory="{memory}"' in html


def test_cli_report_writes_charts_and_report(small_run, capsys):  # noqa: F811
    assert main(["report", str(small_run.path)]) == 0
    out = capsys.readouterr().out
    assert f"report: {small_run.path / REPORT_FILE}" in out
    assert out.count("chart:") == 12
    assert (small_run.path / "charts" / "recall.svg").exists()


class DevTools:
    """A minimal Chrome DevTools Protocol client for one page."""

    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.events: list[dict] = []
        self._id = 0

    def call(self, method: str, **params) -> dict:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                assert "error" not in message, message
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            assert time.monotonic() < deadline, f"no {method} within {timeout} s"
            self.events.append(json.loads(self.ws.recv()))

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"]["value"]


@pytest.fixture
def browser():
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is absent (apt-get install chromium); .ci/run installs it")
    pytest.importorskip("websocket", reason="websocket-client is in the dev extra")
    profile = Path(tempfile.mkdtemp(prefix="memory-lab-chromium-"))
    args = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic"]
    args += ["--no-first-run", "--disable-background-networking", "--disable-component-update"]
    args += ["--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-port=0"]
    proc = subprocess.Popen(
        [*args, "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None, "chromium exited at start-up"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        targets = json.load(opener.open(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        yield tools
        tools.ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def test_report_renders_in_headless_chromium_without_errors(report, small_run, browser):  # noqa: F811
    for domain in ("Runtime", "Log", "Network", "Page"):
        browser.call(f"{domain}.enable")
    browser.call("Page.navigate", url=report.resolve().as_uri())
    browser.wait_for("Page.loadEventFired")
    state = browser.evaluate(
        """(() => {
          const charts = [...document.querySelectorAll('img.chart')];
          return {charts: charts.length,
                  loaded: charts.filter(i => i.complete && i.naturalWidth > 100).length,
                  rows: document.querySelectorAll('#probes tbody tr').length,
                  count: document.getElementById('count').textContent,
                  h1: document.querySelector('h1').textContent};
        })()"""
    )
    n_probes = len(small_run.probes)
    assert state["charts"] == state["loaded"] == 6
    assert state["rows"] == n_probes
    assert state["count"] == f"{n_probes} of {n_probes} probes shown"
    visible = "[...document.querySelectorAll('#probes tbody tr')].filter(r => !r.hidden).length"
    shown = browser.evaluate(
        "(() => { const s = document.getElementById('fmemory'); s.value = 'summary';"
        f" s.dispatchEvent(new Event('change')); return {visible}; }})()"
    )
    assert shown == int((small_run.probes["memory"] == "summary").sum())
    korean = browser.evaluate(
        "(() => { const q = document.getElementById('q'); q.value = '고양이';"
        f" q.dispatchEvent(new Event('input')); return [{visible}, "
        "[...document.querySelectorAll('#probes tbody tr')].find(r => !r.hidden)"
        ".cells[3].textContent]; })()"
    )
    assert korean == [1, "제 고양이 이름이 뭐예요? <b>"]
    errors = [
        e
        for e in browser.events
        if e.get("method") == "Runtime.exceptionThrown"
        or (
            e.get("method") == "Runtime.consoleAPICalled"
            and e["params"]["type"] in ("error", "assert")
        )
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
    ]
    assert errors == []
    requested = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e.get("method") == "Network.requestWillBeSent"
    ]
    assert requested and all(u.startswith(("file:", "data:")) for u in requested), requested


def fails_on(res, dialogue: str = "", k: int = 2):
    """A window memory that fails at build on one dialogue (a cell that records no turn)."""
    from memory_lab.memories.registry import build_memory, parse_memory_spec

    if f".{dialogue}-" in res.cell_id:
        raise RuntimeError(f"planted failure on {dialogue}")
    return build_memory(parse_memory_spec(f"window:k={k}"), res)


def test_report_and_charts_on_a_run_whose_longest_dialogue_failed_everywhere(tmp_path, capsys):
    from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark

    from ..small_run import KOREAN_DIALOGUE

    (tmp_path / "ko.yaml").write_text(KOREAN_DIALOGUE, "utf-8")
    dialogues = load_dialogues(tmp_path / "ko.yaml", FIXTURES / "dialogues")
    longest = max(dialogues, key=lambda d: len(d.turns)).id
    memories = [f"tests.views.test_report:fails_on:dialogue={longest},k={k}" for k in (1, 3)]
    outcome = run_benchmark(resolve_memories(memories), dialogues, tmp_path / "run", progress=False)
    results = read_results(outcome.path)
    failed = results.cells[results.cells["status"] == "failed"]
    assert outcome.failed_cells == 2 and set(failed["dialogue"]) == {longest}
    assert longest not in set(results.turns["dialogue"])
    assert main(["report", str(outcome.path)]) == 0, capsys.readouterr().err
    html = (outcome.path / REPORT_FILE).read_text("utf-8")
    assert html.count("<img class=chart") == 6
    assert "2 cells failed" in html and "planted failure" in html


def test_report_shows_the_field_metrics_per_memory_and_category(report, small_run):  # noqa: F811
    html = report.read_text("utf-8")
    section = html.split('<h2 id="metrics">Field metrics</h2>')[1].split("<h2")[0]
    metrics = section.split("id=metrics>")[1].split("</table>")[0]
    for memory in SMALL_MEMORIES:
        assert f"<td>{memory}</td>" in metrics
    for column in (
        "F1 LoCoMo",
        "F1 mem0",
        "BLEU-1",
        "search p95 ms",
        "total p95 ms",
        "tokens held",
    ):
        assert f"<th>{column}</th>" in metrics
    assert "task_eval/evaluation.py" in section and "evaluation/metrics/utils.py" in section
    by_category = section.split("id=metrics-by-category>")[1].split("</table>")[0]
    assert by_category.count("<tr>") == len(summarize_by_category(small_run)) + 1
    assert "Published figures" not in html  # not a LoCoMo run


def test_a_locomo_runs_report_shows_published_figures_labelled_as_such(tmp_path):
    from memory_lab.benchmarks.locomo import BENCHMARK

    out = tmp_path / "locomo"
    source = f"locomo:{FIXTURES / 'locomo' / 'locomo_mini.json'}"
    argv = ["run", "--memory", "buffer", "--dialogues", source, "--out", str(out), "--quiet"]
    assert main(argv) == 0
    html = write_report(out).read_text("utf-8")
    section = html.split(">Published figures on LoCoMo (other models, prompts and judges)</h2>")
    assert len(section) == 2
    published = section[1].split("<h2")[0]
    data = BENCHMARK.published_figures()
    assert published.count("<tr>") == len(data["rows"]) + 1
    for row in data["rows"]:
        assert f"<td>{row['system']}</td>" in published and row["source"] in published
    assert "never comparable digit for digit" in published
    assert not EXTERNAL.search(html)  # sources as text, no link out


def _answer(html: str) -> str:
    """The text of the report's answer box."""
    return html.split('<section id="headline">')[1].split("</section>")[0]


def test_a_long_reply_is_clipped_in_a_closed_details_with_its_whole_text(small_run):  # noqa: F811
    from memory_lab import read_results
    from memory_lab.views.report import render_report

    results = read_results(small_run.path)  # a fresh copy: the fixture's frames stay as they are
    long = "The shed <roof> " + "is cedar, " * 200 + "END-OF-REPLY"
    results.probes.loc[0, "reply"] = long
    short = str(results.probes.loc[1, "reply"])
    assert len(short) < 100
    html = render_report(results)
    table = html.split("<table id=probes>")[1].split("</table>")[0]
    row = next(r for r in table.split("<tr ") if "END-OF-REPLY" in r)
    whole = escape(long)
    assert row.count(whole) == 1  # all of it, once, escaped
    cell = row.split("<details class=clip>")[1].split("</details>")[0]
    assert "<summary" in cell and whole in cell  # inside the expander, which is closed
    assert f"show all ({len(long):,} characters)" in cell
    assert "<details class=clip open" not in html and "<script" not in cell
    other = next(r for r in table.split("<tr ") if escape(short) in r and "END-OF-REPLY" not in r)
    assert f"<td>{escape(short)}</td>" in other  # a short reply as it is


def test_a_clipped_reply_shows_a_few_lines_until_opened_in_chromium(small_run, tmp_path, browser):  # noqa: F811
    from memory_lab import read_results
    from memory_lab.views.report import render_report

    results = read_results(small_run.path)
    results.probes.loc[0, "reply"] = "Line of a long reply, " * 400 + "END-OF-REPLY"
    page = tmp_path / REPORT_FILE
    page.write_text(render_report(results), "utf-8")
    browser.call("Page.enable")
    browser.call("Page.navigate", url=page.resolve().as_uri())
    browser.wait_for("Page.loadEventFired")
    sizes = browser.evaluate(
        """(() => {
          const d = document.querySelector('#probes details.clip');
          const line = parseFloat(getComputedStyle(d).lineHeight);
          const closed = d.querySelector('span').getBoundingClientRect().height;
          d.open = true;
          const open = d.querySelector('span').getBoundingClientRect().height;
          return {line, closed, open, text: d.textContent.includes('END-OF-REPLY')};
        })()"""
    )
    assert sizes["text"]
    assert sizes["closed"] <= 4.5 * sizes["line"]  # four lines
    assert sizes["open"] > 10 * sizes["closed"]  # the whole reply when opened


def _beam_run(tmp_path, memories=("buffer", "window:k=1")):
    """A run over a small BEAM-shaped copy (no BEAM text), offline."""
    from ..dialogue.importers.beam_fixture import chats

    root = chats(tmp_path / "BEAM" / "chats")
    out = tmp_path / "beam-run"
    source = f"beam:{root}#scale=100K,conversations=1+2"
    argv = ["run", "--dialogues", source, "--memory", *memories, "--out", str(out), "--quiet"]
    assert main(argv) == 0
    return out


def test_the_answer_names_beams_score_once_beam_scores_graded_the_run(tmp_path, capsys):
    import csv

    from memory_lab import read_results
    from memory_lab.benchmarks.beam.scores import ability_means, table_rows
    from memory_lab.views.numbers import percent
    from memory_lab.views.report import render_report

    out = _beam_run(tmp_path)
    before = _answer(render_report(read_results(out)))
    assert "BEAM score" not in before and "Evidence recall" in before  # not scored yet
    assert main(["score", "beam", str(out)]) == 0
    capsys.readouterr()
    html = render_report(read_results(out))
    answer = _answer(html)
    lines = re.findall(r"<li>(.*?)</li>", answer)
    assert lines[0].startswith("Evidence recall")  # still ranked by evidence recall offline
    beam = lines[1]
    assert beam.startswith("BEAM score (graded offline: only value nuggets")
    assert "no judge model" in beam and "judge model openai" not in beam
    assert "mean over the 4 of 10 abilities with a score" in beam
    assert "It ranks nothing here: the replies it grades are the offline reader&#x27;s" in beam
    assert "no judge model graded them" in beam
    with open(out / "beam_scores.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["score"] = float(r["score"]) if r["score"] else None
        r["graded"], r["items"] = int(r["graded"]), int(r["items"])
        r["evidence_recall"] = float(r["evidence_recall"]) if r["evidence_recall"] else None
    by_ability = ability_means([r for r in rows if r["protocol"] == "corrected"])
    means = {}
    for memory in ("buffer", "window:k=1"):
        scores = [v for (m, _, _), v in by_ability.items() if m == memory]
        means[(memory, "corrected")] = sum(scores) / len(scores)
        assert f"{memory} {percent(means[(memory, 'corrected')])}" in beam
        # the same figure as the mean row of the BEAM section's table
        (mean,) = [t for t in table_rows(rows) if t["memory"] == memory and "mean" in t["ability"]]
        assert mean["scores"]["corrected"] == pytest.approx(means[(memory, "corrected")])
    first, second = (beam.index(f"{m} ") for m in ("buffer", "window:k=1"))
    ordered = means[("buffer", "corrected")] >= means[("window:k=1", "corrected")]
    assert (first < second) == ordered  # best first
    (out / "beam_scores.csv").unlink()
    assert "BEAM score" not in _answer(render_report(read_results(out)))


def test_the_answer_names_the_judge_model_that_graded_beams_score(tmp_path, capsys, monkeypatch):
    from memory_lab import read_results
    from memory_lab.views.report import render_report

    from ..models.openai_mock import OpenAIMock
    from ..results.test_beam_scores import beam_copy_files

    out = _beam_run(tmp_path, ("buffer",))
    copy = beam_copy_files(tmp_path / "BEAM")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with OpenAIMock() as mock:
        mock.reply = lambda body: (
            "YES" if body["messages"][0]["role"] == "system" else '{"score": 1}'
        )
        args = ["score", "beam", str(out), "--judge", "openai:gpt-4.1-mini", "--prompts", str(copy)]
        assert main([*args, "--base-url", mock.base_url, "--protocol", "corrected"]) == 0
    capsys.readouterr()
    html = render_report(read_results(out))
    beam = re.findall(r"<li>(.*?)</li>", _answer(html))[1]
    assert beam.startswith(
        "BEAM score (graded by the judge model openai:gpt-4.1-mini with BEAM&#x27;s rubric prompt)"
    )
    assert "offline" not in beam.split("It ranks nothing here")[0]  # no offline grading named
    assert "corrected protocol: buffer " in beam and "reference" not in beam
    # the offline reader answered: the judge grades a stand-in, so it ranks nothing
    assert "the replies it grades are the offline reader&#x27;s" in beam
    assert "no judge model graded them" not in beam
    section = html.split('<h2 id="beam">')[1].split("<h2")[0]
    assert "BEAM corrected (openai:gpt-4.1-mini)" in section and "(offline)" not in section
