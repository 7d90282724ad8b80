"""The terminal's tables: a run's summary, latency, judge block and recall by category.

They read the frames ``results/summary.py`` computes (``summarize``, ``summarize_by_category``) and
print fixed-width text; nothing here computes a figure of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from memory_lab.log.run_spec import JudgePrompt, RunSpec
from memory_lab.models.accounting import LOCAL_PRICE_MODEL
from memory_lab.results.role_costs import RoleCost
from memory_lab.results.summary import FIELD_SCORES, LATENCY_COLUMNS
from memory_lab.scoring.metrics import Metric, all_metrics
from memory_lab.views.numbers import EMPTY, is_missing, percent

Run = RunSpec | dict[str, Any] | None  # a run's spec, or run.json as read (notebooks)


def _spec(run: Run) -> RunSpec | None:
    return RunSpec.read(run, "run.json") if isinstance(run, dict) and run else run or None


def _offline_reader(run: Run) -> bool:
    spec = _spec(run)
    return spec is not None and spec.reader_model.offline


def priced_local(run: Run) -> bool:
    """Whether every token of the run is priced as a local model's (nothing to estimate)."""
    spec = _spec(run)
    pricing = spec.pricing if spec is not None else None
    return (
        pricing is not None and pricing.llm_model == pricing.embeddings_model == LOCAL_PRICE_MODEL
    )


def format_category_table(table: pd.DataFrame) -> str:
    """Recall (%), then evidence recall (%), per category (rows) and memory (columns) for the
    terminal; ``-`` where a figure is not defined (recall of a cognitive probe, evidence recall
    of an abstention probe)."""
    if table.empty:
        return ""
    label = table["category"] + table["source_category"].map(lambda s: f" ({s})" if s else "")
    blocks = []
    for column, title in (
        ("accuracy", "recall % by category"),
        ("evidence_recall", "evid-recall % by category"),
    ):
        wide = table.assign(label=label).pivot(index="label", columns="memory", values=column)
        wide = wide[list(dict.fromkeys(table["memory"]))]
        wide.index.name, wide.columns.name = title, None
        blocks.append((100 * wide).round(1).to_string(na_rep="-"))
    return "\n\n".join(blocks)


def summary_metrics(summary: pd.DataFrame) -> list[Metric]:
    """The summary table's columns: the declared figures shown there (``Metric.table``), in
    their declared order, those the summary has."""
    return [m for m in all_metrics() if m.table and m.name in summary]


def metric_text(
    m: Metric, r: dict[str, Any], *, local: bool = False, missing: str = EMPTY, dash: str = "–"
) -> str:
    """A summary row's figure as the tables write it, by its declared unit: a share as a
    percent, a score with three decimals, counts and tokens whole with thousands separators,
    seconds with one decimal, a cost as ``cost_text`` writes it (without its ``$``: the label
    has it; ``local`` for a local model's); then its interval (``[low{dash}high]``) or its
    spread (``± sd``) where declared. ``missing`` where the figure is not defined."""
    x = r.get(m.name)
    if m.unit == "usd":
        return cost_text(x, local=local).removeprefix("$")
    if is_missing(x):
        return missing

    def text(x: Any) -> str:
        return _UNIT_TEXT.get(m.unit, str)(x)

    bounds = [r.get(c) for c in m.interval or ()]
    if bounds and not any(map(is_missing, bounds)):  # an interval: [low-high]
        return f"{text(x)} [{text(bounds[0])}{dash}{text(bounds[1])}]"
    if m.spread and not is_missing(r.get(m.spread)):
        return f"{text(x)} ± {text(r[m.spread])}"
    return text(x)


_UNIT_TEXT = {
    "share": percent,
    "score": lambda x: f"{x:.3f}",
    "count": lambda x: f"{x:,.0f}",
    "tokens": lambda x: f"{x:,.0f}",
    "seconds": lambda x: f"{x:.1f}",
    "ms": lambda x: f"{x:,.2f}",
}
# The terminal's narrowest column per unit (with an interval: "100.0% [100.0%-100.0%]"), so a
# column keeps its place from run to run.
_NARROWEST = {"share": 6, "seconds": 6}


def _width(m: Metric) -> int:
    narrowest = _NARROWEST.get(m.unit, 0)
    return 3 * narrowest + 4 if m.interval else narrowest


def format_summary(summary: pd.DataFrame, run: Run = None) -> str:
    """The summary as a fixed-width table for the terminal, its columns the declared figures
    (``summary_metrics``): retrieval first, then recall, tokens, cost and seconds."""
    width = max([28, *(len(str(m)) for m in summary.get("memory", []))])
    local = priced_local(run)
    records = summary.to_dict("records")
    columns = []  # (heading, its cells, width)
    for m in summary_metrics(summary):
        # right-aligned: a missing share sits under the point of the others
        missing = "   -  " if m.unit == "share" else "-"
        cells = [metric_text(m, r, local=local, missing=missing, dash="-") for r in records]
        columns.append((m.heading, cells, max([len(m.heading), _width(m), *map(len, cells)])))
    header = f"{'memory':<{width}}" + "".join(f" {h:>{w}}" for h, _, w in columns)
    lines = [header, "-" * len(header)]
    for i, r in enumerate(records):
        lines.append(f"{r['memory']:<{width}}" + "".join(f" {c[i]:>{w}}" for _, c, w in columns))
    lines += format_latency(summary, width)
    spec = _spec(run)
    notes = summary_notes(spec, summary)
    lines += [notes[k] for k in ("reader", "price", "window") if k in notes]
    lines += format_judge_summary(summary, spec)  # --judge: J, its spread and agreement
    return "\n".join(lines)


def format_role_costs(roles: Sequence[RoleCost], title: str) -> list[str]:
    """A run's tokens and estimated cost by model role (``results.role_costs``), then its total
    (``title``: what the lines are of, e.g. ``DRY RUN``). A role priced as a local model reads
    ``local``; one whose model the price table lacks, ``no list price`` (left out of the
    total, which says so)."""
    if not roles:
        return []
    width = max(len(r.model) for r in roles)
    lines = [f"{title} estimate by role (tokens priced as the price table entry named):"]
    for r in roles:
        out = f"{r.output_tokens:>11,} out" if r.role != "embeddings" else " " * 15
        lines.append(
            f"  {r.role:<10} {r.model:<{width}} {r.input_tokens:>13,} in {out}  "
            f"{cost_text(r.cost_usd, local=r.local):>9}  ({r.price_model or 'no entry'})"
        )
    priced = [r for r in roles if not math.isnan(r.cost_usd)]
    unpriced = [r.role for r in roles if math.isnan(r.cost_usd)]
    total = f"{title} total: {sum(r.tokens for r in roles):,} tokens, est. "
    total += cost_text(sum(r.cost_usd for r in priced), local=all(r.local for r in priced))
    total += " for the whole run"
    if unpriced:
        total += f" ({', '.join(unpriced)} not priced: no list price)"
    return [*lines, total]


def cost_text(usd: float, *, local: bool = False) -> str:
    """An estimated cost as every view writes it: ``$0.0123``; ``local`` for a model served on
    the user's own machine or server (priced at 0 unless ``--prices`` says otherwise);
    ``no list price`` where the price table has no entry."""
    if local:
        return "local"
    if usd is None or math.isnan(usd):
        return "no list price"
    return f"${usd:.4f}"


def summary_notes(run: Run, summary: pd.DataFrame | None = None) -> dict[str, str]:
    """The notes under a run's summary table, by kind: ``reader`` (recall is the offline
    reader's, when it is), ``price`` (what est. cost is priced as, when run.json names it) and
    ``window`` (the context limit and, from the run's ``summary``, what it cut: ``window_note``).
    The terminal prints them under its table, the report under its own."""
    spec = _spec(run)
    notes = {}
    if _offline_reader(spec):
        label = {m.name: m.label for m in all_metrics()}
        notes["reader"] = (
            f"{label['accuracy']} and {label['abstention_accuracy']} are the offline reader's (an "
            "extractive instrument, not a chat model); "
            f"{label['evidence_recall']} and {label['context_hit_rate']} do not depend on it."
        )
    if spec is not None and spec.pricing.llm_model:
        notes["price"] = (
            f"est. cost is an estimate: LLM tokens priced as {spec.pricing.llm_model}, "
            f"embedded tokens as {spec.pricing.embeddings_model} (memory_lab/data/prices.json)."
        )
        if LOCAL_PRICE_MODEL in (spec.pricing.llm_model, spec.pricing.embeddings_model):
            notes["price"] += (
                " local: a model the price table does not know, served by Ollama or --base-url,"
                " costs nothing; --prices FILE --price-model NAME prices it."
            )
    window = window_note(spec, summary)
    if window:
        notes["window"] = window
    return notes


def compact(tokens: float) -> str:
    """A token count as a note says it: 950, 12,400, 312K, 3.1M."""
    if tokens >= 1e6:
        return f"{tokens / 1e6:.1f}M"
    return f"{tokens / 1e3:.0f}K" if tokens >= 1e5 else f"{tokens:,.0f}"


def window_note(spec: RunSpec | None, summary: pd.DataFrame | None) -> str | None:
    """The run's context limit (``windows.describe``) and, per memory whose prompts it cut, how
    many and how many tokens: beyond the window a "full context" is a truncated one. None for a
    run that recorded no limit and no source (before both were recorded)."""
    if spec is None or (spec.context_limit is None and "context_limit_source" in spec.absent):
        return None
    note = f"context limit: {spec.context_limit_text}"
    if spec.context_limit is None:
        return note + "; no prompt was cut."
    rows = [] if summary is None or "prompts_cut" not in summary else summary.to_dict("records")
    cut = [r for r in rows if r["prompts_cut"] and not pd.isna(r["prompts_cut"])]
    if not cut:
        return note + "; no prompt was cut."
    parts = []
    for r in cut:
        tokens = r["context_cut_tokens"]
        told = "tokens cut not recorded" if pd.isna(tokens) else f"{compact(tokens)} tokens cut"
        parts.append(f"{r['memory']}: {r['prompts_cut']:,} of {r['prompts']:,} prompts cut, {told}")
    return (
        f'{note}. {"; ".join(parts)}. Beyond the limit a memory\'s "full context" is a '
        "truncated context: its oldest text was dropped."
    )


def format_latency(summary: pd.DataFrame, width: int = 28) -> list[str]:
    """The latency and footprint block under the summary table (``LATENCY_COLUMNS``), times in
    milliseconds (``summary.csv`` keeps seconds)."""
    if not all(c in summary for c in LATENCY_COLUMNS):
        return []
    header = (
        f"{'memory':<{width}} {'search p50 ms':>13} {'search p95 ms':>13} {'total p50 ms':>12} "
        f"{'total p95 ms':>12} {'tokens/query':>12} {'tokens held':>11}"
    )
    lines = ["", header, "-" * len(header)]

    def num(x: float, spec: str, scale: float = 1.0) -> str:
        return "-" if is_missing(x) else format(x * scale, spec)

    for r in summary.to_dict("records"):
        ms = [num(r[c], ",.1f", 1000) for c in LATENCY_COLUMNS[:4]]
        lines.append(
            f"{r['memory']:<{width}} {ms[0]:>13} {ms[1]:>13} {ms[2]:>12} {ms[3]:>12} "
            f"{num(r['tokens_per_query'], ',.0f'):>12} {num(r['memory_tokens_held'], ',.0f'):>11}"
        )
    lines += [
        "search: the memory read per probe; total: search + the answering call; p50/p95 by",
        "linear interpolation (numpy's default); tokens held: mean footprint at dialogue end.",
    ]
    return lines


def format_reader_line(table: pd.DataFrame, run: Run = None) -> str:
    """One line: the answering model's accuracy when the answer was in its prompt, by language."""
    if table.empty:
        return ""
    who = "offline reader" if _offline_reader(run) else "answering model"
    parts = ", ".join(
        f"{r['language']} {percent(r['reader_accuracy'])} of {r['probes_with_hit']}"
        for r in table.to_dict("records")
    )
    return f"{who}, accuracy on probes with the answer in its prompt: {parts}"


def format_judge_summary(summary: pd.DataFrame, run: Run = None) -> list[str]:
    """Lines for the terminal: J mean ± sd per grading prompt beside string recall, the field's
    answer scores when the summary has them, and kappa; nothing for a run without a judge."""
    spec = _spec(run)
    judge = spec.judge if spec is not None else None
    if "judge_accuracy" not in summary.columns or judge is None:
        return []
    prompts = judge.prompts or (JudgePrompt("p1", judge.prompt_file, None, judge.prompt_version),)
    labels = [p.label for p in prompts]
    scores = [c for c in FIELD_SCORES if c in summary.columns]
    width = max([12, *(len(str(m)) for m in summary["memory"])])

    def pct(x: Any) -> str:
        return percent(x, missing="-")

    def num(x: Any) -> str:
        return "-" if is_missing(x) else f"{round(x, 2) + 0.0:.2f}"  # never "-0.00"

    def cell(label: str, r: dict[str, Any]) -> str:
        suffix = "" if label == labels[0] else f"_{label}"
        mean, sd = r.get(f"judge_accuracy{suffix}"), r.get(f"judge_accuracy_sd{suffix}")
        shown = pct(mean)
        if not is_missing(mean):
            shown += " ± " + ("-" if is_missing(sd) else f"{100 * sd:.1f}")
        return shown

    head = [f"{'memory':<{width}}", f"{'recall':>7}", *(f"{c:>9}" for c in scores)]
    for label in labels:
        head += [f"{'J ' + label + ' (mean ± sd)':>19}", f"{'κ ' + label + '~recall':>12}"]
    head += [f"{'κ ' + labels[0] + '~' + label:>9}" for label in labels[1:]]
    runs = int(judge.runs or 1)
    named = "; ".join(f"{p.label} = {p.file} ({p.version})" for p in prompts)
    lines = [
        "",
        f"judge ({spec.judge_model}): temperature {judge.temperature:g}, "
        f"{runs} run(s) per prompt; {named}",
        " ".join(head),
    ]
    for r in summary.to_dict("records"):
        parts = [f"{r['memory']:<{width}}", f"{pct(r['accuracy']):>7}"]
        parts += [f"{num(r.get(c)):>9}" for c in scores]
        for label in labels:
            suffix = "" if label == labels[0] else f"_{label}"
            parts += [f"{cell(label, r):>19}", f"{num(r.get(f'judge_kappa{suffix}')):>12}"]
        parts += [f"{num(r.get(f'judge_kappa_{labels[0]}_{label}')):>9}" for label in labels[1:]]
        lines.append(" ".join(parts))
    lines.append(
        "J: judge accuracy over answerable probes, mean ± sample sd (n-1) over runs, in "
        "points; κ: Cohen's kappa of each prompt's majority verdict against string match "
        "(recall) or the first prompt's ('-': undefined, every label the same)."
    )
    return lines
