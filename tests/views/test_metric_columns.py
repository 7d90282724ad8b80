"""The summary tables render their columns from the metric declarations
(``scoring/metrics.py``): a figure declared there, with its column in the summary, is a column
of the terminal's table, the report's and the viewer's comparison, headed by its declared
label and written by its declared unit."""

from __future__ import annotations

import re
from importlib import resources

import pandas as pd
import pytest

from memory_lab.scoring import metrics
from memory_lab.scoring.metrics import Metric
from memory_lab.serve import viewer
from memory_lab.views import report, tables

NEW = Metric(
    "recall_at_dawn",
    "dawn-recall",
    "Recall at dawn",
    "share",
    "probes asked before breakfast",
    higher_is_better=False,
)


@pytest.fixture
def declared(monkeypatch):
    """``NEW`` declared after evidence recall, as a figure of the run's summary would be."""
    at = [m.name for m in metrics.METRICS].index("evidence_recall") + 1
    declared = (*metrics.METRICS[:at], NEW, *metrics.METRICS[at:])
    monkeypatch.setattr(metrics, "METRICS", declared)
    monkeypatch.setattr(metrics, "BY_NAME", {**metrics.BY_NAME, NEW.name: NEW})
    return NEW


def _summary() -> pd.DataFrame:
    """A summary frame as ``summarize`` writes it (the columns the tables show), with the new
    figure's column."""
    return pd.DataFrame(
        {
            "memory": ["buffer", "window:k=1"],
            "answerable": [3, 3],
            "evidence_recall": [1.0, 1 / 3],
            "recall_at_dawn": [0.4567, float("nan")],
            "accuracy": [2 / 3, 1 / 3],
            "accuracy_low": [0.208, 0.061],
            "accuracy_high": [0.939, 0.792],
            "total_tokens": [2116, 1074],
            "est_cost_usd": [0.0004, 0.0002],
        }
    )


def test_a_declared_metric_is_a_column_of_the_terminal_table(declared):
    lines = tables.format_summary(_summary()).splitlines()
    header = lines[0].split()
    assert header[:4] == ["memory", "answerable", "evid-recall", declared.label]
    buffer, window = lines[2].split(), lines[3].split()
    assert buffer[3] == "45.7%" and window[3] == "-"  # a share as a percent; missing as -
    assert len({len(lines[0]), len(lines[2]), len(lines[3])}) == 1  # aligned under its heading
    assert lines[0].index(declared.label) + len(declared.label) == lines[2].index("45.7%") + 5


def test_without_its_column_the_tables_leave_it_out(declared):
    summary = _summary().drop(columns=declared.name)
    assert declared.label not in tables.format_summary(summary)
    assert declared.label not in report._summary_section(summary, [])


def test_a_declared_metric_is_a_column_of_the_report(declared):
    html = report._summary_section(_summary(), [])
    heads = re.findall(r"<th(?: title=\"([^\"]*)\")?>([^<]*)</th>", html)
    assert [h for _, h in heads][:4] == ["memory", "answerable", "evid-recall", declared.label]
    hint = dict((h, t) for t, h in heads)[declared.label]
    assert hint == "Recall at dawn: over probes asked before breakfast; lower is better"
    rows = re.findall(r"<tr><td>([^<]*)</td>(.*?)</tr>", html)
    cells = {m: re.findall(r"<td>([^<]*)</td>", rest) for m, rest in rows}
    assert cells["buffer"][2] == "45.7%" and cells["window:k=1"][2] == "–"


class _Combined:  # the combined results a comparison carries: no probes, no failed cells
    probes = pd.DataFrame()

    def memory_order(self) -> list[str]:
        return ["buffer", "window:k=1"]

    def failed_cells(self) -> pd.DataFrame:
        return pd.DataFrame()


def test_a_declared_metric_is_a_column_of_the_viewer(declared):
    """What ``/api/compare`` hands the page: the declarations of its columns, in order, and each
    memory's value; the page writes each unit with ``SHOW`` (``data/viewer.html``)."""
    parts = {
        "results": _Combined(),
        "summary": _summary(),
        "pairs": pd.DataFrame(),
        "notes": [],
        "stand_in": [],
        "headline": [],
        "ranked_by": None,
        "style_note": "",
        "differences": [],
    }
    data = viewer.comparison_json(parts, [], ["run"])
    names = [m["name"] for m in data["metrics"]]
    assert names[names.index("evidence_recall") + 1] == declared.name
    column = data["metrics"][names.index(declared.name)]
    assert (column["heading"], column["unit"]) == (declared.label, "share")
    assert column["hint"] == declared.hint and column["higher_is_better"] is False
    assert [r[declared.name] for r in data["summary"]] == [0.4567, None]
    page = resources.files("memory_lab").joinpath("data/viewer.html").read_text("utf-8")
    show = re.search(r"const SHOW = \{(.*?)\};", page, re.S)
    assert show, "the page's SHOW (a writer per unit) was not found"
    written = set(re.findall(r"(\w+):", show.group(1)))
    assert {m.unit for m in metrics.METRICS} <= written  # every declared unit has its writer


def test_every_unit_is_written_as_declared():
    row = {
        "accuracy": 0.5,
        "accuracy_low": 0.25,
        "accuracy_high": 0.75,
        "judge_accuracy": 0.5,
        "judge_accuracy_sd": 0.05,
        "f1_mem0": 0.12345,
        "answerable": 1986,
        "total_tokens": 1234567.0,
        "est_cost_usd": 0.01234,
        "seconds": 2.345,
    }
    text = {m.name: tables.metric_text(m, row) for m in metrics.METRICS if m.name in row}
    assert text["accuracy"] == "50.0% [25.0%–75.0%]"
    assert text["judge_accuracy"] == "50.0% ± 5.0%"
    assert text["f1_mem0"] == "0.123"
    assert text["answerable"] == "1,986" and text["total_tokens"] == "1,234,567"
    assert text["est_cost_usd"] == "0.0123" and text["seconds"] == "2.3"
    local = tables.metric_text(metrics.metric("est_cost_usd"), row, local=True)
    assert local == "local"
    assert tables.metric_text(metrics.metric("f1_mem0"), {}) == "–"
