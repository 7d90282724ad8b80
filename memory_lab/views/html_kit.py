"""The report's HTML parts that every section uses, a benchmark's included: an escaped table."""

from __future__ import annotations

from html import escape

from memory_lab.views.numbers import EMPTY, percent

__all__ = ["escape", "percent", "table"]


def table(header: list[str], rows: list[list[str]], attrs: str = "") -> str:
    """An HTML table of escaped cells; a column (other than the first) with no data in any row
    is left out, and named in a line under the table."""
    keep = [
        i
        for i in range(len(header))
        if i == 0 or not rows or any(r[i] not in (EMPTY, "") for r in rows)
    ]
    hidden = [header[i] for i in range(len(header)) if i not in keep]
    head = "".join(f"<th>{escape(header[i])}</th>" for i in keep)
    body = "\n".join("<tr>" + "".join(f"<td>{r[i]}</td>" for i in keep) + "</tr>" for r in rows)
    html = f"<table {attrs}><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"
    if hidden:
        html += f"<p class=note>No data, so not shown: {escape(', '.join(hidden))}.</p>"
    return html
