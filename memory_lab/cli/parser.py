"""The ``memory-lab`` argument parser: the top level, every subcommand's options (``run``'s in
groups, in the order ``--help`` lists them) and which ``run`` options a command line gives.

Each subcommand's function (``func``) comes from the module of its subject: ``run_commands``,
``result_commands``, ``dataset_commands`` (``serve`` and ``view`` add their own parsers).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memory_lab.cli.dataset_commands import (
    beam_scores_command,
    import_command,
    judge_cognitive_command,
    list_command,
    score_command,
    scored_benchmarks,
    validate_command,
)
from memory_lab.cli.result_commands import (
    COMPARISON_FILE,
    export_command,
    exported_formats,
    inspect_command,
    report_command,
)
from memory_lab.cli.run_commands import DEFAULTS, check_command, run_command
from memory_lab.cli.sweep_commands import add_parser as add_sweep_parser
from memory_lab.dialogue.importers import formats
from memory_lab.log.config import ADVERSARIAL, ANSWER_STYLES, DEVICES, EXECUTORS, MODES
from memory_lab.models.windows import MODEL_WINDOW


def _add_run_inputs(run: argparse.ArgumentParser) -> None:
    """What to run: the memories and the dialogues."""
    run.add_argument(
        "--memory",
        nargs="+",
        default=None,
        metavar="SPEC",
        help="specs such as buffer window:k=4 summary_buffer:max_token_limit=300, or 'all' "
        "(every registered memory, see memory-lab list); default: the five classic memories, "
        "buffer window summary summary_buffer vector",
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
    for option, what in (("--rpm", "requests"), ("--tpm", "tokens (estimated, then settled)")):
        run.add_argument(
            option,
            action="append",
            metavar="N|PROVIDER=N",
            help=f"keep each provider under N {what} a minute, in every thread, process and "
            "Ray task of the run (one shared bucket; a 429 pauses them all for its "
            "Retry-After); PROVIDER=N for one provider; default: no limit",
        )
    run.add_argument("--resume", type=Path, metavar="DIR", help="continue an interrupted run")
    run.add_argument(
        "--trust-sources",
        action="store_true",
        help="with --resume: import a memory's recorded module:factory even when it is not "
        "memory-lab's, an installed entry point or the file recorded when the run started",
    )


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
        "--device",
        choices=DEVICES,
        default=DEFAULTS.device,
        help="where the bundled embedding models run: cpu (default) or cuda (a GPU, through "
        "onnxruntime-gpu; on Ray each cell then asks for a GPU)",
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
    run.set_defaults(func=run_command)


def _add_score_options(parser: argparse.ArgumentParser, judge_default: str | None) -> None:
    parser.add_argument(
        "--judge",
        default=judge_default,
        required=judge_default is None,
        help="offline (where the benchmark grades without a model) or PROVIDER:MODEL",
    )
    parser.add_argument("--base-url", help="OpenAI-compatible server for an openai: judge")
    parser.add_argument("--out", type=Path, help="a file for every verdict, where it writes one")


def _add_dataset_scorers(sub: argparse._SubParsersAction) -> None:
    """``score BENCHMARK RUN``: a run scored as the benchmark's authors score it, and the two
    commands it replaces, kept one release as aliases that say so."""
    score = sub.add_parser(
        "score",
        help="score a run as a benchmark's authors do: " + ", ".join(scored_benchmarks()),
    )
    score.add_argument("benchmark", metavar="BENCHMARK", help=", ".join(scored_benchmarks()))
    score.add_argument("results_dir", type=Path, metavar="RUN", help="a results folder")
    _add_score_options(score, "offline")
    score.add_argument(
        "--protocol",
        nargs="+",
        metavar="NAME",
        help="the protocols to score (reference: the authors' code as it is; the benchmark's "
        "others beside it; all); default: the benchmark's declared ones",
    )
    score.add_argument(
        "--prompts",
        type=Path,
        metavar="CHECKOUT",
        help="your checkout of the benchmark, whose judge prompts are read (never bundled)",
    )
    score.add_argument(
        "--export-retrieval",
        type=Path,
        metavar="DIR",
        help="also write each memory's rankings in the authors' own format (where declared)",
    )
    score.set_defaults(func=score_command)
    beam = sub.add_parser("beam-scores", help="alias of: memory-lab score beam (one release)")
    beam.add_argument("results_dir", type=Path, metavar="RESULTS_DIR", help="a results folder")
    _add_score_options(beam, "offline")
    beam.add_argument("--beam-protocol", choices=["reference", "corrected", "both"], default="both")
    beam.add_argument("--beam-copy", type=Path, help="your BEAM copy (score's --prompts)")
    beam.set_defaults(func=beam_scores_command)
    cog = sub.add_parser(
        "judge-cognitive", help="alias of: memory-lab score locomo-plus (one release)"
    )
    cog.add_argument("results_dir", type=Path, metavar="RESULTS", help="a results folder")
    _add_score_options(cog, None)
    cog.add_argument("--prompt-from", type=Path, required=True, help="score's --prompts")
    cog.set_defaults(func=judge_cognitive_command)


def build_parser() -> argparse.ArgumentParser:
    """The ``memory-lab`` command line: its options and subcommands, each with its function
    (``func``)."""
    return _build(argparse.ArgumentParser)


def given_run_options(argv: list[str] | None) -> set[str]:
    """The ``run`` options (as dests) given on the command line, even when given their
    default value: the line is parsed again by a parser whose options have no default, so the
    namespace holds only what was given (and the command, its ``func`` and the top level's
    ``--debug``, which are not run options)."""
    given = vars(_build(_GivenOnly).parse_args(argv))
    return given.keys() - {"command", "func", "debug"}


class _GivenOnly(argparse.ArgumentParser):
    """A parser whose options have no default (``argument_default=SUPPRESS``, and a default an
    option names is dropped): an option is in the namespace only when it is given. Its
    subcommands' parsers are of this class too; options must be added to the parser itself
    (not to an argument group) to be seen."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(argument_default=argparse.SUPPRESS, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        kwargs.pop("default", None)
        return super().add_argument(*args, **kwargs)


def _build(parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    parser = parser_class(
        prog="memory-lab",
        description="Compare conversational memories for LLM chatbots: recall and token cost.",
    )
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    _add_run_parser(sub)

    imp = sub.add_parser("import", help="convert a foreign dataset into dialogue YAML files")
    imp.add_argument("format", choices=formats(), help="the dataset's format")
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
    imp.set_defaults(func=import_command)

    exp = sub.add_parser("export", help="write results in a dataset's own format")
    exp.add_argument("format", choices=sorted(exported_formats()))
    exp.add_argument("results", type=Path, help="a results folder")
    exp.add_argument("--out", type=Path, required=True, help="hypotheses JSONL file")
    exp.add_argument("--memory", help="which memory's replies (needed if the run has several)")
    exp.set_defaults(func=export_command)

    _add_dataset_scorers(sub)

    lst = sub.add_parser("list", help="show every memory with its parameters and defaults")
    lst.set_defaults(func=list_command)

    chk = sub.add_parser(
        "check",
        help="the conformance check: does a memory keep the contract (replays, reads, close)",
    )
    chk.add_argument(
        "specs", nargs="+", metavar="SPEC", help="built-in names, MODULE:FACTORY or entry points"
    )
    chk.add_argument(
        "--dialogues",
        nargs="+",
        metavar="SOURCE",
        help="dialogues to replay (default: the first of builtin:classic)",
    )
    chk.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a resource for the memories, as for run (e.g. postgres=URL: then a spec that "
        "keeps its state there, such as thread:saver=postgres, is checked across a restart)",
    )
    chk.set_defaults(func=check_command)

    val = sub.add_parser("validate", help="check dialogue files; report every problem")
    val.add_argument("paths", nargs="+", help="files, folders or builtin:NAME")
    val.set_defaults(func=validate_command)

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
    rep.set_defaults(func=report_command)

    insp = sub.add_parser("inspect", help="show what one memory puts into the prompt at a turn")
    insp.add_argument("spec", metavar="SPEC", help="a memory spec such as window:k=4")
    insp.add_argument("dialogue", metavar="DIALOGUE", help="a built-in dialogue id or a file")
    insp.add_argument("--at", required=True, metavar="TURN_ID", help="turn id, e.g. s2.t3")
    insp.add_argument(
        "--query", help="show the context for this question asked after the turn instead"
    )
    insp.add_argument("--prompt", action="store_true", help="also print the full prompt")
    insp.set_defaults(func=inspect_command)

    from memory_lab.serve.command import add_parser as add_serve_parser
    from memory_lab.serve.view_command import add_parser as add_view_parser

    add_serve_parser(sub)
    add_view_parser(sub)
    add_sweep_parser(sub)
    return parser
