"""One self-contained ``report.html`` per results folder: parameters, summary, charts, tests.

Everything is inline (CSS, JS, charts as base64 SVG images), so the report opens with no network.
All text from dialogues and replies is escaped.
"""

from __future__ import annotations

import base64
import io
import json
import math
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from memory_lab.benchmarks import ViewContext, benchmarks
from memory_lab.log.run_spec import RunSpec
from memory_lab.log.safe_files import write_replacing
from memory_lab.models.accounting import LOCAL_PRICE_MODEL
from memory_lab.results.compare import combine, compare_summary, differences, run_names
from memory_lab.results.judge_costs import judge_costs
from memory_lab.results.pairs import paired_comparison
from memory_lab.results.read import Results, read_results
from memory_lab.results.standings import ranking_metric, run_facts
from memory_lab.results.summary import FIELD_SCORES, summarize, summarize_by_category
from memory_lab.scoring.metrics import PROBES, benchmark_metrics, metric
from memory_lab.views.charts import CHARTS, CONVERSATIONAL_NOTE, chart_style
from memory_lab.views.headline import headline
from memory_lab.views.html_kit import table
from memory_lab.views.numbers import EMPTY, is_missing, percent
from memory_lab.views.report_assets import CLIP_CHARS, CLIP_LINES, CSS, JS
from memory_lab.views.tables import (
    cost_text,
    metric_text,
    priced_local,
    summary_metrics,
    summary_notes,
)

REPORT_FILE = "report.html"


def _svg_data_uri(fig) -> str:
    buffer = io.BytesIO()
    with chart_style():
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _run_section(spec: RunSpec | None, name: str | None = None) -> str:
    spec = spec if spec is not None else RunSpec.read({})  # no run.json: every field absent
    models, pricing = spec.models, spec.pricing

    def model(name: str) -> str | None:  # as recorded; None when run.json has no models
        return None if name in models.absent else str(getattr(models, name))

    items = [
        ("run id", spec.run_id),
        ("started", spec.started),
        ("finished", spec.finished),
        ("status", None if "status" in spec.absent else spec.status),
        ("mode", spec.mode),
        ("answering model", f"{model('llm')} ({models.llm_model})"),
        ("memory LLM", f"{model('memory_llm')} ({models.memory_llm_model})"),
        ("embeddings", model("embeddings")),
        ("tokenizer", models.tokenizer),
        ("priced as", f"{pricing.llm_model} / {pricing.embeddings_model}"),
        ("context limit", spec.context_limit_text),
        ("dialogue sources", ", ".join(spec.dialogue_sources)),
        ("python / platform", f"{spec.python} / {spec.platform}"),
    ]
    params = [[escape(k), escape(str(v))] for k, v in items if v not in (None, "")]
    specs = [
        [escape(s.label), escape(s.name), escape(json.dumps(s.params))] for s in spec.memory_specs
    ]
    dialogues = [
        [escape(d.id), escape(str(d.language)), str(d.turns), str(d.probes)] for d in spec.dialogues
    ]
    title = "Run parameters" + (f" — {name}" if name else "")
    return (
        f'<h2 id="run-{escape(name or "", True)}">{escape(title)}</h2>'
        + table(["parameter", "value"], params)
        + "<h3>Memories</h3>"
        + table(["memory", "factory", "parameters"], specs)
        + "<h3>Dialogues</h3>"
        + table(["dialogue", "language", "turns", "probes"], dialogues)
    )


def _summary_section(summary: pd.DataFrame, notes: list[str], local: bool = False) -> str:
    """The summary table: the declared figures (``tables.summary_metrics``, the terminal's
    columns), each headed by its label and hinting on hover what it is over and which way is
    better, written as the terminal writes them (``tables.metric_text``); ``local``: every token
    priced as a local model's (cost ``local``)."""
    metrics = summary_metrics(summary)
    rows = [
        [escape(r["memory"]), *(escape(metric_text(m, r, local=local)) for m in metrics)]
        for r in summary.to_dict("records")
    ]
    html = table(["memory", *(m.heading for m in metrics)], rows, 'class="num" id=summary-table')
    for m in metrics:  # each heading's hover: what it is over, which way is better
        heading = f">{escape(m.heading)}</th>"
        html = html.replace(heading, f' title="{escape(m.hint)}"{heading}', 1)
    return (
        '<h2 id="summary">Summary</h2>'
        + html
        + "".join(f"<p class=note>{escape(note)}</p>" for note in notes)
    )


def _num(x: Any, digits: int = 3) -> str:
    return EMPTY if is_missing(x) else f"{x:.{digits}f}"


def _ms(x: Any) -> str:
    return EMPTY if is_missing(x) else f"{x * 1000:,.1f}"


def _judge_cell(r: dict[str, Any]) -> str:
    mean = r.get("judge_accuracy")
    if is_missing(mean):
        return EMPTY
    sd = r.get("judge_accuracy_sd")
    spread = "" if is_missing(sd) else f" ± {percent(sd)}"
    return percent(mean) + spread


def metrics_note() -> str:
    """What the field metrics section says of its figures: each by its source's definition
    (a benchmark's own score as its declaration's ``source`` says)."""
    own = "".join(
        f"{m.label} is {m.source}; " for m in benchmark_metrics() if m.source and m.unit == "score"
    )
    return (
        "The field's metrics, each by its source's definition: J is the judge's accuracy (mean ± "
        f"sample sd over --judge-runs); {own}F1 mem0, BLEU-1 and EM are mem0's "
        "(evaluation/metrics/utils.py: token sets; NLTK BLEU-1 with smoothing 1). Search is the "
        "memory read for a probe's prompt, total adds the answering call; p50/p95 by linear "
        "interpolation (numpy's default). Tokens held: what the memory holds at the dialogue's "
        "end."
    )


OFFLINE_JUDGE_NOTE = (
    "J is the offline judge's (a stand-in for an LLM judge that runs without a key), not a "
    "chat model's verdict."
)


def style_note(runs: list[Results], names: list[str]) -> str:
    """``CONVERSATIONAL_NOTE`` when a run answered in the conversational style (run.json's
    answer_style; runs from before the option were conversational), naming those runs when
    only some did; empty when none did."""
    styles = [(r.spec.answer_style if r.spec is not None else None) or "conversation" for r in runs]
    chatty = [n for n, style in zip(names, styles, strict=True) if style == "conversation"]
    if not chatty:
        return ""
    if len(chatty) == len(runs):
        return CONVERSATIONAL_NOTE
    return f"{', '.join(chatty)} answered conversationally. {CONVERSATIONAL_NOTE}"


def _metrics_section(summary: pd.DataFrame, by_category: pd.DataFrame, note: str = "") -> str:
    """The field's metrics per memory, then the answer scores per probe category; ``note``
    explains scores that are low by construction (conversational replies)."""
    rows = [
        [
            escape(r["memory"]),
            _judge_cell(r),
            *(_num(r.get(name)) for name in FIELD_SCORES),
            _ms(r.get("search_seconds_p50")),
            _ms(r.get("search_seconds_p95")),
            _ms(r.get("total_seconds_p50")),
            _ms(r.get("total_seconds_p95")),
            _num(r.get("tokens_per_query"), 0),
            _num(r.get("memory_tokens_held"), 0),
        ]
        for r in summary.to_dict("records")
    ]
    header = [
        "memory",
        "J",
        *(metric(name).label for name in FIELD_SCORES),
        "search p50 ms",
        "search p95 ms",
        "total p50 ms",
        "total p95 ms",
        "tokens/query",
        "tokens held",
    ]
    cat_rows = [
        [
            escape(str(r["memory"])),
            escape(str(r["category"])),
            escape(str(r["source_category"] or "")),
            str(r["probes"]),
            *(_num(r[name]) for name in FIELD_SCORES),
            percent(r["judge_accuracy"]),
        ]
        for r in by_category.to_dict("records")
    ]
    scores = [metric(name).label for name in FIELD_SCORES]
    cat_header = ["memory", "category", "source", "probes", *scores, "J"]
    return (
        '<h2 id="metrics">Field metrics</h2>'
        + (f"<p class=explain>{escape(note)}</p>" if note else "")
        + table(header, rows, 'class="num" id=metrics')
        + f"<p class=note>{escape(metrics_note())}</p>"
        + "<h3>By category</h3>"
        + table(cat_header, cat_rows, 'class="num" id=metrics-by-category')
    )


def _failures_section(results: Results) -> str:
    """The cells that failed, with their errors (their probes are in no figure above)."""
    failed = results.failed_cells()
    if failed.empty:
        return ""
    rows = [
        [escape(str(r["memory"])), escape(str(r["dialogue"])), escape(str(r.get("error") or ""))]
        for r in failed.to_dict("records")
    ]
    count = f"{len(failed)} cell{'s' if len(failed) != 1 else ''} failed"
    cells = len(results.cells)
    return (
        '<h2 id="failed">Failed cells</h2>'
        + f"<p class=note>{count} of {cells}: the records they wrote before failing are "
        "in the figures, the probes they did not reach are not.</p>"
        + table(["memory", "dialogue", "error"], rows)
    )


def chart_uris(results: Results) -> list[dict[str, str]]:
    """Every chart (``charts.CHARTS``) as an SVG data URI: name, title and uri."""
    return [
        {"name": name, "title": name.replace("_", " "), "uri": _svg_data_uri(make(results))}
        for name, make in CHARTS.items()
    ]


def _charts_section(results: Results) -> str:
    parts = ['<h2 id="charts">Charts</h2>']
    for chart in chart_uris(results):
        parts.append(
            f'<figure><img class=chart alt="{escape(chart["title"])}" src="{chart["uri"]}">'
            "</figure>"
        )
    return "\n".join(parts)


def _pairs_section(pairs: pd.DataFrame) -> str:
    rows = [
        [
            escape(r["memory_a"]),
            escape(r["memory_b"]),
            str(r["probes"]),
            f"{percent(r['accuracy_a'])} vs {percent(r['accuracy_b'])}",
            f"{100 * r['difference']:+.1f} pp "
            f"[{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}]",
            f"{r['only_a']} / {r['only_b']}",
            f"{r['p_mcnemar']:.4g}",
            f"{r['p_holm']:.4g}",
        ]
        for r in pairs.to_dict("records")
    ]
    header = [
        "memory A",
        "memory B",
        "paired probes",
        f"{metric('accuracy').label} A vs B",
        "A − B (95% CI)",
        "only A / only B right",
        "McNemar exact p",
        "Holm-adjusted p",
    ]
    return (
        '<h2 id="pairs">Paired comparison on the same probes</h2><p class=note>Each pair of '
        "memories is "
        f"compared on the probes both answered, of those recall is over ({PROBES}: the "
        "summary's). <b>McNemar exact p</b>: two-sided exact binomial "
        "test on the discordant probes (only A right vs only B right, p = ½). <b>95% CI</b> of the "
        "accuracy difference: Newcombe's hybrid score interval for paired proportions (1998, "
        "method 10, from Wilson intervals with the pairs' correlation). <b>Holm-adjusted p</b> "
        "corrects for testing every pair.</p>" + table(header, rows, 'class="num"')
    )


def clipped(text: str) -> str:
    """``text`` escaped for a table cell; a long one (over ``CLIP_CHARS`` characters or
    ``CLIP_LINES`` lines) inside a closed ``<details>``: its ``<summary>`` holds the whole text,
    shown ``CLIP_LINES`` lines deep until opened (CSS only: no script, nothing cut from the
    page, the filter and the sort read all of it)."""
    shown = escape(text)
    if len(text) <= CLIP_CHARS and text.count("\n") < CLIP_LINES:
        return shown
    more = escape(f"▸ show all ({len(text):,} characters)", True)
    summary = f'<summary data-more="{more}"><span>{shown}</span></summary>'
    return f"<details class=clip>{summary}</details>"


def _text_cell(text: str, widen: bool = True) -> str:
    """A probe's question, expected answer or reply as a table cell (``clipped``); a long
    question or answer (``widen``) is kept from narrowing to a column of single words."""
    return f"<td{' class=long' if widen and len(text) > 120 else ''}>{clipped(text)}</td>"


def _probes_section(probes: pd.DataFrame, memories: list[str]) -> str:
    if probes.empty:
        return '<h2 id="probes-section">Probes</h2><p>No probes recorded.</p>'
    categories = sorted(set(probes["category"]))
    options = "".join(f'<option value="{escape(m, True)}">{escape(m)}</option>' for m in memories)
    cat_options = "".join(
        f'<option value="{escape(c, True)}">{escape(c)}</option>' for c in categories
    )
    rows = []
    for r in probes.to_dict("records"):
        answers = " | ".join(r.get("answers") or []) or "(abstain)"
        hit = r.get("context_hit")
        hit_text = EMPTY if is_missing(hit) else ("yes" if hit else "no")
        rows.append(
            f'<tr data-memory="{escape(r["memory"], True)}" '
            f'data-category="{escape(r["category"], True)}" '
            f'data-correct="{"yes" if r["correct"] else "no"}">'
            f"<td>{escape(r['memory'])}</td><td>{escape(r['dialogue'])}</td>"
            f"<td>{escape(r['category'])}</td>{_text_cell(str(r['question']))}"
            f"{_text_cell(answers)}{_text_cell(str(r['reply']), widen=False)}"
            f'<td class="{"ok" if r["correct"] else "bad"}">{"✓" if r["correct"] else "✗"}</td>'
            f"<td>{hit_text}</td></tr>"
        )
    return f"""<h2 id="probes-section">Probes</h2>
<div class=filters>
<input id=q type=search placeholder="filter question, expected, reply…" aria-label="text filter">
<select id=fmemory aria-label="memory"><option value="">all memories</option>{options}</select>
<select id=fcategory aria-label="category"><option value="">all categories</option>
{cat_options}</select>
<select id=fcorrect aria-label="correct"><option value="">correct or not</option>
<option value="yes">correct</option><option value="no">wrong</option></select>
<span id=count></span></div>
<table id=probes><thead><tr><th>memory</th><th>dialogue</th><th>category</th><th>question</th>
<th>expected</th><th>reply</th><th>correct</th><th>context hit</th></tr></thead><tbody>
{chr(10).join(rows)}
</tbody></table>"""


def toc() -> list[tuple[str, str]]:
    """The contents list: the report's own sections, the benchmarks' (their declarations'
    ``sections``) after the field metrics."""
    own = [
        ("headline", "The answer"),
        ("summary", "Summary"),
        ("charts", "Charts"),
        ("pairs", "Paired comparison"),
        ("metrics", "Field metrics"),
    ]
    declared = [(s.id, s.title) for b in benchmarks().values() for s in b.sections]
    return own + declared + [("failed", "Failed cells"), ("probes-section", "Probes")]


def _headline_section(lines: list[str], notes: list[str]) -> str:
    lines = "".join(f"<li>{escape(line)}</li>" for line in lines)
    notes_html = "".join(f"<p class=note>{escape(note)}</p>" for note in notes)
    return (
        f'<section id="headline"><h2>The answer</h2><ul class=headline>{lines}</ul>'
        f"{notes_html}</section>"
    )


def _toc(sections: list[str], runs: list[str]) -> str:
    """Links to the sections present (by their ids) and to each run's parameters."""
    body = "\n".join(sections)
    links = [(i, t) for i, t in toc() if f'id="{i}"' in body]
    links += [(f"run-{n}", f"Run parameters — {n}" if n else "Run parameters") for n in runs]
    items = "".join(f'<li><a href="#{escape(i, True)}">{escape(t)}</a></li>' for i, t in links)
    return f'<nav id="toc"><b>Contents</b><ol>{items}</ol></nav>'


def _differences_section(diffs: list[tuple[str, dict[str, str]]], names: list[str]) -> str:
    if not diffs:
        return ""
    rows = [[escape(label)] + [escape(values[n]) for n in names] for label, values in diffs]
    return "<h3>Settings that differ between the runs</h3>" + table(
        ["setting", *names], rows, "id=differences"
    )


def _notes(
    runs: list[Results],
    names: list[str],
    summaries: list[pd.DataFrame],
    kinds: tuple[str, ...] | None = None,
) -> list[str]:
    """The summary's notes (``tables.summary_notes``, from each run's own ``summaries``; of
    ``kinds`` only, when given) of every run: a note every run shares once, any other naming
    its run."""
    said = [
        (n, note)
        for r, n, s in zip(runs, names, summaries, strict=True)
        for kind, note in summary_notes(r.spec, s).items()
        if kinds is None or kind in kinds
    ]
    out = []
    for name, note in said:
        everyone = sum(note == other for _, other in said) == len(runs)
        out.append(note if everyone else f"{name}: {note}")
    return list(dict.fromkeys(out))


def judge_notes(runs: list[Results], names: list[str]) -> list[str]:
    """What the judges that scored each run after it finished (``memory-lab score``) spent, from
    their accounts in the run's folder: beside the memories' own tokens, the money a real judge
    costs."""
    lines = []
    for run, name in zip(runs, names, strict=True):
        for cost in judge_costs(run.path):
            price = cost_text(
                math.nan if cost.est_cost_usd is None else cost.est_cost_usd,
                local=cost.price_model == LOCAL_PRICE_MODEL,
            )
            price = price if price in ("local", "no list price") else f"est. {price}"
            where = f"{name}: " if len(runs) > 1 else ""
            lines.append(
                f"{where}judge of {cost.scorer}: {cost.judge}, {cost.calls:,} calls "
                f"({cost.cache_hits:,} from the cache), {cost.input_tokens:,} tokens in, "
                f"{cost.output_tokens:,} out, {price} (not in the table's tokens)."
            )
    return lines


def comparison(runs: list[Results], names: list[str]) -> dict[str, Any]:
    """What a report (or ``memory-lab view``) shows of one or several runs: the combined
    results, the summary, paired differences on shared probes, the headline and the notes."""
    results = combine(runs, names)
    own = [summarize(r) for r in runs]
    summary = compare_summary(runs, names, own)
    pairs = paired_comparison(results)
    pairs = pairs[pairs["probes"] > 0].reset_index(drop=True) if len(pairs) else pairs
    facts = run_facts(runs, summary)
    notes = _notes(runs, names, own) + judge_notes(runs, names)
    stand_in = _notes(runs, names, own, ("reader",))
    judges = [r.spec.judge_model for r in runs if r.spec is not None]
    if any(j is not None and j.offline for j in judges):
        stand_in.append(OFFLINE_JUDGE_NOTE)
    context = ViewContext(runs, names, results, summary, facts)
    declared = [b.headline(context) for b in benchmarks().values() if b.headline is not None]
    return {
        "results": results,
        "summary": summary,
        "pairs": pairs,
        "notes": notes,
        "stand_in": stand_in,
        "headline": headline(summary, pairs, facts, [line for line in declared if line]),
        "context": context,
        "ranked_by": ranking_metric(runs, summary),
        "style_note": style_note(runs, names),
        "differences": differences(runs, names),
    }


# The page's definitions, from the declarations: the same names and probe sets as every view.
DEFINITIONS = (
    f"{metric('evidence_recall').title.split(' (')[0]}: of {metric('evidence_recall').over}, the "
    "mean share of each one's evidence turns the memory's context carried. "
    f"{metric('context_hit_rate').title}: of {metric('context_hit_rate').over}, the share whose "
    f"answer was in the context. {metric('accuracy').title}: of {PROBES}, the share the "
    "answering model got right. Costs are estimates from the price table named below."
)


def benchmark_sections(context: ViewContext) -> list[str]:
    """The sections the benchmarks declare (``Benchmark.sections``), those with something to
    show for these runs."""
    out = [s.render(context) for b in benchmarks().values() for s in b.sections]
    return [html for html in out if html]


def _render(title: str, runs: list[Results], names: list[str]) -> str:
    parts = comparison(runs, names)
    results, summary = parts["results"], parts["summary"]
    sections = [
        _headline_section(parts["headline"], parts["stand_in"]),
        _summary_section(summary, parts["notes"], all(priced_local(r.spec) for r in runs))
        + _differences_section(parts["differences"], names),
        _charts_section(results),
        _pairs_section(parts["pairs"]),
        _metrics_section(summary, summarize_by_category(results), parts["style_note"]),
        *benchmark_sections(parts["context"]),
        _failures_section(results),
        _probes_section(results.probes, results.memory_order()),
    ]
    run_names = names if len(runs) > 1 else [""]
    sections += [_run_section(r.spec, n or None) for r, n in zip(runs, run_names, strict=True)]
    body = "\n".join(
        [
            f"<h1>{escape(title)}</h1>",
            f"<p class=note>{escape(DEFINITIONS)}</p>",
            _toc(sections, run_names),
            *sections,
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n"
        f"<script>{JS}</script>\n</body></html>\n"
    )


def render_report(results: Results) -> str:
    """The report of a results folder as one HTML string."""
    return _render(f"memory-lab report — {results.path.name}", [results], [results.path.name])


def render_comparison(runs: list[Results], names: list[str]) -> str:
    """One page comparing several runs (``compare.combine``): memories labelled ``run/memory``."""
    return _render(f"memory-lab comparison — {', '.join(names)}", runs, names)


def _write(path: Path, html: str) -> Path:
    """``html`` replacing ``path`` atomically, never through a link (``log/safe_files.py``)."""
    return write_replacing(path, html)


def write_report(results_dir: str | Path, results: Results | None = None) -> Path:
    """Write ``report.html`` into the results folder and return its path; ``results``: the
    folder as already read (``prompts="checked"``), so it is not held twice."""
    if results is None:
        results = read_results(results_dir, prompts="checked")  # the page shows no prompt text
    return _write(Path(results_dir) / REPORT_FILE, render_report(results))


def write_comparison(results_dirs: list[str | Path], out: str | Path) -> Path:
    """Write one page comparing several results folders to ``out`` and return its path."""
    paths = [Path(d) for d in results_dirs]
    runs = [read_results(p, prompts="checked") for p in paths]
    return _write(Path(out), render_comparison(runs, run_names(paths)))
