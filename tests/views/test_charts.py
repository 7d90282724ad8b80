"""Charts: Figures drawn from the tidy frames, one colour per memory, files on disk."""

from __future__ import annotations

import warnings

import pytest
from matplotlib.figure import Figure

from memory_lab.results.standings import pareto_front, ranking_metric
from memory_lab.results.summary import summarize
from memory_lab.views.charts import (
    category_heatmap,
    chart_style,
    cost_frontier_chart,
    font_family,
    memory_colors,
    prompt_growth_chart,
    recall_chart,
    save_charts,
    token_breakdown_chart,
)

from ..small_run import SMALL_MEMORIES, small_run  # noqa: F401 - a fixture


def _gid_patches(ax, gid):
    return [p for p in ax.patches if p.get_gid() == gid]


def test_the_first_chart_shows_the_ranking_figure_beside_answer_in_context(small_run):  # noqa: F811
    """Offline, the answer box ranks by evidence recall: so does the first chart, named as
    declared, with the probes each bar is over and the stand-in's caveat on the chart."""
    fig = recall_chart(small_run)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    recall, hits = _gid_patches(ax, "recall"), _gid_patches(ax, "context_hit")
    assert len(recall) == len(hits) == len(SMALL_MEMORIES)
    summary = summarize(small_run)
    assert ranking_metric([small_run], summary).name == "evidence_recall"
    assert [round(p.get_height(), 6) for p in recall] == [
        round(a, 6) for a in summary["evidence_recall"]
    ]
    assert [round(p.get_height(), 6) for p in hits] == [
        round(a, 6) for a in summary["context_hit_rate"]
    ]
    colors = memory_colors(small_run)
    assert [tuple(p.get_facecolor()) for p in recall] == [
        pytest.approx(colors[m]) for m in SMALL_MEMORIES
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == SMALL_MEMORIES
    assert ax.get_title() == "Evidence recall and answer in context per memory"
    (caveat,) = [t.get_text() for t in fig.texts if t.get_gid() == "caveat"]
    evidence = small_run.probes["evidence_recall"].notna() & (
        small_run.probes["category"] != "abstention"
    )
    n = int(evidence.sum() / len(SMALL_MEMORIES))
    assert f"answerable probes with evidence (n = {n})" in caveat.replace("\n", " ")
    assert "offline reader's (a stand-in)" in caveat
    top = max(summary["evidence_recall"].max(), summary["context_hit_rate"].max())
    assert ax.get_ylim()[1] <= 1.17 and ax.get_ylim()[1] >= top  # fits its data


def test_a_share_axis_fits_data_far_below_100_percent(small_run, monkeypatch):  # noqa: F811
    from memory_lab.views import charts

    real = charts.summarize

    def low(results):  # the figures of a run whose memories all sit near 15%
        frame = real(results)
        for column in ("evidence_recall", "context_hit_rate"):
            frame[column] = 0.15
        return frame

    monkeypatch.setattr(charts, "summarize", low)
    ax = recall_chart(small_run).axes[0]
    assert 0.15 < ax.get_ylim()[1] <= 0.3 * 1.17


def test_colours_are_fixed_in_run_order(small_run):  # noqa: F811
    colors = memory_colors(small_run)
    assert list(colors) == SMALL_MEMORIES
    assert len(set(colors.values())) == len(colors)


def test_pareto_front_keeps_only_undominated_memories():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "memory": ["cheap", "good", "dominated", "tie"],
            "accuracy": [0.2, 0.9, 0.5, 0.9],
            "total_tokens": [100, 1000, 2000, 1000],
        }
    )
    assert pareto_front(frame) == ["cheap", "good", "tie"]


def test_cost_frontier_marks_the_pareto_memories_and_labels_do_not_overlap(small_run):  # noqa: F811
    fig = cost_frontier_chart(small_run)
    ax = fig.axes[0]
    front = pareto_front(summarize(small_run))
    marks = [c for c in ax.collections if c.get_gid() == "pareto"]
    assert len(marks) == 1 and len(marks[0].get_offsets()) == len(front) >= 1
    labels = {t.get_text(): t for t in ax.texts}
    assert set(labels) == set(SMALL_MEMORIES)
    renderer = fig.canvas.get_renderer()
    from matplotlib.text import Text

    boxes = [Text.get_window_extent(t, renderer) for t in labels.values()]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_prompt_growth_defaults_to_the_longest_dialogue_and_shows_memory_tokens(small_run):  # noqa: F811
    fig = prompt_growth_chart(small_run)
    top, bottom = fig.axes[:2]
    prompt = [x for x in top.get_lines() if str(x.get_gid()).startswith("prompt:")]
    kept = [x for x in bottom.get_lines() if str(x.get_gid()).startswith("memory_tokens:")]
    assert [x.get_label() for x in prompt] == [x.get_label() for x in kept] == SMALL_MEMORIES
    assert all(x.get_linestyle() == "--" for x in kept)
    longest = small_run.turns.groupby("dialogue")["exchange"].max().idxmax()
    assert longest in top.get_title()
    assert "ko-mini" in prompt_growth_chart(small_run, "ko-mini").axes[0].get_title()
    assert prompt_growth_chart(small_run, "all").axes[0].get_lines()
    with pytest.raises(ValueError, match="no turns"):
        prompt_growth_chart(small_run, "nope")


def test_heatmap_and_token_breakdown(small_run):  # noqa: F811
    heat = category_heatmap(small_run).axes[0]
    categories = set(small_run.probes["category"])
    assert len(heat.texts) == len(SMALL_MEMORIES) * len(categories)
    assert [t.get_text() for t in heat.get_yticklabels()] == SMALL_MEMORIES
    bars = token_breakdown_chart(small_run).axes[0]
    for gid in ("prompt_tokens", "completion_tokens", "memory_tokens"):
        assert len(_gid_patches(bars, gid)) == len(SMALL_MEMORIES)
    assert sum("(est.)" in t.get_text() for t in bars.texts) == len(SMALL_MEMORIES)


def test_save_charts_writes_png_and_svg(small_run, tmp_path):  # noqa: F811
    paths = save_charts(small_run, tmp_path / "charts")
    assert len(paths) == 12
    assert {p.suffix for p in paths} == {".png", ".svg"}
    for p in paths:
        assert p.stat().st_size > 1000
        head = p.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if p.suffix == ".png" else b"<?xml" in head


def test_korean_text_renders_without_missing_glyphs(tmp_path):
    if not any("CJK" in f or "KR" in f or "Nanum" in f for f in font_family()):
        pytest.skip("no CJK font installed (apt-get install fonts-noto-cjk); .ci/run installs it")
    with chart_style(), warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        fig = Figure()
        fig.add_subplot().set_title("기억 비교: 민지의 고양이 콩이")
        fig.savefig(tmp_path / "ko.png")


def test_score_chart_plots_j_when_the_run_was_judged_else_locomo_f1(small_run):  # noqa: F811
    import pandas as pd

    from memory_lab.views.charts import score_metric, score_tokens_chart

    assert score_metric(pd.DataFrame({"f1_locomo": [0.5]}))[0] == "f1_locomo"
    assert score_metric(pd.DataFrame({"judge_accuracy": [float("nan")]}))[0] == "f1_locomo"
    assert score_metric(pd.DataFrame({"judge_accuracy": [0.4]}))[0] == "judge_accuracy"
    ax = score_tokens_chart(small_run).axes[0]
    points = [c for c in ax.collections if (c.get_gid() or "").startswith("point:")]
    assert sorted(c.get_gid() for c in points) == sorted(f"point:{m}" for m in SMALL_MEMORIES)
    assert ax.get_ylabel().startswith("F1")


def test_recall_labels_never_sit_under_an_error_bar(small_run, monkeypatch):  # noqa: F811
    """A value label at the foot of a short bar would be crossed by its error bar: such a
    label goes above the bar's interval instead (recall with its Wilson interval: the run
    taken as one with a real answering model)."""
    from memory_lab.scoring.metrics import metric
    from memory_lab.views import charts
    from memory_lab.views.charts import LABEL_CLEARANCE

    monkeypatch.setattr(charts, "ranking_metric", lambda runs, summary: metric("accuracy"))
    ax = recall_chart(small_run).axes[0]
    summary = summarize(small_run)
    labels = [t for t in ax.texts if t.get_gid() == "recall_label"]
    assert len(labels) == len(summary)
    for label, (_, row) in zip(labels, summary.iterrows(), strict=True):
        y = label.get_position()[1]
        clear_below = y < 0.05 and row["accuracy_low"] >= LABEL_CLEARANCE
        clear_above = y > row["accuracy_high"]
        assert clear_below or clear_above, (row["memory"], y, row["accuracy_low"])
        assert label.get_text() == f"{100 * row['accuracy']:.0f}%"
    assert len(ax.collections) >= 1  # the Wilson error bars
