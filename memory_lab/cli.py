"""``memory-lab`` command line: run | list | validate | report | inspect | serve | view, thin
layers."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_lab.dialogue.importers import FORMATS, importer_options
from memory_lab.dialogue.model import DialogueError
from memory_lab.dialogue.sources import validate
from memory_lab.log.config import (
    ADVERSARIAL,
    ANSWER_STYLES,
    EXECUTORS,
    MODES,
    RunConfig,
    named_values,
)
from memory_lab.models.windows import MODEL_WINDOW, parse_limit
from memory_lab.text.redact import redact, redact_logs

DEFAULTS = RunConfig()  # the run options' defaults are RunConfig's
COMPARISON_FILE = "comparison.html"  # memory-lab report A B ...: in the current folder


def _cmd_list(args: argparse.Namespace) -> int:
    from memory_lab.dialogue.sources import builtin_suites
    from memory_lab.memories import memory_factories

    print("Memories (use as NAME or NAME:param=value,param=value):")
    for factory in memory_factories().values():
        print(f"\n  {factory.name}\n      {factory.description}")
        for p in factory.params:
            helptext = f"  - {p.help}" if p.help else ""
            bounds = "".join(
                f" ({word} {v:g})" for word, v in (("min", p.min), ("max", p.max)) if v is not None
            )
            print(f"      {p.name}: {p.type_name} = {p.default!r}{bounds}{helptext}")
        if factory.roles:
            print(f"      model roles: {', '.join(factory.roles)}")
        if not factory.params:
            print("      (no parameters)")
    print("\nBuilt-in dialogue suites: " + ", ".join(f"builtin:{s}" for s in builtin_suites()))
    print(
        "\nDataset formats (--dialogues FORMAT:PATH#key=value,...; memory-lab import FORMAT PATH):"
    )
    for fmt in FORMATS:
        print(f"  {fmt}: options {', '.join(importer_options(fmt))}")
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


def _cmd_import(args: argparse.Namespace) -> int:
    from memory_lab.results.export import write_yaml_dialogues

    options = named_values(args.option, "--option")
    written = write_yaml_dialogues(args.format, args.path, args.out, **options)
    print(f"wrote {len(written)} dialogue file(s) to {args.out}/")
    return 0


def _cmd_beam_scores(args: argparse.Namespace) -> int:
    import csv

    from memory_lab.results.beam_scores import (
        PROTOCOLS,
        LLMBeamGrader,
        OfflineBeamGrader,
        format_beam_table,
        load_beam_prompts,
        score_run,
    )

    protocols = PROTOCOLS if args.beam_protocol == "both" else (args.beam_protocol,)
    if args.judge == "offline":
        grader, template = OfflineBeamGrader(), ""
    else:
        if args.beam_copy is None:
            raise ValueError(
                "--beam-copy DIR: your BEAM copy, whose src/prompts.py holds the judge prompt "
                "(not bundled: BEAM's repository has no licence)"
            )
        from memory_lab.models.providers import provider_chat_model

        prompts = load_beam_prompts(args.beam_copy)
        model = provider_chat_model(args.judge, base_url=args.base_url, temperature=0.0)
        grader, template = LLMBeamGrader(model, prompts), prompts.judge
    rows = score_run(args.results_dir, grader, protocols, template)
    out = Path(args.results_dir) / "beam_scores.csv"
    with open(out, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(format_beam_table(rows, args.judge))
    print(f"\nper-question scores: {out}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from memory_lab.results.export import export_longmemeval

    count = export_longmemeval(args.results, args.out, memory=args.memory)
    print(f"wrote {count} hypothesis line(s) to {args.out}")
    return 0


def _cmd_judge_cognitive(args: argparse.Namespace) -> int:
    from memory_lab.results.cognitive_judge import (
        cognitive_judge_model,
        judge_results,
        load_cognitive_prompt,
    )

    prompt = load_cognitive_prompt(args.prompt_from)
    model = cognitive_judge_model(args.judge, args.base_url)
    summaries = judge_results(args.results, model, prompt, args.out)
    for memory, s in summaries.items():
        print(
            f"{memory}: Cognitive score {s['overall_avg']} over {s['total_samples']} probe(s) "
            f"(total {s['total_score']}; correct 1, partial 0.5, wrong 0)"
        )
    print(f"wrote every verdict to {args.out}")
    return 0


def run_config(args: argparse.Namespace) -> RunConfig:
    """The RunConfig the ``run`` options describe."""
    return RunConfig(
        llm=args.llm,
        memory_llm=args.memory_llm,
        roles=named_values(args.model, "--model"),
        embeddings=args.embeddings,
        judge=args.judge,
        judge_prompts=tuple(args.judge_prompt),
        judge_runs=args.judge_runs,
        judge_temperature=args.judge_temperature,
        answer_style=args.answer_style,
        base_url=args.base_url,
        mode=args.mode,
        record_prompts=not args.no_prompts,
        context_limit=parse_limit(args.context_limit),
        jobs=args.jobs,
        concurrency=args.concurrency,
        executor=args.executor or DEFAULTS.executor,
        ray_address=args.ray_address,
        price_model=args.price_model,
        prices_file=str(args.prices) if args.prices else None,
        cache=False if args.no_cache else (str(args.cache_dir) if args.cache_dir else True),
        dry_run=args.dry_run,
        timestamps=args.timestamps == "on",
        request_timeout=args.request_timeout,
        adversarial=args.adversarial,
    )


def _cmd_run(args: argparse.Namespace) -> int:
    from memory_lab.dialogue.sources import load_dialogues
    from memory_lab.run.benchmark import resolve_memories, resume_benchmark, run_benchmark

    resources = named_values(args.resource, "--resource")
    if args.resume:
        given = args.given
        refused = [f"--{d.replace('_', '-')}" for d in sorted(given - set(RESUME_OPTIONS))]
        if refused:
            honoured = ", ".join(f"--{d.replace('_', '-')}" for d in RESUME_OPTIONS[1:])
            raise ValueError(
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
            progress=not args.quiet,
        )
        return _report_run(outcome)
    config = run_config(args)
    memories = resolve_memories(args.memory)
    dialogues = load_dialogues(*args.dialogues)
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


# what ``run --resume`` takes: the rest of a run is recorded in its run.json
RESUME_OPTIONS = (
    "resume",
    "jobs",
    "concurrency",
    "executor",
    "ray_address",
    "resource",
    "base_url",
    "quiet",
)


def _given_run_options(argv: list[str] | None) -> set[str]:
    """The ``run`` options (as dests) given on the command line, even when given their
    default value: the line is parsed again with every default suppressed."""
    parser = build_parser()
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = [a for a in run.choices["run"]._actions if a.option_strings and a.dest != "help"]
    for action in options:
        action.default = argparse.SUPPRESS
    given = vars(parser.parse_args(argv))
    return {a.dest for a in options if a.dest in given}


def _report_run(outcome) -> int:
    from memory_lab.results.read import read_results
    from memory_lab.results.summary import (
        adversarial_apart,
        is_adversarial,
        reader_accuracy,
        summarize_by_category,
    )
    from memory_lab.views.tables import format_category_table, format_reader_line, format_summary

    results = read_results(outcome.path)
    spec = results.spec
    if spec is not None and spec.dry_run:
        wanted = ", ".join(f"{k}={v}" for k, v in spec.dry_run.items())
        print(f"DRY RUN ({wanted}): no provider was called; tokens come from the offline")
        print("stand-ins and are priced as the requested models. Recall figures are not theirs.")
    print(format_summary(outcome.summary, results.spec))
    if spec is not None and spec.dry_run and len(outcome.summary):
        total = outcome.summary
        print(
            f"DRY RUN total: {int(total['total_tokens'].sum()):,} tokens, "
            f"est. ${float(total['est_cost_usd'].sum()):.4f} for the whole run"
        )
    reader_line = format_reader_line(reader_accuracy(results), results.spec)
    if reader_line:
        print(reader_line)
    adversarial = (
        int(results.probes.apply(is_adversarial, axis=1).sum()) if len(results.probes) else 0
    )
    if adversarial and adversarial_apart(results):
        print(
            f"{adversarial} LoCoMo adversarial probe record(s) are summarised apart (see the "
            "table by category; --adversarial include puts them in the headline)."
        )
    print("\n" + format_category_table(summarize_by_category(results)))
    print(f"\nresults: {outcome.path}/ (run.json, records.jsonl, summary.csv)")
    folder = shlex.quote(str(outcome.path))
    print(f"report:  memory-lab report {folder}  (charts and report.html)")
    print(f"browse:  memory-lab view {folder}  (runs side by side, each probe's contexts)")
    if outcome.failed_cells:
        print(f"{outcome.failed_cells} cell(s) failed; see run.json 'errors'.", file=sys.stderr)
        return 1
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from memory_lab.results.read import read_results
    from memory_lab.views.charts import save_charts
    from memory_lab.views.report import write_comparison, write_report

    folders = list(dict.fromkeys(args.results_dir))
    for folder in folders:
        results = read_results(folder)
        if results.turns.empty and results.probes.empty:
            raise ValueError(f"{folder}: records.jsonl holds no records; nothing to report")
    if len(folders) > 1:  # one page comparing them, no charts folder written into any run
        print(f"report: {write_comparison(folders, args.out or COMPARISON_FILE)}")
        return 0
    if args.out is not None:
        raise ValueError(
            "--out is for a comparison of several folders; one folder's report is "
            f"{folders[0] / 'report.html'}"
        )
    for path in save_charts(results):
        print(f"chart:  {path}")
    print(f"report: {write_report(folders[0])}")  # reads the folder again
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
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


def _add_run_inputs(run: argparse.ArgumentParser) -> None:
    """What to run: the memories and the dialogues."""
    run.add_argument(
        "--memory",
        nargs="+",
        default=["all"],
        metavar="SPEC",
        help="'all' (the default: every registered memory, see memory-lab list) or specs such "
        "as buffer window:k=4 summary_buffer:max_token_limit=300",
    )
    run.add_argument(
        "--dialogues",
        nargs="+",
        default=["builtin:classic"],
        metavar="SOURCE",
        help="builtin:classic, dialogue files or folders",
    )


def _add_model_options(run: argparse.ArgumentParser) -> None:
    """The models and run-wide resources memories and the answerer use."""
    run.add_argument("--llm", default=DEFAULTS.llm, help="answering model (default: offline)")
    run.add_argument(
        "--memory-llm",
        default=DEFAULTS.memory_llm,
        help="LLM inside summary memories (default: offline)",
    )
    run.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ROLE=MODEL",
        help="model for a memory model role a memory declares, e.g. extractor=openai:gpt-4o-mini "
        "(default: the --memory-llm model)",
    )
    run.add_argument(
        "--embeddings",
        default=DEFAULTS.embeddings,
        help="embeddings for memories: offline (multilingual-e5-small), offline:minilm, or "
        "PROVIDER:MODEL",
    )
    run.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a run-wide resource for memories, e.g. postgres=postgresql://... (or set "
        "MEMORY_LAB_NAME); its passwords are never written to any file",
    )
    run.add_argument(
        "--base-url",
        help="OpenAI-compatible server for openai: models (or set OPENAI_BASE_URL); with "
        "--resume, the run's URL again when it had credentials (they are never written)",
    )


def _add_output_options(run: argparse.ArgumentParser) -> None:
    """Where results go and what the records and the estimate hold."""
    run.add_argument("--out", help="results folder (default: results/run-<time>)")
    run.add_argument(
        "--price-model",
        help="price table entry for the estimate (default: the --llm model, else gpt-4o-mini)",
    )
    run.add_argument("--prices", type=Path, help="a price table JSON overriding the shipped one")
    run.add_argument(
        "--no-prompts", action="store_true", help="do not store full prompt texts in records"
    )


def _add_execution_options(run: argparse.ArgumentParser) -> None:
    """Who runs the cells, how many at once, and in which mode."""
    run.add_argument(
        "--jobs",
        type=int,
        default=DEFAULTS.jobs,
        help="run (memory, dialogue) cells in N processes",
    )
    run.add_argument(
        "--context-limit",
        default=MODEL_WINDOW,
        metavar="TOKENS|none",
        help="cut the oldest memory text so no prompt exceeds this many tokens; default "
        "(model) the answering model's window from memory_lab/data/context_windows.json (the "
        "offline reader: 128K; a model not listed: no limit); none: never cut",
    )
    run.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULTS.concurrency,
        help="cells at once in threads, and a cell's probes after one exchange at once "
        "(API-bound runs)",
    )
    run.add_argument(
        "--executor",
        choices=EXECUTORS,
        help="who runs the cells: local (this machine, --jobs or --concurrency; the default) "
        "or ray (Ray tasks; --jobs caps cells at once)",
    )
    run.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --executor ray: an existing Ray cluster (e.g. auto or HOST:6379); "
        "default a local Ray sized to the machine",
    )
    run.add_argument(
        "--mode",
        choices=MODES,
        default=DEFAULTS.mode,
        help="replay scripted replies (default) or let the model answer every turn",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="count tokens and estimate cost; call no provider"
    )


def _add_replay_options(run: argparse.ArgumentParser) -> None:
    """How dialogues are replayed and scored, provider timeouts, and resuming."""
    run.add_argument(
        "--timestamps",
        choices=["on", "off"],
        default="on",
        help="text memories store each user line with its session date, where dialogues have "
        "dates (default: on)",
    )
    run.add_argument(
        "--adversarial",
        choices=ADVERSARIAL,
        default=DEFAULTS.adversarial,
        help="LoCoMo's adversarial questions: summarised apart from the headline (default) "
        "or included in it",
    )
    run.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULTS.request_timeout,
        metavar="SECONDS",
        help="a provider request that takes longer fails (then is retried); a positive, "
        "finite number; default 60",
    )
    run.add_argument("--resume", type=Path, metavar="DIR", help="continue an interrupted run")


def _add_judge_options(run: argparse.ArgumentParser) -> None:
    """LLM-judged correctness: the judge model, its prompts, runs and temperature."""
    run.add_argument(
        "--judge", metavar="MODEL", help="add LLM-judged correctness (offline or PROVIDER:MODEL)"
    )
    run.add_argument(
        "--judge-prompt",
        action="extend",
        nargs="+",
        default=[],
        metavar="FILE",
        help="grading prompt file(s) of at most 64 KiB with {question} {reply} and optionally "
        "{answers} {abstention}; 'builtin' names ours (the default); repeat or list to compare "
        "prompts",
    )
    run.add_argument(
        "--judge-runs",
        type=int,
        default=DEFAULTS.judge_runs,
        metavar="N",
        help="grade every probe N times per prompt, 1 to 100; J is reported as mean ± sd "
        "(default 1)",
    )
    run.add_argument(
        "--judge-temperature",
        type=float,
        default=DEFAULTS.judge_temperature,
        metavar="T",
        help="sampling temperature of a provider judge, 0 to 2 (default 0)",
    )


def _add_answer_and_cache_options(run: argparse.ArgumentParser) -> None:
    """The answering prompt, the model-call cache and the progress bar."""
    run.add_argument(
        "--answer-style",
        choices=ANSWER_STYLES,
        default=DEFAULTS.answer_style,
        help="answering prompt: LangChain's conversation prompt (default) or a short-phrase "
        "answer, as F1/BLEU scoring of LoCoMo expects",
    )
    run.add_argument(
        "--no-cache", action="store_true", help="call providers even for calls made before"
    )
    run.add_argument(
        "--cache-dir",
        type=Path,
        help="model-call cache (default: $MEMORY_LAB_CACHE or ~/.cache/memory-lab)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_run_parser(sub: argparse._SubParsersAction) -> None:
    """The ``run`` subcommand: its options in the order ``--help`` lists them."""
    run = sub.add_parser("run", help="replay dialogues through memories and summarise")
    _add_run_inputs(run)
    _add_model_options(run)
    _add_output_options(run)
    _add_execution_options(run)
    _add_replay_options(run)
    _add_judge_options(run)
    _add_answer_and_cache_options(run)
    run.set_defaults(func=_cmd_run)


def _add_dataset_scorers(sub: argparse._SubParsersAction) -> None:
    """The commands that score a run as a dataset's authors do: BEAM's and LoCoMo-Plus's."""
    beam = sub.add_parser(
        "beam-scores",
        help="score a run over BEAM as BEAM does: rubric judge and event-ordering tau-b, "
        "per ability and scale",
    )
    beam.add_argument("results_dir", type=Path, metavar="RESULTS_DIR", help="a results folder")
    beam.add_argument(
        "--judge",
        default="offline",
        help="offline (value nuggets by answer matching, the rest ungraded) or PROVIDER:MODEL",
    )
    beam.add_argument(
        "--beam-protocol",
        choices=["reference", "corrected", "both"],
        default="both",
        help="reference: BEAM's code as is (<question> not filled in, 0.5 read as 0); "
        "corrected: question filled in, 0.5 kept; both (default): side by side",
    )
    beam.add_argument(
        "--beam-copy",
        type=Path,
        help="your BEAM copy (or a folder inside it): its src/prompts.py holds the judge prompt",
    )
    beam.add_argument("--base-url", help="OpenAI-compatible server for an openai: judge")
    beam.set_defaults(func=_cmd_beam_scores)
    cog = sub.add_parser(
        "judge-cognitive", help="score a run's LoCoMo-Plus replies with its Cognitive judge"
    )
    cog.add_argument("results", type=Path, help="a results folder of a locomo-plus run")
    cog.add_argument("--judge", required=True, metavar="PROVIDER:MODEL", help="the judge model")
    cog.add_argument(
        "--prompt-from",
        type=Path,
        required=True,
        metavar="CHECKOUT",
        help="the Locomo-Plus checkout (or its prompt.py) whose Cognitive prompt is used",
    )
    cog.add_argument("--base-url", help="an OpenAI-compatible endpoint for the judge")
    cog.add_argument("--out", type=Path, required=True, help="JSON file for every verdict")
    cog.set_defaults(func=_cmd_judge_cognitive)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-lab",
        description="Compare conversational memories for LLM chatbots: recall and token cost.",
    )
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    _add_run_parser(sub)

    imp = sub.add_parser("import", help="convert a foreign dataset into dialogue YAML files")
    imp.add_argument("format", choices=FORMATS, help="the dataset's format")
    imp.add_argument(
        "path",
        type=Path,
        help="dataset file, folder or zip (locomo-plus: the Locomo-Plus checkout)",
    )
    imp.add_argument("--out", type=Path, required=True, help="folder for the YAML files")
    imp.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="importer option, e.g. categories=swapped for locomo, scale=100K or "
        "conversations=1-3+7 for beam, seed=3 for locomo-plus (memory-lab list shows each "
        "format's)",
    )
    imp.set_defaults(func=_cmd_import)

    exp = sub.add_parser("export", help="write results in a dataset's own format")
    exp.add_argument("format", choices=["longmemeval"])
    exp.add_argument("results", type=Path, help="a results folder")
    exp.add_argument("--out", type=Path, required=True, help="hypotheses JSONL file")
    exp.add_argument("--memory", help="which memory's replies (needed if the run has several)")
    exp.set_defaults(func=_cmd_export)

    _add_dataset_scorers(sub)

    lst = sub.add_parser("list", help="show every memory with its parameters and defaults")
    lst.set_defaults(func=_cmd_list)

    val = sub.add_parser("validate", help="check dialogue files; report every problem")
    val.add_argument("paths", nargs="+", help="files, folders or builtin:NAME")
    val.set_defaults(func=_cmd_validate)

    rep = sub.add_parser("report", help="write charts and a self-contained report.html")
    rep.add_argument(
        "results_dir",
        type=Path,
        nargs="+",
        metavar="RESULTS_DIR",
        help="a results folder; several: one page comparing them",
    )
    rep.add_argument(
        "--out",
        type=Path,
        help=f"with several folders, the comparison page to write (default: {COMPARISON_FILE})",
    )
    rep.set_defaults(func=_cmd_report)

    insp = sub.add_parser("inspect", help="show what one memory puts into the prompt at a turn")
    insp.add_argument("spec", metavar="SPEC", help="a memory spec such as window:k=4")
    insp.add_argument("dialogue", metavar="DIALOGUE", help="a built-in dialogue id or a file")
    insp.add_argument("--at", required=True, metavar="TURN_ID", help="turn id, e.g. s2.t3")
    insp.add_argument(
        "--query", help="show the context for this question asked after the turn instead"
    )
    insp.add_argument("--prompt", action="store_true", help="also print the full prompt")
    insp.set_defaults(func=_cmd_inspect)

    from memory_lab.serve.command import add_parser as add_serve_parser
    from memory_lab.serve.view_command import add_parser as add_view_parser

    add_serve_parser(sub)
    add_view_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command. Exit codes: 0 success, 1 a cell failed (recorded), 2 bad input or
    environment (one line naming the file or option), 130 interrupted. ``--debug`` shows the
    traceback instead of the one line."""
    args = build_parser().parse_args(argv)
    redact_logs()  # no log line carries a credential, whoever logs it
    if args.command == "run":
        args.given = _given_run_options(argv)
    previous = _stop_on_sigterm()
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"memory-lab: {_interrupted(args)}", file=sys.stderr)
        return 130
    except DialogueError as exc:
        if args.debug:
            raise
        if len(exc.problems) == 1:
            print(f"memory-lab: error: {redact(str(exc))}", file=sys.stderr)
        else:
            print(f"memory-lab: invalid dialogues:\n{redact(str(exc))}", file=sys.stderr)
    except (ValueError, KeyError, OSError) as exc:
        if args.debug:
            raise
        print(f"memory-lab: error: {redact(_one_line(exc))}", file=sys.stderr)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 2


def _stop_on_sigterm() -> Any:
    """SIGTERM stops a run like Ctrl-C (workers stopped, completed cells kept, exit 130).

    Returns the handler it replaced (None off the main thread, where none can be set).
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, interrupt)


def _interrupted(args: argparse.Namespace) -> str:
    """The one line printed on Ctrl-C or SIGTERM: how to resume, when there is a run to resume."""
    if args.command != "run":
        return "interrupted"
    where = args.resume or args.out
    if where is None or not (Path(where) / "run.json").exists():
        return "interrupted before the run started"
    return (
        "interrupted; completed cells are kept; continue with: "
        f"memory-lab run --resume {shlex.quote(str(where))}"
    )


def _one_line(exc: BaseException) -> str:
    """An exception as one line, naming the file when the OS error has one, with its notes
    (e.g. that run.json could not be updated either) in parentheses."""
    notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
    if isinstance(exc, OSError) and exc.filename and not isinstance(exc, FileExistsError):
        return f"{exc.filename}: {exc.strerror or exc}{notes}"
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = text if "\n" not in text or isinstance(exc, ValueError) else text.splitlines()[0]
    return text + notes


def command() -> None:
    """The ``memory-lab`` command: ``main``, then exit with its code. An interrupted run (130)
    has written its records and run.json when ``main`` returns, so it exits at once: without
    waiting for threads a library started (Python joins a ``concurrent.futures`` pool's task at
    exit; a cell may be in one) and without the interpreter's teardown under threads still in
    native code (which can abort)."""
    code = main()
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    command()
