"""The commands on a finished run: ``report`` (charts and report.html, or one page comparing
runs), ``export`` (a dataset's own format) and ``inspect`` (what one memory puts into the prompt
at a turn)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memory_lab.errors import BadInput

COMPARISON_FILE = "comparison.html"  # memory-lab report A B ...: in the current folder


def report_command(args: argparse.Namespace) -> int:
    from memory_lab.results.read import read_results
    from memory_lab.views.charts import save_charts
    from memory_lab.views.report import write_comparison, write_report

    folders = list(dict.fromkeys(args.results_dir))
    for folder in folders:
        results = read_results(folder, prompts="checked")  # charts and tables: no prompt text
        if results.turns.empty and results.probes.empty:
            raise BadInput(f"{folder}: records.jsonl holds no records; nothing to report")
    if len(folders) > 1:  # one page comparing them, no charts folder written into any run
        print(f"report: {write_comparison(folders, args.out or COMPARISON_FILE)}")
        return 0
    if args.out is not None:
        raise BadInput(
            "--out is for a comparison of several folders; one folder's report is "
            f"{folders[0] / 'report.html'}"
        )
    for path in save_charts(results):
        print(f"chart:  {path}")
    print(f"report: {write_report(folders[0], results)}")
    return 0


def exported_formats() -> dict[str, Any]:
    """The formats ``memory-lab export`` writes: every benchmark's declared ``exports``."""
    from memory_lab.benchmarks import benchmarks

    return {name: write for b in benchmarks().values() for name, write in b.exports.items()}


def export_command(args: argparse.Namespace) -> int:
    write = exported_formats()[args.format]
    count = write(args.results, args.out, memory=args.memory)
    print(f"wrote {count} hypothesis line(s) to {args.out}")
    return 0


def inspect_command(args: argparse.Namespace) -> int:
    from memory_lab.run.inspect import inspect_memory

    print(
        f"replaying {args.dialogue} through {args.spec} up to {args.at} "
        "(the models load first: a few seconds)...",
        file=sys.stderr,
        flush=True,
    )
    view = inspect_memory(args.spec, args.dialogue, args.at, query=args.query)
    print(view.to_text(show_prompt=args.prompt))
    return 0
