"""``memory-lab sweep SPEC``: a sweep spec's runs, resumed where they stopped, then its report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memory_lab.errors import BadInput


def add_parser(sub: argparse._SubParsersAction) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="run memories × sources × run options from a YAML spec, measured and resumable",
        description="Run every run of a sweep spec (benchmarks/sweeps/*.yaml; the format: "
        "docs/sweeps.md), each in OUT/<key>, measured (wall, CPU, peak PSS summed over its "
        "processes); a folder that holds a run is resumed, so a stopped sweep goes on where it "
        "stopped. Then print the report (each memory's figures; what each run cost).",
    )
    sweep.add_argument("spec", type=Path, metavar="SPEC", help="the sweep's YAML file")
    sweep.add_argument("--out", type=Path, help="results folder (default: the spec's out)")
    sweep.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable the spec names as ${NAME}, e.g. BEAM=data/BEAM/chats (repeat)",
    )
    sweep.add_argument("--only", nargs="+", metavar="KEY", help="these runs only (their keys)")
    sweep.add_argument(
        "--report-only", action="store_true", help="run nothing: report what has finished"
    )
    sweep.add_argument(
        "--dry-run",
        action="store_true",
        help="print each run's command and run nothing (no provider is called)",
    )
    sweep.add_argument("--markdown", action="store_true", help="the report's tables as Markdown")
    sweep.set_defaults(func=sweep_command)


def variables(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise BadInput(f"--set {pair!r}: give NAME=VALUE, e.g. BEAM=data/BEAM/chats")
        found[name] = value
    return found


def sweep_command(args: argparse.Namespace) -> int:
    from memory_lab.sweep import load, report, run_sweep
    from memory_lab.sweep.execute import command_of, selected

    sweep = load(args.spec, variables(args.set), args.out)
    out = sweep.out
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.dry_run:
        for run in selected(sweep, args.only, say):
            command = command_of(run, Path(out) / run.key)
            print(f"{run.key}: memory-lab {' '.join(command[3:])}")
        return 0
    code = 0 if args.report_only else run_sweep(sweep, out, args.only, say)
    text = report(sweep, out, markdown=args.markdown)
    print(text)
    if sweep.report.page:  # a Markdown page, whatever the terminal shows
        page = Path(sweep.report.page)
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(report(sweep, out, markdown=True), encoding="utf-8")
        say(f"wrote {page}")
    return code
