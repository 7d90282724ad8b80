"""The commands on dialogues and datasets: ``list`` (memories, built-in suites, dataset
formats), ``validate``, ``import`` (a foreign dataset into dialogue YAML files) and the scorers
that grade a run as a dataset's authors do (``beam-scores``, ``judge-cognitive``)."""

from __future__ import annotations

import argparse
import sys

from memory_lab.benchmarks import benchmarks
from memory_lab.dialogue.importers import importer_options
from memory_lab.dialogue.sources import validate
from memory_lab.log.config import named_values


def list_command(args: argparse.Namespace) -> int:
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
        system = factory.system
        if system is not None:
            env = f"; runs in {system.environment.folder}" if system.environment else ""
            print(
                f"      system: {system.upstream} {system.version} ({system.licence}), "
                f"{system.reference}{env}"
            )
            if system.missing():
                print(f"      not installed here: {system.install_command()}")
    print("\nBuilt-in dialogue suites: " + ", ".join(f"builtin:{s}" for s in builtin_suites()))
    print(
        "\nDataset formats (--dialogues FORMAT:PATH#key=value,...; memory-lab import FORMAT PATH):"
    )
    for fmt, bench in benchmarks().items():
        scored = f"; scored by memory-lab score {fmt}" if bench.scorer else ""
        scored += "".join(f"; written out by memory-lab export {name}" for name in bench.exports)
        print(f"  {fmt}: options {', '.join(importer_options(fmt))}{scored} ({bench.docs})")
    return 0


def validate_command(args: argparse.Namespace) -> int:
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


def import_command(args: argparse.Namespace) -> int:
    from memory_lab.results.export import write_yaml_dialogues

    options = named_values(args.option, "--option")
    written = write_yaml_dialogues(args.format, args.path, args.out, **options)
    print(f"wrote {len(written)} dialogue file(s) to {args.out}/")
    return 0


def scored_benchmarks() -> list[str]:
    """The benchmarks ``memory-lab score`` scores (each declares a scorer)."""
    return [name for name, b in benchmarks().items() if b.scorer is not None]


def score_command(args: argparse.Namespace) -> int:
    """``memory-lab score BENCHMARK RUN``: ``memory_lab.benchmarks.score``, printed."""
    from memory_lab.benchmarks import score

    outcome = score(
        args.benchmark,
        args.results_dir,
        judge=args.judge,
        protocols=getattr(args, "protocol", None),
        prompts=getattr(args, "prompts", None),
        base_url=args.base_url,
        out=args.out,
        export_retrieval=getattr(args, "export_retrieval", None),
    )
    print(outcome.text)
    if outcome.account is not None:
        print(outcome.account.describe())
    return 0


def _alias(old: str, new: str) -> None:
    print(
        f"note: memory-lab {old} is an alias of memory-lab {new}, kept for one release",
        file=sys.stderr,
    )


def beam_scores_command(args: argparse.Namespace) -> int:
    """The old ``beam-scores``: ``score beam`` (``--beam-copy`` is ``--prompts``)."""
    _alias("beam-scores", "score beam (--beam-copy is --prompts, --beam-protocol --protocol)")
    args.benchmark, args.prompts, args.protocol = "beam", args.beam_copy, args.beam_protocol
    return score_command(args)


def judge_cognitive_command(args: argparse.Namespace) -> int:
    """The old ``judge-cognitive``: ``score locomo-plus`` (``--prompt-from`` is ``--prompts``)."""
    _alias("judge-cognitive", "score locomo-plus (--prompt-from is --prompts)")
    args.benchmark, args.prompts = "locomo-plus", args.prompt_from
    return score_command(args)
