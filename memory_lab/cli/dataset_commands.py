"""The commands on dialogues and datasets: ``list`` (memories, built-in suites, dataset
formats), ``validate``, ``import`` (a foreign dataset into dialogue YAML files) and the scorers
that grade a run as a dataset's authors do (``beam-scores``, ``judge-cognitive``)."""

from __future__ import annotations

import argparse
import sys

from memory_lab.dialogue.importers import benchmarks, importer_options
from memory_lab.dialogue.sources import validate
from memory_lab.errors import BadInput
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
        scored = f"; scored by {bench.scorer}" if bench.scorer else ""
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


def beam_scores_command(args: argparse.Namespace) -> int:
    from memory_lab.results.beam_scores import (
        PROTOCOLS,
        LLMBeamGrader,
        OfflineBeamGrader,
        format_beam_table,
        load_beam_prompts,
        score_run,
        write_scores,
    )
    from memory_lab.results.judge_costs import RunJudging

    protocols = PROTOCOLS if args.beam_protocol == "both" else (args.beam_protocol,)
    if args.judge == "offline":
        grader, template = OfflineBeamGrader(), ""
    else:
        if args.beam_copy is None:
            raise BadInput(
                "--beam-copy DIR: your BEAM copy, whose src/prompts.py holds the judge prompt "
                "(not bundled: BEAM's repository has no licence)"
            )
        prompts = load_beam_prompts(args.beam_copy)
        judge = RunJudging.of(args.results_dir).judge(args.judge, base_url=args.base_url)
        grader, template = LLMBeamGrader(judge, prompts), prompts.judge
    rows = score_run(args.results_dir, grader, protocols, template)
    out, account = write_scores(args.results_dir, rows, grader)
    print(format_beam_table(rows, args.judge))
    print(f"\nper-question scores: {out}")
    if account is not None:
        print(account.describe())
    return 0


def judge_cognitive_command(args: argparse.Namespace) -> int:
    from memory_lab.results.cognitive_judge import (
        JUDGE_MAX_TOKENS,
        judge_results,
        load_cognitive_prompt,
        require_model,
    )
    from memory_lab.results.judge_costs import RunJudging

    prompt = load_cognitive_prompt(args.prompt_from)
    require_model(args.judge)
    judge = RunJudging.of(args.results).judge(
        args.judge, base_url=args.base_url, max_tokens=JUDGE_MAX_TOKENS
    )
    summaries = judge_results(args.results, judge, prompt, args.out)
    for memory, s in summaries.items():
        print(
            f"{memory}: Cognitive score {s['overall_avg']} over {s['total_samples']} probe(s) "
            f"(total {s['total_score']}; correct 1, partial 0.5, wrong 0)"
        )
    print(judge.account([prompt]).describe())
    print(f"wrote every verdict to {args.out}")
    return 0
