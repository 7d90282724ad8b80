"""RealMem (AvatarMemory/RealMemBench, ACL 2026 Findings): ten personas' long multi-session
project dialogues with the questions inside the sessions, scored by its session-retrieval
metrics (recall_any, recall_all, NDCG at 5/10/20) and, with a judge model, its LLM metrics
(docs/realmem.md)."""

from __future__ import annotations

from pathlib import Path

from memory_lab.benchmarks.declaration import Benchmark, ScoreOutcome, Scorer, ScoreRequest
from memory_lab.benchmarks.realmem.importer import (
    CATEGORIES,
    CATEGORY_KEY,
    PROBE_KEYS,
    import_realmem,
)
from memory_lab.benchmarks.realmem.scores import PROTOCOLS, SCORES_FILE


def score(request: ScoreRequest) -> ScoreOutcome:
    """Score a run over RealMem by the authors' retrieval metrics into ``RUN/realmem_scores.csv``;
    with a judge model (``--judge PROVIDER:MODEL``), their LLM metrics too, with the prompts of
    the user's checkout (``--prompts``), into ``RUN/realmem_llm_scores.csv`` (every verdict:
    ``--out``, default ``RUN/realmem_llm_verdicts.json``; the judge's account:
    ``RUN/realmem-judge.judge.json``); with ``export_retrieval``, write each memory's rankings in
    the authors' input format."""
    from memory_lab.benchmarks.realmem.export import export_retrieval
    from memory_lab.benchmarks.realmem.scores import rows, score_records, table_text, write_csv
    from memory_lab.errors import BadInput
    from memory_lab.results.read import iter_records

    unknown = [p for p in request.protocols if p not in PROTOCOLS]
    if unknown:
        raise BadInput(
            f"realmem: unknown protocol {', '.join(unknown)} (known: {', '.join(PROTOCOLS)})"
        )
    prompts = None
    if request.judge != "offline":
        from memory_lab.benchmarks.realmem.judge import load_prompts

        if request.prompts is None:
            raise BadInput(
                "realmem: --prompts CHECKOUT: the RealMemBench checkout whose "
                "eval/compute_llm_metrics_for_realmem.py holds the judge's prompts (not bundled)"
            )
        prompts = load_prompts(request.prompts)  # a bad path fails before any work
    folder = Path(request.results_dir)
    scored = score_records(iter_records(folder, prompts="dropped"))
    if not scored:
        raise BadInput(f"{folder}: no RealMem probe in its records (import with realmem:PATH)")
    table = rows(scored)
    out = folder / SCORES_FILE
    write_csv(out, table)
    files = [out]
    text = table_text(scored, table) + f"\nwrote {out}"
    account = None
    if prompts is not None:
        from memory_lab.benchmarks.realmem.judge import score_llm
        from memory_lab.results.judge_costs import RunJudging

        judge = RunJudging.of(folder).judge(request.judge, base_url=request.base_url)
        checkout = Path(request.prompts) if request.prompts is not None else None
        llm_text, llm_files, account = score_llm(folder, judge, prompts, request.out, checkout)
        text += "\n\n" + llm_text
        files += llm_files
    if request.export_retrieval is not None:
        written = export_retrieval(scored, Path(request.export_retrieval))
        files += written
        where = request.export_retrieval
        text += f"\nrankings in the authors' format: {len(written)} file(s) under {where}"
    return ScoreOutcome(text=text, files=files, account=account)


BENCHMARK = Benchmark(
    title="RealMem",
    name="realmem",
    importer=import_realmem,
    origin="RealMem is not shipped: its dataset/ folder is in the AvatarMemory/RealMemBench "
    "repository on GitHub",
    licence="the AvatarMemory/RealMemBench repository is Apache-2.0 (not shipped all the same)",
    docs="docs/realmem.md",
    categories=dict(CATEGORIES),
    probe_keys=PROBE_KEYS,
    category_key=CATEGORY_KEY,
    package=__name__,
    scorer=Scorer(
        score=score,
        writes=SCORES_FILE,
        protocols=PROTOCOLS,
        account="realmem-judge",
        offline=True,
        prompts="your RealMemBench checkout: eval/compute_llm_metrics_for_realmem.py's judge "
        "prompts (for the LLM metrics, with --judge PROVIDER:MODEL)",
        exports=("retrieval",),
        about="the authors' session-retrieval metrics: recall_any, recall_all, NDCG at 5/10/20; "
        "with a judge model, their LLM metrics (QA score 0-3, memory recall and helpfulness)",
    ),
)
