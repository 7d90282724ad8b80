"""Charts of a results folder, drawn from the tidy DataFrames and the figures ``results/``
computes from them (``summary``, ``standings``, ``prompt_growth``), never the runner.

Every chart takes a :class:`~memory_lab.results.read.Results` and returns a matplotlib ``Figure``
built without pyplot (no global state, Agg canvas). Each memory keeps one colour across charts,
assigned in the order of the run's memories (``Results.memory_order``).
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from memory_lab.models.cache import default_cache_dir

# matplotlib keeps its font cache and config under HOME (~/.cache/matplotlib, ~/.config) unless
# told: in memory-lab's own cache instead ($MEMORY_LAB_CACHE), as everything a run keeps; set
# before matplotlib loads, and left alone where the user set it.
os.environ.setdefault("MPLCONFIGDIR", str(default_cache_dir() / "matplotlib"))

import matplotlib as mpl  # noqa: E402 - after its config folder is set
import numpy as np
import pandas as pd
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

from memory_lab.log.safe_files import check_folder, open_new
from memory_lab.results.prompt_growth import prompt_growth
from memory_lab.results.read import Results
from memory_lab.results.standings import frontier, ranking_metric
from memory_lab.results.summary import category_grid, judged, recall_probes, summarize
from memory_lab.scoring.answers import answer_score_names
from memory_lab.scoring.metrics import metric
from memory_lab.views.numbers import percent

CHARTS_DIR = "charts"
# Latin glyphs from DejaVu, Hangul (and other CJK) from the first CJK font found.
FONT_FAMILY = [
    "DejaVu Sans",
    "Noto Sans CJK KR",
    "Noto Sans CJK JP",
    "Noto Sans KR",
    "NanumGothic",
    "sans-serif",
]
RC = {
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "path",  # glyphs as paths: the SVG shows Korean without any installed font
    "svg.hashsalt": "memory-lab",
}
# tab10 then the paired tab20 shades: 20 distinguishable colours before repeating.
PALETTE = [mpl.colormaps["tab10"](i) for i in range(10)] + [
    mpl.colormaps["tab20"](i) for i in range(1, 20, 2)
]


@cache
def font_family() -> list[str]:
    """The installed fonts of ``FONT_FAMILY`` in order (a missing one would warn on every text)."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    if not any("CJK" in n or "Nanum" in n for n in installed):  # a cache from before the install
        for path in font_manager.findSystemFonts():
            if "CJK" in path or "Nanum" in path:
                font_manager.fontManager.addfont(path)
        installed = {f.name for f in font_manager.fontManager.ttflist}
    return [f for f in FONT_FAMILY if f in installed or f == "sans-serif"]


@contextmanager
def chart_style() -> Iterator[None]:
    """Matplotlib settings for every chart (fonts with Korean fallback), restored on exit."""
    with mpl.rc_context({**RC, "font.family": font_family()}):
        yield


def memory_colors(results: Results) -> dict[str, tuple]:
    """One fixed colour per memory, assigned in run order."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(results.memory_order())}


def wrap_label(label: str, width: int = 14) -> str:
    """Break a memory spec such as ``summary_buffer:max_token_limit=200`` onto short lines."""
    if len(label) <= width:
        return label
    name, _, params = label.partition(":")
    return "\n".join([name, *params.split(",")]) if params else label


def _figure(width: float, height: float, **kwargs) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained", **kwargs)
    FigureCanvasAgg(fig)
    return fig


def _xticks(ax, labels: list[str]) -> None:
    ax.set_xticks(range(len(labels)))
    wrapped = [wrap_label(x) for x in labels]
    rotate = len(labels) > 5
    ax.set_xticklabels(
        wrapped, rotation=35 if rotate else 0, ha="right" if rotate else "center", fontsize=9
    )


# A value label sits at the foot of its bar (1% up, ~5% tall): only if the error bar starts
# higher than this does the label stay clear of it.
LABEL_CLEARANCE = 0.08


# The probe record's column a summary share is the mean of, where its name differs.
_PROBE_COLUMN = {"context_hit_rate": "context_hit", "abstention_accuracy": "correct"}
# ... and of the ranking figures, per probe (J: the judge's majority verdict).
_PROBE_VALUE = {"judge_accuracy": "judge_correct", "accuracy": "correct"}


def _counts(results: Results, column: str) -> pd.Series:
    """Per memory, the probes a summary figure is over: those recall is over for recall and J
    (``summary.recall_probes``), else the answerable probes with a value for it."""
    if column in ("accuracy", "judge_accuracy"):
        probes = recall_probes(results)
        return probes.groupby("memory").size() if len(probes) else pd.Series(dtype=int)
    probes = results.probes
    column = _PROBE_COLUMN.get(column, column)
    if probes.empty or column not in probes:
        return pd.Series(dtype=int)
    answerable = probes[probes["category"] != "abstention"]
    return answerable[column].notna().groupby(answerable["memory"]).sum()


def _n(counts: pd.Series, summary: pd.DataFrame) -> str:
    """``n = 18`` per memory, or the range ``n = 16-18`` where the memories differ."""
    found = [int(counts.get(m, 0)) for m in summary["memory"]]
    low, high = min(found, default=0), max(found, default=0)
    return f"n = {low}" if low == high else f"n = {low}-{high}"


def stand_in_caveat(results: Results) -> str | None:
    """What a chart says when its run's answering model is the offline reader (a stand-in)."""
    spec = results.spec
    if spec is None or not spec.reader_model.offline:
        return None
    return (
        "Offline: the replies are the offline reader's (a stand-in), so recall ranks nothing; "
        "memories are ranked by evidence recall, which does not depend on it."
    )


def _caption(fig: Figure, *lines: str | None) -> None:
    """Notes under a chart, on the chart: what its figures are and are not."""
    width = int(fig.get_figwidth() * 15)  # characters of the caption's size per line
    text = "\n".join(textwrap.fill(line, width) for line in lines if line)
    if not text:
        return
    fig.text(0.01, 0.01, text, fontsize=7.5, va="bottom", ha="left", color="0.25", gid="caveat")
    height = (text.count("\n") + 1) * 7.5 * 1.3 / 72 / fig.get_figheight() + 0.02
    fig.get_layout_engine().set(rect=(0, height, 1, 1 - height))


def _fit_top(values: list[float]) -> float:
    """The top of a share axis that fits its data (and the value labels above the bars): a
    tenth above the highest value, at most 100% (plus room for the legend)."""
    finite = [v for v in values if not math.isnan(v)]
    top = max(finite, default=1.0)
    return min(1.0, math.ceil((top + 0.05) * 10) / 10) * 1.17


def _value_labels(ax: Axes, x: np.ndarray, values, lows, tops) -> None:
    """Each bar's value, inside its foot where its error bar starts above the label, else
    above the bar's interval."""
    for xi, v, low, high in zip(x, values, lows, tops, strict=True):
        if math.isnan(v):
            continue
        inside = low >= LABEL_CLEARANCE
        ax.text(
            xi,
            0.01 if inside else high + 0.015,
            percent(v, digits=0),
            ha="center",
            va="bottom",
            fontsize=8,
            color="white" if inside else "black",
            gid="recall_label",
        )


def recall_chart(results: Results) -> Figure:
    """The figure the run is ranked by, per memory, with answer in context beside it.

    The figure is the answer box's (``standings.ranking_metric``: J, recall with its 95% Wilson
    interval, or evidence recall with the offline reader), named as declared
    (``scoring/metrics.py``); under each bar, the number of probes it is over; under the chart,
    the stand-in's caveat when the replies are the offline reader's. The share axis fits the
    data."""
    with chart_style():
        summary = summarize(results)
        lead = ranking_metric([results], summary) or metric("evidence_recall")
        beside = metric("context_hit_rate")
        colors = memory_colors(results)
        n = len(summary)
        fig = _figure(max(6.0, 1.0 + 0.9 * n), 5.2)
        ax = fig.add_subplot()
        x = np.arange(n)
        width = 0.38
        values = summary[lead.name].to_numpy(float)
        err = None
        if lead.interval:
            low, high = (summary[c].to_numpy(float) for c in lead.interval)
            err = np.vstack([values - low, high - values])
        elif lead.spread and lead.spread in summary:
            sd = summary[lead.spread].fillna(0).to_numpy(float)
            err = np.vstack([np.minimum(sd, values), sd])
        cols = [colors[m] for m in summary["memory"]]
        interval = (
            " (95% Wilson CI)"
            if lead.interval
            else " (± sd over judge runs)"
            if (err is not None)
            else ""
        )
        bars = ax.bar(
            x - width / 2,
            values,
            width,
            yerr=err,
            capsize=3,
            color=cols,
            edgecolor="black",
            linewidth=0.5,
            label=f"{lead.noun}{interval}",
            error_kw={"elinewidth": 1},
        )
        for b in bars:
            b.set_gid("recall")
        hits = ax.bar(
            x + width / 2,
            summary[beside.name].to_numpy(float),
            width,
            color=[(*c[:3], 0.35) for c in cols],
            edgecolor=cols,
            hatch="//",
            linewidth=1,
            label=beside.noun,
        )
        for b in hits:
            b.set_gid("context_hit")
        tops = values if err is None else values + err[1]
        lows = values if err is None else values - err[0]
        _value_labels(ax, x - width / 2, values, lows, tops)
        _xticks(ax, list(summary["memory"]))
        top = _fit_top([*tops, *summary[beside.name].to_numpy(float)])
        ax.set_ylim(0, top)
        ax.set_yticks([t for t in np.linspace(0, 1, 11) if t <= top / 1.17 + 1e-9])
        ax.yaxis.set_major_formatter(mpl.ticker.PercentFormatter(1.0))
        ax.set_ylabel("share of probes")
        ax.set_title(f"{lead.title.split(' (')[0]} and {beside.noun} per memory")
        ax.legend(
            handles=[
                Patch(facecolor="0.4", edgecolor="black", label=bars.get_label()),
                Patch(
                    facecolor=(0.4, 0.4, 0.4, 0.35),
                    edgecolor="0.4",
                    hatch="//",
                    label=hits.get_label(),
                ),
            ],
            loc="upper center",
            ncols=2,
            frameon=False,
        )
        _caption(
            fig,
            f"{lead.noun.capitalize() if lead.noun.islower() else lead.noun}: over "
            f"{lead.over} ({_n(_counts(results, lead.name), summary)}); {beside.noun}: over "
            f"{beside.over} ({_n(_counts(results, beside.name), summary)}).",
            stand_in_caveat(results),
        )
        return fig


def _place_labels(fig: Figure, ax, points: list[tuple]) -> list:
    """Annotate ``(x, y, label, colour, low, high)`` points where no label overlaps another.

    The layout is computed first and then frozen, so the positions checked are the drawn ones.
    """
    fig.draw_without_rendering()
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())
    fig.set_layout_engine("none")
    renderer = fig.canvas.get_renderer()
    taken = []
    for x, y, _, _, low, high in points:  # markers and error bars
        px, py = ax.transData.transform((x, y))
        _, plow = ax.transData.transform((x, low))
        _, phigh = ax.transData.transform((x, high))
        taken.append(mpl.transforms.Bbox.from_extents(px - 7, py - 7, px + 7, py + 7))
        taken.append(mpl.transforms.Bbox.from_extents(px - 4, plow, px + 4, phigh))
    candidates = [
        (dx * r, dy * r)
        for r in (1, 1.8, 2.8, 4)
        for dx, dy in ((8, 8), (8, -14), (-8, 8), (-8, -14), (0, 14), (0, -20), (14, 0), (-14, 0))
    ]
    frame = ax.get_window_extent(renderer)
    texts = []
    for x, y, label, color, _, _ in points:
        best = None
        for dx, dy in candidates:
            ann = ax.annotate(
                label,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx > 0 else "right" if dx < 0 else "center",
                va="bottom" if dy > 0 else "top" if dy < 0 else "center",
                fontsize=9,
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": color, "alpha": 0.9},
                arrowprops={"arrowstyle": "-", "color": color, "lw": 0.8, "shrinkA": 0},
            )
            ann.update_positions(renderer)
            # the text alone (the arrow always touches its own point), plus the box padding
            box = Text.get_window_extent(ann, renderer).padded(4)
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            score = sum(box.overlaps(b) for b in taken) + (0 if inside else 100)
            if best is None or score < best[0]:
                if best is not None:
                    best[1].remove()
                best = (score, ann, box)
            else:
                ann.remove()
            if score == 0:
                break
        taken.append(best[2])
        texts.append(best[1])
    return texts


def cost_frontier_chart(results: Results) -> Figure:
    """The figure the run is ranked by (``standings.ranking_metric``: recall with its Wilson
    interval with a real answering model, evidence recall with the offline reader) against
    total tokens per memory; the Pareto-optimal memories are marked."""
    with chart_style():
        full = summarize(results)
        by = ranking_metric([results], full) or metric("accuracy")
        y, bounds = by.name, by.interval
        summary = full.dropna(subset=[y])
        colors = memory_colors(results)
        pts = frontier(summary, y)
        fig = _figure(8.0, 5.5)
        ax = fig.add_subplot()
        for r in summary.to_dict("records"):
            yerr = [[r[y] - r[bounds[0]]], [r[bounds[1]] - r[y]]] if bounds else None
            ax.errorbar(
                r["total_tokens"], r[y], yerr=yerr, fmt="o", color=colors[r["memory"]],
                markersize=8, capsize=3, elinewidth=0.8, markeredgecolor="black",
                markeredgewidth=0.5, gid=f"point:{r['memory']}",
            )  # fmt: skip
        named = by.noun
        if len(pts):
            ax.step(
                pts["total_tokens"], pts[y], where="post", color="0.3", linestyle="--",
                linewidth=1, gid="pareto_line",
            )  # fmt: skip
            ax.scatter(
                pts["total_tokens"], pts[y], s=260, facecolors="none", edgecolors="black",
                linewidths=1.5, zorder=3, gid="pareto",
                label=f"Pareto-optimal (no memory has both higher {named} and fewer tokens)",
            )  # fmt: skip
            ax.legend(loc="lower right", fontsize=8, frameon=False, markerscale=0.6)
        _score_token_axes(
            ax,
            summary["total_tokens"],
            "total tokens (prompt + completion + memory maintenance)",
            f"{named}" + (" (95% Wilson CI)" if bounds else ""),
            f"Cost frontier: {named} against tokens (up and left is better)",
            summary[bounds[1]] if bounds else summary[y],
        )
        points = [
            (
                r["total_tokens"],
                r[y],
                r["memory"],
                colors[r["memory"]],
                r[bounds[0]] if bounds else r[y],
                r[bounds[1]] if bounds else r[y],
            )  # fmt: skip
            for r in summary.sort_values(y, ascending=False).to_dict("records")
        ]
        _place_labels(fig, ax, points)
        return fig


def _score_token_axes(
    ax: Axes, tokens: pd.Series, xlabel: str, ylabel: str, title: str, scores: pd.Series
) -> None:
    """A score (0-1) against tokens: log tokens when they span more than 20x, percent scores on
    an axis fitted to them (from 0, a tenth above the highest, at most 100%)."""
    if len(tokens) and tokens.max() > 20 * max(tokens.min(), 1):
        ax.set_xscale("log")
    ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: _tokens(v)))
    ax.set_ylim(-0.02, _fit_top(list(pd.to_numeric(scores, errors="coerce"))) / 1.17 + 0.05)
    ax.margins(x=0.15)
    ax.yaxis.set_major_formatter(mpl.ticker.PercentFormatter(1.0, decimals=0))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)


def score_metric(summary: pd.DataFrame) -> tuple[str, str]:
    """The answer score the score chart plots: J when the run was judged, else the first of the
    field's answer scores (``scoring.answers``: a benchmark's own F1 first)."""
    if judged(summary):
        return "judge_accuracy", "J, judge accuracy (mean over runs)"
    first = metric(answer_score_names()[0])
    return first.name, f"{first.title} (its own definition)"


# Why the field's answer scores of a conversational reply are low (the report's note too).
CONVERSATIONAL_NOTE = (
    "Low by construction: F1, BLEU-1 and EM compare the whole reply with a short gold answer, "
    "so a conversational reply scores low even when it is right (and EM is near 0). "
    "memory-lab run --answer-style short asks for a short phrase, the style the field's "
    "papers score."
)


def score_caveats(results: Results, column: str) -> list[str]:
    """What the score chart says under itself: that the replies it scores are the offline
    reader's, and that F1 of conversational replies is low by construction, where so."""
    caveats = []
    stand_in = stand_in_caveat(results)
    if stand_in:
        caveats.append(stand_in.replace("so recall ranks", "so this score, like recall, ranks"))
    spec = results.spec
    style = (spec.answer_style if spec is not None else None) or "conversation"
    if column != "judge_accuracy" and style == "conversation":
        caveats.append(CONVERSATIONAL_NOTE)
    return caveats


def score_tokens_chart(results: Results) -> Figure:
    """The field's trade-off: an answer score (J, else F1) against prompt tokens per query."""
    with chart_style():
        summary = summarize(results)
        column, label = score_metric(summary)
        summary = summary.dropna(subset=[column, "tokens_per_query"])
        colors = memory_colors(results)
        fig = _figure(8.0, 5.5)
        ax = fig.add_subplot()
        for r in summary.to_dict("records"):
            ax.scatter(
                r["tokens_per_query"],
                r[column],
                s=70,
                color=colors[r["memory"]],
                edgecolors="black",
                linewidths=0.5,
                gid=f"point:{r['memory']}",
            )
        _score_token_axes(
            ax,
            summary["tokens_per_query"],
            "prompt tokens per query (mean over probes)",
            label,
            f"{label.split(',')[0]} against tokens per query (up and left is better)",
            summary[column],
        )
        points = [
            (
                r["tokens_per_query"],
                r[column],
                r["memory"],
                colors[r["memory"]],
                r[column],
                r[column],
            )
            for r in summary.sort_values(column, ascending=False).to_dict("records")
        ]
        _caption(fig, *score_caveats(results, column))
        _place_labels(fig, ax, points)
        return fig


def _tokens(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.3g}M"
    if v >= 1e3:
        return f"{v / 1e3:.3g}k"
    return f"{v:g}"


def prompt_growth_chart(results: Results, dialogue: str | None = None) -> Figure:
    """Prompt tokens per exchange (top) and cumulative memory-maintenance tokens (bottom).

    ``dialogue`` picks one dialogue (default: the longest); ``"all"`` averages every dialogue
    per exchange index.
    """
    with chart_style():
        growth = prompt_growth(results, dialogue)
        name = growth.dialogue
        colors = memory_colors(results)
        fig = _figure(9.0, 6.5)
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
        for memory, per in growth.memories.items():
            top.plot(
                per.index,
                per["prompt_tokens"],
                color=colors[memory],
                label=memory,
                lw=1.6,
                gid=f"prompt:{memory}",
            )
            bottom.plot(
                per.index,
                per["memory_tokens"],
                color=colors[memory],
                linestyle="--",
                lw=1.4,
                label=memory,
                gid=f"memory_tokens:{memory}",
            )
        for session, start in growth.sessions.items():
            for ax in (top, bottom):
                ax.axvline(start - 0.5, color="0.6", lw=0.8, ls=":")
            top.text(
                start - 0.3,
                1.0,
                f"session {session}",
                transform=top.get_xaxis_transform(),
                fontsize=7,
                color="0.4",
                va="top",
            )
        title = "average over all dialogues" if name == "all" else f"dialogue {name}"
        top.set_title(f"Prompt tokens per exchange — {title}")
        top.set_ylabel("prompt tokens")
        bottom.set_ylabel("cumulative memory-\nmaintenance tokens")
        bottom.set_xlabel("exchange index (user turn)")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: _tokens(v)))
        top.legend(
            fontsize=8,
            ncols=1 if len(colors) <= 6 else 2,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            frameon=False,
        )
        return fig


def category_heatmap(results: Results) -> Figure:
    """The figure the run is ranked by (as ``recall_chart``: J, recall or evidence recall) per
    memory and probe category, each cell annotated with the probes it is over."""
    with chart_style():
        lead = ranking_metric([results], summarize(results)) or metric("evidence_recall")
        column = {"judge_accuracy": "judge_correct", "accuracy": "correct"}.get(
            lead.name, lead.name
        )
        acc, count = category_grid(results, column)
        memories, cats = list(acc.index), list(acc.columns)
        fig = _figure(max(6.0, 1.6 + 0.95 * len(cats)), max(3.0, 1.4 + 0.5 * len(memories)))
        ax = fig.add_subplot()
        ax.spines[:].set_visible(False)
        cmap = mpl.colormaps["RdYlGn"].with_extremes(bad="0.9")
        image = ax.imshow(
            np.ma.masked_invalid(acc.to_numpy(float)), cmap=cmap, vmin=0, vmax=1, aspect="auto"
        )
        for i in range(len(memories)):
            for j in range(len(cats)):
                v = acc.iat[i, j]
                text = "–" if pd.isna(v) else f"{percent(v, digits=0)}\nn={int(count.iat[i, j])}"
                dark = not pd.isna(v) and (v < 0.2 or v > 0.85)
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if dark else "black",
                )
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, rotation=30, ha="right")
        ax.set_yticks(range(len(memories)))
        ax.set_yticklabels(memories)
        ax.set_xlabel("probe category")
        ax.set_title(f"{lead.title.split(' (')[0]} by probe category")
        bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
        bar.ax.yaxis.set_major_formatter(mpl.ticker.PercentFormatter(1.0))
        _caption(fig, f"n: the probes of the category it is over ({lead.over}; – none).")
        return fig


def token_breakdown_chart(results: Results) -> Figure:
    """Stacked tokens per memory: prompt, completion, memory maintenance; estimated cost on each."""
    with chart_style():
        summary = summarize(results)
        colors = memory_colors(results)
        n = len(summary)
        fig = _figure(9.0, max(3.0, 1.5 + 0.55 * n))
        ax = fig.add_subplot()
        y = np.arange(n)[::-1]
        cols = [colors[m] for m in summary["memory"]]
        left = np.zeros(n)
        parts = [
            ("prompt_tokens", "conversation prompt", {"color": cols}),
            ("completion_tokens", "completion", {"color": [(*c[:3], 0.45) for c in cols]}),
            (
                "memory_tokens",
                "memory maintenance (memory LLM + embeddings)",
                {"color": "white", "edgecolor": cols, "hatch": "///"},
            ),
        ]
        for column, label, style in parts:
            values = summary[column].to_numpy(float)
            bars = ax.barh(y, values, left=left, height=0.6, label=label, linewidth=0.8, **style)
            for b in bars:
                b.set_gid(column)
            left += values
        for yi, total, cost in zip(y, left, summary["est_cost_usd"], strict=True):
            text = "est. cost n/a" if pd.isna(cost) else f"≈ ${cost:.4f} (est.)"
            ax.text(total, yi, f"  {_tokens(total)} tok · {text}", va="center", fontsize=8)
        ax.set_yticks(y)
        ax.set_yticklabels(summary["memory"])
        ax.set_xlim(0, max(left.max(), 1) * 1.45)
        ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: _tokens(v)))
        ax.set_xlabel("tokens over the whole run")
        model = results.pricing.llm_model
        priced = f" — cost estimated at {model} prices" if model else ""
        ax.set_title(f"Where the tokens go{priced}")
        ax.legend(
            handles=[
                Patch(facecolor="0.35", label=parts[0][1]),
                Patch(facecolor=(0.35, 0.35, 0.35, 0.45), label=parts[1][1]),
                Patch(facecolor="white", edgecolor="0.35", hatch="///", label=parts[2][1]),
            ],
            loc="lower right",
            fontsize=8,
            frameon=True,
        )
        return fig


CHARTS = {
    "recall": recall_chart,
    "cost_frontier": cost_frontier_chart,
    "prompt_growth": prompt_growth_chart,
    "category_heatmap": category_heatmap,
    "token_breakdown": token_breakdown_chart,
    "score_tokens": score_tokens_chart,
}


def save_charts(results: Results, out_dir: str | Path | None = None) -> list[Path]:
    """Write every chart as PNG and SVG under ``<results folder>/charts/``; return the paths.
    Never through a link: a ``charts`` folder or a chart file that is one is refused
    (``log/safe_files.py``)."""
    folder = check_folder(Path(out_dir) if out_dir else Path(results.path) / CHARTS_DIR)
    paths = []
    with chart_style():
        for name, make in CHARTS.items():
            fig = make(results)
            for ext in ("png", "svg"):
                path = folder / f"{name}.{ext}"
                meta = {"Date": None} if ext == "svg" else {}
                with open_new(path, "wb") as fh:
                    fig.savefig(fh, format=ext, dpi=130, metadata=meta)
                paths.append(path)
    return paths
