"""``memory-lab view``: the results browser's API over HTTP, and its page in headless Chromium
(the run list, a comparison of two runs, one probe through every memory)."""

from __future__ import annotations

import re
import shutil

import httpx
import pytest

from memory_lab.cli import main
from memory_lab.dialogue.sources import load_dialogues
from memory_lab.models.prompt import split_prompt
from memory_lab.results.read import read_results
from memory_lab.serve.viewer import ViewSettings, create_view_app

from ..conftest import FIXTURES
from ..small_run import SMALL_MEMORIES, small_run  # noqa: F401 - a fixture
from ..views.test_report import EXTERNAL
from .conftest import running_app
from .test_playground import CHROMIUM, DRIVER, browser  # noqa: F401 - a fixture

MINI = FIXTURES / "dialogues" / "mini.yaml"
LOADED = "return [...document.querySelectorAll('#charts img')].every(i => i.naturalWidth > 100)"


@pytest.fixture(scope="module")
def two_runs(small_run, tmp_path_factory):  # noqa: F811
    """A folder holding two runs: the small run (3 memories, mini + Korean) and mini.yaml
    through two memories with short answers."""
    root = tmp_path_factory.mktemp("view") / "results"
    shutil.copytree(small_run.path, root / "small")
    argv = ["run", "--memory", "buffer", "window:k=1", "--dialogues", str(MINI)]
    argv += ["--answer-style", "short", "--out", str(root / "short"), "--quiet"]
    assert main(argv) == 0
    return root


@pytest.fixture
def viewer(two_runs):
    with running_app(create_view_app(ViewSettings([str(two_runs)]))) as url:
        yield url


def test_the_api_lists_compares_and_drills_down(viewer, two_runs):
    with httpx.Client(base_url=viewer, timeout=120) as http:
        page = http.get("/").text
        assert "<h1>memory-lab view</h1>" in page and not EXTERNAL.search(page)
        runs = http.get("/api/runs").json()["runs"]
        assert [r["name"] for r in runs] == ["short", "small"]
        assert runs[1]["memories"] == SMALL_MEMORIES and runs[0]["answer_style"] == "short"
        keys = [r["key"] for r in runs]
        both = [("run", k) for k in keys]

        data = http.get("/api/compare", params=both).json()
        assert data["memories"] == ["short/buffer", "short/window:k=1"] + [
            f"small/{m}" for m in SMALL_MEMORIES
        ]
        assert [r["memory"] for r in data["summary"]] == data["memories"]
        # the offline reader answers: the comparison is ranked by evidence recall, and says why
        assert data["headline"][0].startswith("Evidence recall (retrieval; no interval): ")
        assert data["ranked_by"]["name"] == "evidence_recall"
        assert "offline reader" in data["ranked_by"]["why"]
        # the summary's columns are the metrics' declarations, retrieval first, each in the data
        from memory_lab.scoring.metrics import compared, metric

        assert data["metrics"] == compared()
        names = [m["name"] for m in data["metrics"]]
        assert names.index("evidence_recall") < names.index("accuracy")
        assert "seconds" in names and "ndcg" not in " ".join(names)  # rank scores left out
        shown = {"evidence_recall", "accuracy", "seconds", "search_seconds_p95", "tokens_per_query"}
        assert shown <= set(data["summary"][0]) & set(names)
        assert data["metrics"][names.index("seconds")]["label"] == metric("seconds").label
        shared = [p for p in data["pairs"] if p["memory_a"].startswith("short/")]
        # mini.yaml's 4 probes are shared; paired over the 3 recall is over (not the abstention)
        assert shared and all(p["probes"] == 3 for p in shared if "small/" in p["memory_b"])
        cat = next(p for p in data["probes"] if p["probe"] == "q-cat")
        assert set(cat["correct"]) == set(data["memories"])

        probe = http.get(
            "/api/probe", params=[*both, ("dialogue", "mini-profile"), ("probe", "q-cat")]
        ).json()
        dialogue = load_dialogues(MINI)[0]
        texts = {t.id: t.text for t in dialogue.turns}
        assert probe["evidence"] == [{"id": "cat", "text": texts["cat"]}]
        records = {}
        for name in ("short", "small"):
            p = read_results(two_runs / name).probes
            for r in p[(p.dialogue == "mini-profile") & (p.probe_id == "q-cat")].to_dict("records"):
                records[f"{name}/{r['memory']}"] = r
        assert [m["memory"] for m in probe["memories"]] == data["memories"]
        for m in probe["memories"]:
            assert m["reply"] == records[m["memory"]]["reply"]
            assert m["context"] == split_prompt(records[m["memory"]]["prompt"])[0]
            assert m["correct"] == records[m["memory"]]["correct"]


def test_the_api_refuses_in_one_line(viewer, two_runs):
    with httpx.Client(base_url=viewer, timeout=60) as http:
        other = http.get("/api/runs", headers={"Host": "rebound.example:8766"})
        assert other.status_code == 421 and "DNS rebinding" in other.json()["error"]
        outside = http.get("/api/compare", params={"run": "/etc"})
        assert outside.status_code == 404
        assert outside.json()["error"] == (
            "run '/etc': no such results folder under the folders given"
        )
        assert http.get("/api/compare").status_code == 422
        key = str(two_runs / "small")
        missing = http.get(
            "/api/probe", params={"run": key, "dialogue": "mini-profile", "probe": "nope"}
        )
        assert missing.status_code == 404 and "'nope'" in missing.json()["error"]


def test_view_refuses_a_missing_folder_before_listening(tmp_path, capsys):
    assert main(["view", str(tmp_path / "nope"), "--port", "0"]) == 2
    assert (
        capsys.readouterr().err.strip() == f"memory-lab: error: {tmp_path / 'nope'}: no such folder"
    )


pytestmark_browser = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no chromium/chromedriver: apt-get install -y chromium chromium-driver",
)


def _wait_view(driver, view: str):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 120).until(
        lambda d: d.execute_script("return document.body.dataset.view") == view
    )


@pytestmark_browser
def test_in_chromium_list_compare_and_drill_down(viewer, two_runs, browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 120)
    browser.get(viewer + "/")
    _wait_view(browser, "runs")
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == ["short", "small"]
    browser.save_screenshot(str(tmp_path / "list.png"))
    for box in browser.find_elements(By.CSS_SELECTOR, "#runs tbody input[type=checkbox]"):
        box.click()
    button = browser.find_element(By.ID, "compare-selected")
    assert button.text == "Compare selected (2)"
    button.click()

    _wait_view(browser, "compare")
    memories = ["short/buffer", "short/window:k=1"] + [f"small/{m}" for m in SMALL_MEMORIES]
    summary = browser.find_elements(By.CSS_SELECTOR, "#summary tbody tr")
    shown = [r.find_element(By.TAG_NAME, "td").text for r in summary]
    assert sorted(shown) == sorted(memories)  # sorted by the ranking figure, highest first
    column = [
        th.get_attribute("data-key")
        for th in summary[0].find_elements(By.XPATH, "../../thead/tr/th")
    ]
    recall = [
        r.find_elements(By.TAG_NAME, "td")[column.index("evidence_recall")].text for r in summary
    ]
    values = [float(v.rstrip("%")) for v in recall]
    assert values == sorted(values, reverse=True)
    assert "ranked by evidence recall" in browser.find_element(By.ID, "ranked-by").text
    assert browser.find_elements(By.CSS_SELECTOR, "#headline li")
    assert browser.find_elements(By.CSS_SELECTOR, "#pairs tbody tr")
    wait.until(
        lambda d: (
            len(d.find_elements(By.CSS_SELECTOR, "#charts img")) == 6 and d.execute_script(LOADED)
        )
    )
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#summary thead th")]
    assert "J" not in headers  # neither run was judged: the empty column is left out
    tip = browser.find_element(By.CSS_SELECTOR, '#summary th[data-key="seconds"]')
    assert tip.get_attribute("title").startswith("The memory's own seconds: over its turns")
    assert "lower is better" in tip.get_attribute("title")
    browser.save_screenshot(str(tmp_path / "compare.png"))
    # sorting by recall updates the table and the permalink
    browser.find_element(By.CSS_SELECTOR, '#summary th[data-key="accuracy"]').click()
    assert "summary.sort=accuracy" in browser.current_url
    # filter the probes to the cat question and open it
    box = browser.find_element(By.ID, "probes-filter")
    box.send_keys("cat called")
    shown = browser.find_elements(By.CSS_SELECTOR, "#probes tbody tr")
    assert len(shown) == 1 and shown[0].get_attribute("data-probe") == "q-cat"
    shown[0].click()

    _wait_view(browser, "probe")
    cards = browser.find_elements(By.CSS_SELECTOR, "#cards .card")
    assert [c.get_attribute("data-memory") for c in cards] == memories
    cat_text = {t.id: t.text for t in load_dialogues(MINI)[0].turns}["cat"]
    for card in cards:
        run, memory = card.get_attribute("data-memory").split("/", 1)
        p = read_results(two_runs / run).probes
        record = p[(p.memory == memory) & (p.probe_id == "q-cat")].iloc[0]
        context = card.find_element(By.CSS_SELECTOR, "pre.context")
        assert context.get_attribute("textContent") == split_prompt(record["prompt"])[0]
        reply = card.find_element(By.CSS_SELECTOR, "pre.reply")
        assert reply.get_attribute("textContent") == record["reply"]
        marks = [m.get_attribute("textContent") for m in context.find_elements(By.TAG_NAME, "mark")]
        assert marks == ([cat_text] if cat_text in context.get_attribute("textContent") else [])
    buffer = cards[0].find_element(By.CSS_SELECTOR, "pre.context")
    assert buffer.find_elements(By.TAG_NAME, "mark")  # the buffer holds every turn
    # an evidence turn is named as a turn, not as if its id were a speaker ("cat: My cat ...")
    shown = browser.find_element(By.CSS_SELECTOR, "#evidence li").text
    assert shown == f"turn cat — {cat_text}"
    browser.save_screenshot(str(tmp_path / "probe.png"))

    # the permalink opens the same view in a fresh page
    link = browser.current_url
    browser.get("about:blank")
    browser.get(link)
    _wait_view(browser, "probe")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#cards .card")) == len(memories)
    logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert logs == []


# seven memories whose labels are long (parameters): the probe grid's header used to take the
# width and squeeze the question to a few words a line (issue 45)
SEVEN = [
    "buffer",
    "window:k=1",
    "summary",
    "summary_buffer:max_token_limit=300",
    "token_buffer:max_token_limit=300",
    "entity:k=2",
    "combined:parts=window+summary",
]
# the probe grid and the summary as measured in the page: widths in CSS px, each box's scroll
# width against its width, and the text of every cell whose text overflows it
GRID = r"""
const box = (e) => e.getBoundingClientRect();
const over = (sel) => [...document.querySelectorAll(sel)]
  .filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.textContent);
const grid = document.querySelector('#probes');
const scroller = grid.parentElement, summary = document.querySelector('#summary');
const heads = [...grid.querySelectorAll('thead th')];
return {
  question: box(grid.querySelector('th[data-key=question]')).width,
  table: box(grid).width,
  memories: heads.filter((h) => h.dataset.key.startsWith('m:')).map((h) => h.title),
  overflowing: over('#probes th, #probes td, #summary th, #summary td'),
  grid: [scroller.scrollWidth, scroller.clientWidth],
  summary: [summary.parentElement.scrollWidth, summary.parentElement.clientWidth],
};
"""
# after scrolling the grid to its right end: where the question column is, and whether its
# first cell is what shows at its middle (not a memory's cell scrolled over it)
PINNED = r"""
const scroller = document.querySelector('#probes').parentElement;
scroller.scrollIntoView({ block: 'center' });
scroller.scrollLeft = scroller.scrollWidth;
const cell = document.querySelector('#probes tbody td.question');
const r = cell.getBoundingClientRect(), s = scroller.getBoundingClientRect();
const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
return { scrolled: scroller.scrollLeft, left: r.left - s.left, width: r.width,
         shown: hit === cell || cell.contains(hit) };
"""


@pytest.fixture(scope="module")
def seven_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("view7") / "seven"
    argv = ["run", "--memory", *SEVEN, "--dialogues", str(MINI), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    return out


@pytestmark_browser
def test_in_chromium_seven_memories_leave_every_column_readable(seven_run, two_runs, browser):  # noqa: F811
    from urllib.parse import urlencode

    app = create_view_app(ViewSettings([str(seven_run), str(two_runs)]))
    with running_app(app) as url:
        with httpx.Client(base_url=url, timeout=60) as http:
            keys = {r["name"]: r["key"] for r in http.get("/api/runs").json()["runs"]}
        for width, height in ((1280, 800), (1400, 900)):
            browser.set_window_size(width, height)
            browser.get(url + "/#compare?" + urlencode({"run": keys["seven"]}))
            _wait_view(browser, "compare")
            page = browser.execute_script(GRID)
            # the question keeps a readable measure (18em: 3-4 words a line at least) and the
            # seven memories' verdicts fit beside it: no scrolling sideways
            assert page["question"] >= 230, (width, page)
            assert page["grid"][0] <= page["grid"][1], (width, page)
            assert page["summary"][0] <= page["summary"][1], (width, page)
            assert page["overflowing"] == [], (width, page)
            assert page["memories"] == SEVEN  # each header's full label, on hover too
        # the verdict cell names its memory, for a row far below the header
        first_row = "#probes tbody tr:first-child td"
        tips = browser.execute_script(
            f"return [...document.querySelectorAll('{first_row}')].map(c => c.title)"
        )
        verdict = re.compile(
            rf"({'|'.join(map(re.escape, SEVEN))}): (correct|wrong) \(string match\)"
        )
        verdicts = [t for t in tips if verdict.fullmatch(t)]
        assert [t.split(": ")[0] for t in verdicts] == SEVEN, tips

        # narrower than the grid: it scrolls sideways in its box, the question pinned on the left
        # (800 px: the grid is wider than its box by more than the columns before the question)
        browser.set_window_size(800, 800)
        browser.get(url + "/#compare?" + urlencode({"run": keys["seven"]}))
        _wait_view(browser, "compare")
        pinned = browser.execute_script(PINNED)
        assert pinned["scrolled"] > 100 and pinned["left"] <= 2 and pinned["width"] >= 230, pinned
        assert pinned["shown"], pinned

        # two memories: the same page, nothing squeezed or stretched
        browser.set_window_size(1280, 800)
        browser.get(url + "/#compare?" + urlencode({"run": keys["short"]}))
        _wait_view(browser, "compare")
        page = browser.execute_script(GRID)
        assert page["memories"] == ["buffer", "window:k=1"]
        assert page["question"] >= 230 and page["overflowing"] == [], page
        assert page["table"] < page["grid"][1] - 200, page  # as wide as it needs, no wider
        logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert logs == []


def test_a_local_model_s_cost_reads_local_as_in_the_terminal_and_the_report(tmp_path):
    """A local model's cost was 'local' in the terminal, 0.0000 in the report and the viewer."""
    from memory_lab.serve.viewer import _with_cost_text
    from memory_lab.views.report import comparison, render_report

    out = tmp_path / "local"
    argv = ["run", "--memory", "window", "--dialogues", str(MINI), "--llm", "openai:llama3.1"]
    argv += ["--base-url", "http://127.0.0.1:9/v1", "--dry-run", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    results = read_results(out)
    summary = _with_cost_text(comparison([results], [""])["summary"], [results])
    assert list(summary["est_cost_text"]) == ["local"]
    assert "<td>local</td>" in render_report(results)
