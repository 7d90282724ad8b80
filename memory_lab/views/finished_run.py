"""What the terminal shows of a run that just ended: the summary table (a dry run's notes around
it and its estimate by role), the reader's line, a note on the adversarial probes set apart, recall
by category and the answer (the report's).

The figures come from the run's folder through ``results/read.py`` and the tables of
``views/tables.py``; ``memory-lab run`` prints the text.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memory_lab.benchmarks import set_apart
from memory_lab.results.read import Results, read_results
from memory_lab.results.role_costs import role_costs
from memory_lab.results.summary import (
    adversarial_apart,
    reader_accuracy,
    summarize_by_category,
)
from memory_lab.views.tables import (
    format_category_table,
    format_reader_line,
    format_role_costs,
    format_summary,
)


def finished_run_text(folder: str | Path, summary: pd.DataFrame) -> str:
    """The text for the run in ``folder`` whose summary (``RunOutcome.summary``) is ``summary``."""
    results = read_results(folder, prompts=False)  # the tables need no prompt text
    spec = results.spec
    dry_run = spec is not None and spec.dry_run
    lines = []
    if dry_run:
        wanted = ", ".join(f"{k}={v}" for k, v in spec.dry_run.items())
        lines.append(f"DRY RUN ({wanted}): no provider was called; tokens come from the offline")
        lines.append(
            "stand-ins and are priced as the requested models. Recall figures are not theirs."
        )
    lines.append(format_summary(summary, spec))
    if dry_run and len(summary):
        lines += format_role_costs(role_costs(results), "DRY RUN")
    reader_line = format_reader_line(reader_accuracy(results), spec)
    if reader_line:
        lines.append(reader_line)
    notes = (startup_note(results), reader_time_note(results), adversarial_note(results))
    lines += [note for note in notes if note]
    lines += ["", format_category_table(summarize_by_category(results))]
    lines += answer_lines(results, summary)
    return "\n".join(lines)


def answer_lines(results: Results, summary: pd.DataFrame) -> list[str]:
    """The answer the report and the viewer lead with (``views/headline.py``: the same rule,
    over the same summary, paired comparison and facts as ``report.comparison``), after the
    tables (a run just ended has no benchmark scores yet: ``memory-lab score`` adds them to
    the report's)."""
    from memory_lab.results.pairs import paired_comparison
    from memory_lab.results.standings import run_facts
    from memory_lab.views.headline import headline

    if results.probes.empty or summary.empty:  # no probe was asked: no answer
        return []
    pairs = paired_comparison(results)
    pairs = pairs[pairs["probes"] > 0].reset_index(drop=True) if len(pairs) else pairs
    lines = headline(summary, pairs, run_facts([results], summary))
    return ["", "The answer:", *(f"  {line}" for line in lines)] if lines else []


def startup_note(results: Results) -> str | None:
    """The seconds the run's processes spent loading models and engines before their first
    cell (``CellRecord.startup_seconds``): in no memory's seconds."""
    cells = results.cells
    if cells.empty or "startup_seconds" not in cells:
        return None
    startup = pd.to_numeric(cells["startup_seconds"], errors="coerce").dropna()
    if startup.empty:
        return None
    if len(startup) == 1:
        took = f"{startup.iloc[0]:.1f} s loading models and engines"
    else:
        took = f"up to {startup.max():.1f} s loading models and engines in each of "
        took += f"{len(startup)} processes"
    return f"startup: {took}, before the first cell: in no memory's sec."


def reader_time_note(results: Results) -> str | None:
    """The seconds the offline reader (the instrument, not a memory) spent answering probes:
    in no memory's sec. (``own_seconds``), apart, so a long answer reads as the reader's."""
    spec, probes = results.spec, results.probes
    if spec is None or not spec.reader_model.offline or probes.empty:
        return None
    if "answer_seconds" not in probes:
        return None
    seconds = pd.to_numeric(probes["answer_seconds"], errors="coerce").fillna(0)
    slowest = probes.loc[seconds.idxmax()]
    return (
        f"offline reader (the instrument): {seconds.sum():.1f} s answering {len(probes)} probes "
        f"(longest {seconds.max():.1f} s, {slowest['memory']}), in no memory's sec."
    )


def adversarial_note(results: Results) -> str | None:
    """That the run's adversarial probes are summarised apart, when they are (each labelled as
    its benchmark declares: ``Benchmark.set_apart_note``)."""
    probes = results.probes
    if not len(probes) or not adversarial_apart(results):
        return None
    labels = probes["probe_metadata"].map(set_apart).dropna()
    if labels.empty:
        return None
    counted = ", ".join(f"{n} {label}" for label, n in labels.value_counts(sort=False).items())
    return (
        f"{counted} probe record(s) are summarised apart (see the table by "
        "category; --adversarial include puts them in the headline)."
    )
