"""``memory-lab run``: a new run from its options, or ``--resume`` of an interrupted one, and
what the terminal shows when it ends."""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime
from pathlib import Path

from memory_lab.errors import ConfigError
from memory_lab.log.config import RunConfig, named_values
from memory_lab.log.resume_policy import RESUME_OPTIONS
from memory_lab.models.rate_limit import describe_rates, parse_rates

DEFAULTS = RunConfig()  # the run options' defaults are RunConfig's

# what ``run --resume`` takes (as dests): its folder, what a resume may be given (``--resource``
# gives the resources) and the progress bar; the rest of the run is as its run.json records it
RESUME_DESTS = (
    "resume",
    *("resource" if name == "resources" else name for name in RESUME_OPTIONS),
    "quiet",
)


def run_config(args: argparse.Namespace) -> RunConfig:
    """The RunConfig the ``run`` options describe (``RunConfig.from_options``)."""
    return RunConfig.from_options(args)


def run_command(args: argparse.Namespace) -> int:
    """``memory-lab run``; ``args.given`` names the options given (``parser.given_run_options``)."""
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.run.benchmark import resume_benchmark, run_benchmark
    from memory_lab.run.prepare import CLASSIC_MEMORIES, resolve_memories

    resources = named_values(args.resource, "--resource")
    if args.resume:
        given = args.given
        refused = [f"--{d.replace('_', '-')}" for d in sorted(given - set(RESUME_DESTS))]
        if refused:
            honoured = ", ".join(f"--{d.replace('_', '-')}" for d in RESUME_DESTS[1:])
            raise ConfigError(
                f"{', '.join(refused)} cannot be given with --resume, which continues the run "
                f"as its run.json records it (only {honoured} may be)"
            )
        outcome = resume_benchmark(
            args.resume,
            jobs=args.jobs if "jobs" in given else None,
            concurrency=args.concurrency if "concurrency" in given else None,
            executor=args.executor,
            ray_address=args.ray_address,
            resources=resources,
            base_url=args.base_url,  # needed again when the recorded one had credentials
            trust_sources=args.trust_sources or None,
            rpm=parse_rates(args.rpm, "--rpm"),  # a new tier: the run's limits may change
            tpm=parse_rates(args.tpm, "--tpm"),
            progress=not args.quiet,
        )
        return _report_run(outcome)
    config = run_config(args)
    classic = args.memory is None  # the README's comparison, not every registered memory
    args.memory = list(CLASSIC_MEMORIES) if classic else args.memory
    memories = resolve_memories(args.memory)
    dialogues = load_dialogues(*args.dialogues)
    if classic and not args.quiet:  # on stdout: an error stays the one line on stderr
        print(
            f"no --memory given: comparing the five classic memories "
            f"({', '.join(CLASSIC_MEMORIES)}); --memory all runs every registered memory"
        )
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    default = Path("results") / (f"dryrun-{stamp}" if args.dry_run else f"run-{stamp}")
    out = default if args.out is None else args.out  # "" is refused, never the default
    args.out = out  # for the resume hint if the run is interrupted
    outcome = run_benchmark(
        memories,
        dialogues,
        out,
        config,
        sources=list(args.dialogues),
        resources=resources,
        progress=not args.quiet,
    )
    return _report_run(outcome)


def _report_run(outcome) -> int:
    """Print the ended run (``views/finished_run.py``) and where to look next; 1 if a cell
    failed."""
    from memory_lab.views.finished_run import finished_run_text

    print(finished_run_text(outcome.path, outcome.summary))
    print(f"\nresults: {outcome.path}/ (run.json, records.jsonl, summary.csv)")
    folder = shlex.quote(str(outcome.path))
    print(f"report:  memory-lab report {folder}  (charts and report.html)")
    print(f"browse:  memory-lab view {folder}  (runs side by side, each probe's contexts)")
    if outcome.rate_limits:
        print(rate_limit_line(outcome.rate_limits))
    if outcome.failed_cells:
        print(f"{outcome.failed_cells} cell(s) failed; see run.json 'errors'.", file=sys.stderr)
        return 1
    return 0


def rate_limit_line(counts: dict) -> str:
    """What keeping ``--rpm``/``--tpm`` took, in one line (run.json's ``rate_limits``)."""
    limits = "; ".join(
        text
        for text in (
            describe_rates(counts.get("rpm"), "rpm"),
            describe_rates(counts.get("tpm"), "tpm"),
        )
        if text
    )
    return (
        f"limits:  {limits}: {counts.get('requests', 0):,} requests, "
        f"{counts.get('responses_429', 0):,} answered 429, "
        f"{counts.get('waited_seconds', 0):,.1f} s waited for the shared bucket"
    )


def check_command(args: argparse.Namespace) -> int:
    """``memory-lab check SPEC...``: the conformance check, one line per memory (or per
    failure); exit 1 when any memory fails a check."""
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.run.conformance import DEFAULT_DIALOGUES, check_memory
    from memory_lab.run.context import RunModels
    from memory_lab.run.prepare import resolve_memories

    specs = resolve_memories(args.specs)
    dialogues = load_dialogues(*(args.dialogues or [DEFAULT_DIALOGUES]))
    if not args.dialogues:
        dialogues = dialogues[:1]
    resources = named_values(args.resource, "--resource")
    models = RunModels.create(resources=resources)
    failed = 0
    for spec in specs:
        report = check_memory(spec, dialogues, models)
        failed += not report.ok
        print("\n".join(report.lines()), flush=True)
    return 1 if failed else 0
