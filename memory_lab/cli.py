"""``memory-lab`` command line: run | list | validate, each a thin layer over the library."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from memory_lab.dialogue import DialogueError, validate


def _cmd_list(args: argparse.Namespace) -> int:
    from memory_lab.dialogue import builtin_suites
    from memory_lab.memories import memory_factories

    print("Memories (use as NAME or NAME:param=value,param=value):")
    for factory in memory_factories().values():
        print(f"\n  {factory.name}\n      {factory.description}")
        for p in factory.params:
            helptext = f"  - {p.help}" if p.help else ""
            print(f"      {p.name}: {p.type.__name__} = {p.default!r}{helptext}")
        if not factory.params:
            print("      (no parameters)")
    print("\nBuilt-in dialogue suites: " + ", ".join(f"builtin:{s}" for s in builtin_suites()))
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    dialogues, problems = validate(args.paths)
    for problem in problems:
        print(problem)
    n_probes = sum(len(d.probes) for d in dialogues)
    if problems:
        print(
            f"{len(problems)} problem(s) found; files with problems load nothing.", file=sys.stderr
        )
        return 1
    print(f"OK: {len(dialogues)} dialogue(s), {n_probes} probe(s).")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from memory_lab.benchmark import resolve_memories, run_benchmark
    from memory_lab.dialogue import load_dialogues
    from memory_lab.results import format_summary

    memories = resolve_memories(args.memory)
    dialogues = load_dialogues(*args.dialogues)
    out = args.out or Path("results") / datetime.now().strftime("run-%Y%m%d-%H%M%S")
    outcome = run_benchmark(
        memories,
        dialogues,
        out,
        llm=args.llm,
        memory_llm=args.memory_llm,
        sources=list(args.dialogues),
        price_model=args.price_model,
        prices_file=args.prices,
        record_prompts=not args.no_prompts,
        progress=not args.quiet,
    )
    from memory_lab.results import read_results

    print(format_summary(outcome.summary, read_results(outcome.path).run))
    print(f"\nresults: {outcome.path}/ (run.json, records.jsonl, summary.csv)")
    if outcome.failed_cells:
        print(f"{outcome.failed_cells} cell(s) failed; see run.json 'errors'.", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-lab",
        description="Compare conversational memories for LLM chatbots: recall and token cost.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="replay dialogues through memories and summarise")
    run.add_argument(
        "--memory",
        nargs="+",
        default=["all"],
        metavar="SPEC",
        help="'all' or specs such as buffer window:k=4 summary_buffer:max_token_limit=300",
    )
    run.add_argument(
        "--dialogues",
        nargs="+",
        default=["builtin:classic"],
        metavar="SOURCE",
        help="builtin:classic, dialogue files or folders",
    )
    run.add_argument("--llm", default="offline", help="answering model (default: offline)")
    run.add_argument(
        "--memory-llm", default="offline", help="LLM inside summary memories (default: offline)"
    )
    run.add_argument("--out", type=Path, help="results folder (default: results/run-<time>)")
    run.add_argument(
        "--price-model", default="gpt-4o-mini", help="price table entry used for the estimate"
    )
    run.add_argument("--prices", type=Path, help="a price table JSON overriding the shipped one")
    run.add_argument(
        "--no-prompts", action="store_true", help="do not store full prompt texts in records"
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(func=_cmd_run)

    lst = sub.add_parser("list", help="show every memory with its parameters and defaults")
    lst.set_defaults(func=_cmd_list)

    val = sub.add_parser("validate", help="check dialogue files; report every problem")
    val.add_argument("paths", nargs="+", help="files, folders or builtin:NAME")
    val.set_defaults(func=_cmd_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except DialogueError as exc:
        print(f"memory-lab: invalid dialogues:\n{exc}", file=sys.stderr)
    except (ValueError, FileExistsError, FileNotFoundError) as exc:
        print(f"memory-lab: error: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
