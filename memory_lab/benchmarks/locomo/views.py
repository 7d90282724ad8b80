"""What LoCoMo adds to the report: other systems' published LoCoMo figures, for runs over LoCoMo
only, labelled as such (``published.json``: J, p95 latency and tokens per query as published)."""

from __future__ import annotations

from memory_lab.benchmarks.declaration import Benchmark, ViewContext
from memory_lab.views.html_kit import escape, percent, table


def section(benchmark: Benchmark, context: ViewContext) -> str | None:
    """The published figures, when the run's probes came from the LoCoMo importer."""
    if not benchmark.covers(context.combined.probes):
        return None
    data = benchmark.published_figures()
    rows = [
        [
            escape(r["system"]),
            percent(r["j"]),
            "—" if r.get("p95_seconds") is None else f"{r['p95_seconds']:g}",
            "—" if r.get("tokens_per_query") is None else f"{r['tokens_per_query']:,}",
            escape(r["source"]),  # as text: the report makes no link out
            escape(r["source_note"]),
        ]
        for r in data["rows"]
    ]
    header = ["system", "J", "p95 latency s", "tokens/query", "source", "as published"]
    note = f"{data['about']} Their model: {data['model']} ({data['model_source']})."
    return (
        '<h2 id="published">Published figures on LoCoMo (other models, prompts and judges)</h2>'
        + f"<p class=note>{escape(note)}</p>"
        + table(header, rows, "id=published")
    )
