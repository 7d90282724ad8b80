"""What a run's records add up to: one row per memory (``summarize``) and per memory and probe
category (``summarize_by_category``), and the figures beside them: latency and footprint,
context cuts, the cost estimate, the reader's accuracy, the benchmarks' adversarial questions.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from memory_lab.benchmarks import benchmarks, set_apart
from memory_lab.dialogue.model import CATEGORIES, EVIDENCE_JUDGED
from memory_lab.log.run_spec import Pricing
from memory_lab.results.judge_metrics import judge_metrics
from memory_lab.results.read import Results
from memory_lab.scoring.answers import answer_score_names
from memory_lab.scoring.ranks import RANK_SCORES
from memory_lab.scoring.stats import wilson_interval


def _mean(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def is_adversarial(row: pd.Series) -> bool:
    """A probe its benchmark declares a trap, summarised apart (``Benchmark.set_apart``): a
    question about something never said."""
    return set_apart(row.get("probe_metadata")) is not None


def adversarial_apart(results: Results) -> bool:
    """Whether the run summarises the benchmarks' adversarial questions apart (the default)."""
    spec = results.spec
    return spec is None or spec.config.adversarial == "apart"


def recall_probes(results: Results) -> pd.DataFrame:
    """The probes recall (``accuracy``) is over, every memory's: answerable probes with answers to
    match (not abstention probes, not those judged against their evidence, ``EVIDENCE_JUDGED``),
    adversarial ones (``is_adversarial``) left out unless the run includes them. The summary's
    recall and the paired comparison (``pairs.paired_comparison``) are over these."""
    probes = results.probes
    if probes.empty:
        return probes
    if adversarial_apart(results):
        probes = probes[~probes.apply(is_adversarial, axis=1)]
    graded = (probes["category"] != "abstention") & ~probes["category"].isin(EVIDENCE_JUDGED)
    return probes[graded]


def reader_accuracy(results: Results) -> pd.DataFrame:
    """The answering model's accuracy on probes whose answer was in its prompt, per language.

    Over answerable probes with a context hit, every memory pooled: the instrument's own limit,
    independent of which memory put the answer there.
    """
    p = results.probes
    columns = ["language", "probes_with_hit", "reader_accuracy"]
    if p.empty:
        return pd.DataFrame(columns=columns)
    hit = p[(p["category"] != "abstention") & (p["context_hit"] == True)]  # noqa: E712
    rows = [
        {"language": lang, "probes_with_hit": len(g), "reader_accuracy": float(g["correct"].mean())}
        for lang, g in hit.groupby("language", sort=True)
    ]
    return pd.DataFrame(rows, columns=columns)


def _of(frame: pd.DataFrame, memory: str) -> pd.DataFrame:
    """The rows of one memory (all of them: adversarial probes are queries too)."""
    return frame[frame["memory"] == memory] if len(frame) else frame


def _rate(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.astype(bool).mean()) if len(values) else math.nan


# The field's answer scores (memory_lab.scoring.answers), as probe record fields.
FIELD_SCORES = answer_score_names()

LATENCY_COLUMNS = [
    "search_seconds_p50",
    "search_seconds_p95",
    "total_seconds_p50",
    "total_seconds_p95",
    "tokens_per_query",
    "memory_tokens_held",
]

TIMING_COLUMNS = ("seconds", *LATENCY_COLUMNS[:4])
CUT_COLUMNS = ["prompts", "prompts_cut", "context_cut_tokens"]


def context_cuts(turns: pd.DataFrame, probes: pd.DataFrame) -> dict[str, float]:
    """What the context limit cut from one memory's prompts (``CUT_COLUMNS``): ``prompts``, the
    prompts of its user turns and probes (every probe, adversarial ones too); ``prompts_cut``,
    those whose memory text was cut (``truncated``); ``context_cut_tokens``, the tokens cut
    from them, NaN when the records do not say (a run from before they did)."""
    turns = turns[turns["prompt_tokens"] > 0] if len(turns) else turns
    frames = [f for f in (turns, probes) if len(f)]
    if not frames:
        return {"prompts": 0, "prompts_cut": 0, "context_cut_tokens": 0}
    cut = sum(int(f["truncated"].eq(True).sum()) for f in frames)
    tokens = pd.concat([pd.to_numeric(f["context_cut_tokens"], errors="coerce") for f in frames])
    unknown = cut and tokens.isna().all()
    return {
        "prompts": sum(len(f) for f in frames),
        "prompts_cut": cut,
        "context_cut_tokens": math.nan if unknown else int(tokens.fillna(0).sum()),
    }  # summary columns that vary run to run


def percentiles(values: pd.Series, qs: tuple[float, ...] = (50, 95)) -> list[float]:
    """Percentiles of the non-missing values by numpy's default method, linear interpolation
    between the closest ranks (Hyndman and Fan's type 7, as R's and pandas' default); NaN
    for none."""
    values = pd.to_numeric(values, errors="coerce").dropna()
    if not len(values):
        return [math.nan] * len(qs)
    return [float(x) for x in np.percentile(values.to_numpy(dtype=float), qs)]


def latency_and_footprint(probes: pd.DataFrame, cells: pd.DataFrame) -> dict[str, float]:
    """One memory's query latency, tokens per query and footprint (``LATENCY_COLUMNS``).

    Over every probe, as the Mem0 paper measures per query: search is the memory read for the
    probe's prompt (``recall_seconds``), total is search plus the answering model's call
    (``+ answer_seconds``; judging is not in it), each as p50 and p95 (``percentiles``).
    ``tokens_per_query``: the mean prompt tokens of a probe. ``memory_tokens_held``: the mean
    over the memory's finished cells of the tokens it held at the dialogue's end.
    """

    def seconds(name: str) -> pd.Series:
        return (
            pd.to_numeric(probes[name], errors="coerce") if len(probes) else pd.Series(dtype=float)
        )

    search = seconds("recall_seconds")
    total = search + seconds("answer_seconds")
    ok = cells[cells["status"] == "ok"] if len(cells) else cells
    s50, s95 = percentiles(search)
    t50, t95 = percentiles(total)
    return {
        "search_seconds_p50": s50,
        "search_seconds_p95": s95,
        "total_seconds_p50": t50,
        "total_seconds_p95": t95,
        "tokens_per_query": _mean(probes["prompt_tokens"]) if len(probes) else math.nan,
        "memory_tokens_held": _mean(ok["memory_tokens_held"]) if len(ok) else math.nan,
    }


def own_seconds(turns: pd.DataFrame, probes: pd.DataFrame) -> float:
    """A memory's own seconds: its turns (building each prompt from the memory, observing the
    exchange, its maintenance calls) and its reads for the probes (``recall_seconds``), not the
    answering model's calls (the latency columns' *total* has those), nor the process's
    loading of models and engines (``CellRecord.startup_seconds``). Vectors the bundled engines
    take from the cache the run's cells share are charged the seconds they cost to compute
    (``memory_lab/work_clock.py``), so the figure does not depend on which memory embedded a text
    first."""
    own = float(turns["seconds"].sum()) if len(turns) else 0.0
    if len(probes):
        own += float(pd.to_numeric(probes["recall_seconds"], errors="coerce").fillna(0).sum())
    return own


SUMMARY_COLUMNS = [
    "memory",
    "dialogues",
    "probes",
    "answerable",
    "evidence_recall",
    "context_hit_rate",
    "accuracy",
    "accuracy_low",
    "accuracy_high",
    "abstention_probes",
    "abstention_accuracy",
    "stale_rate",
    *FIELD_SCORES,
    *RANK_SCORES,  # new columns go after the existing ones: summary.csv readers index by name
    "mean_prompt_tokens",
    "prompt_tokens",
    "completion_tokens",
    "memory_tokens",
    "total_tokens",
    "est_cost_usd",
    "seconds",
    *LATENCY_COLUMNS,
    *CUT_COLUMNS,
]


def _est_cost(
    pricing: Pricing,
    turns: pd.DataFrame,
    prompt_tokens: int,
    completion_tokens: int,
    embedding_tokens: int,
) -> float:
    """US dollars at the run's prices: conversation and memory-LLM tokens at the answering
    model's, embedded tokens at the embedding model's; NaN without prices."""
    llm, emb = pricing.llm, pricing.embeddings
    if llm is None or emb is None:
        return math.nan
    return (
        (prompt_tokens + turns["memory_input_tokens"].sum()) * llm.input_per_mtok
        + (completion_tokens + turns["memory_output_tokens"].sum()) * llm.output_per_mtok
        + embedding_tokens * emb.input_per_mtok
    ) / 1e6


def summarize(results: Results) -> pd.DataFrame:
    """One row per memory: retrieval first, then the answering model's recall, then cost.

    Retrieval (independent of the answering model): ``evidence_recall``, the mean share of
    evidence turns the context carried, over answerable probes with evidence;
    ``context_hit_rate``, the share of answerable probes whose answer was verbatim in the
    context (where that is defined). Recall: ``accuracy`` (with a 95% Wilson interval) over
    answerable probes with answers to match (not the ``EVIDENCE_JUDGED`` ones), and
    ``abstention_accuracy`` over abstention probes, apart, so no memory wins by abstaining.
    Adversarial questions (``is_adversarial``) are left out of both unless the run's config says
    ``adversarial: include`` (they stay in the per-category table). The field's scores
    (``answer_score_names``: a benchmark's own F1, mem0's F1, BLEU-1, EM) are means over the probes
    ``accuracy`` is over, so an adversarial question is never in them (mem0's convention; the
    benchmark's own adversarial figure is in the per-category table). Costs are
    estimates: conversation and memory-LLM tokens at the answering model's price, embedded
    tokens at the embedding model's price, as named in ``run.json``. Latency (p50 and p95 of
    search and total seconds per query), tokens per query and the footprint at the dialogue's
    end close the row (``latency_and_footprint``).

    What the context limit cut closes it (``context_cuts``): prompts, prompts cut, tokens cut.

    Rank-aware retrieval: the ``RANK_SCORES`` (recall@k and NDCG@k at turn and
    session level, ``memory_lab.scoring.ranks``), means over answerable probes with evidence; NaN
    for a memory that does not rank.
    """
    turns, probes = results.turns, results.probes
    if len(probes) and adversarial_apart(results):
        probes = probes[~probes.apply(is_adversarial, axis=1)]
    pricing = results.pricing
    rows = []
    for memory in results.memory_order():
        t = turns[turns["memory"] == memory] if len(turns) else turns
        p = probes[probes["memory"] == memory] if len(probes) else probes
        n = len(p)
        answerable = p[p["category"] != "abstention"] if n else p
        abstention = p[p["category"] == "abstention"] if n else p
        graded = answerable[~answerable["category"].isin(EVIDENCE_JUDGED)] if n else p
        correct = int(graded["correct"].sum()) if len(graded) else 0
        low, high = wilson_interval(correct, len(graded))
        with_stale = p[p["stale_answers"].map(len) > 0] if n else p
        user_turns = t[t["prompt_tokens"] > 0] if len(t) else t
        prompt_tokens = int(t["prompt_tokens"].sum() + (p["prompt_tokens"].sum() if n else 0))
        completion_tokens = int(
            t["completion_tokens"].sum() + (p["completion_tokens"].sum() if n else 0)
        )
        memory_llm_tokens = int(t["memory_input_tokens"].sum() + t["memory_output_tokens"].sum())
        embedding_tokens = int(
            t["embedding_tokens"].sum() + (p["embedding_tokens"].sum() if n else 0)
        )
        memory_tokens = memory_llm_tokens + embedding_tokens
        cost = _est_cost(pricing, t, prompt_tokens, completion_tokens, embedding_tokens)
        rows.append(
            {
                "memory": memory,
                "dialogues": int(t["dialogue"].nunique()) if len(t) else 0,
                "probes": n,
                "answerable": len(answerable),
                "evidence_recall": _mean(answerable["evidence_recall"])
                if len(answerable)
                else math.nan,
                "context_hit_rate": _rate(answerable["context_hit"])
                if len(answerable)
                else math.nan,
                **{
                    name: _mean(answerable[name]) if len(answerable) else math.nan
                    for name in RANK_SCORES
                },
                "accuracy": correct / len(graded) if len(graded) else math.nan,
                "accuracy_low": low,
                "accuracy_high": high,
                **{name: _mean(graded[name]) if len(graded) else math.nan for name in FIELD_SCORES},
                "abstention_probes": len(abstention),
                "abstention_accuracy": _rate(abstention["correct"])
                if len(abstention)
                else math.nan,
                "stale_rate": _rate(with_stale["stale"]) if len(with_stale) else math.nan,
                "mean_prompt_tokens": float(user_turns["prompt_tokens"].mean())
                if len(user_turns)
                else math.nan,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "memory_tokens": memory_tokens,
                "total_tokens": prompt_tokens + completion_tokens + memory_tokens,
                "est_cost_usd": float(cost),
                "seconds": own_seconds(t, p),
                **latency_and_footprint(_of(results.probes, memory), _of(results.cells, memory)),
                **context_cuts(t, _of(results.probes, memory)),
            }
        )
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    if len(summary) and probes["judge_raw"].notna().any():
        summary = summary.merge(judge_metrics(probes), on="memory", how="left")
    return summary


def summarize_by_category(results: Results) -> pd.DataFrame:
    """One row per (memory, probe category): probes, accuracy with its interval (NaN for a
    category judged against its evidence, ``EVIDENCE_JUDGED``), context hits, evidence recall,
    the means of the field's answer scores (NaN where a category has none, as mem0's three
    on adversarial questions) and the judge's accuracy (its headline verdict, ``judge_correct``;
    NaN without a judge).

    Imported datasets keep their own category too (each benchmark's declared ``category_key``),
    in the ``source_category`` column when present.
    """
    probes = results.probes
    columns = [
        "memory",
        "category",
        "source_category",
        "probes",
        "accuracy",
        "accuracy_low",
        "accuracy_high",
        "context_hit_rate",
        "evidence_recall",
        *FIELD_SCORES,
        "judge_accuracy",
    ]
    if probes.empty:
        return pd.DataFrame(columns=columns)
    keys = [b.category_key for b in benchmarks().values() if b.category_key]
    probes = probes.assign(source_category=probes.apply(_source_category, axis=1, keys=keys))
    rows = []
    for memory in results.memory_order():
        mine = probes[probes["memory"] == memory]
        for (category, source), group in mine.groupby(["category", "source_category"], sort=True):
            n, correct = len(group), int(group["correct"].sum())
            low, high = wilson_interval(correct, n)
            matched = category not in EVIDENCE_JUDGED  # no answer to match: no accuracy
            rows.append(
                {
                    "memory": memory,
                    "category": category,
                    "source_category": source,
                    "probes": n,
                    "accuracy": correct / n if matched else math.nan,
                    "accuracy_low": low if matched else math.nan,
                    "accuracy_high": high if matched else math.nan,
                    "context_hit_rate": _rate(group["context_hit"]),
                    "evidence_recall": _mean(group["evidence_recall"]),
                    **{name: _mean(group[name]) for name in FIELD_SCORES},
                    "judge_accuracy": _rate(group["judge_correct"]),
                }
            )
    return pd.DataFrame(rows, columns=columns)


def _source_category(row: pd.Series, keys: list[str]) -> str:
    """The dataset's own category of a probe, as ``key=value`` of the first of the benchmarks'
    ``category_key``s its metadata holds; "" for a probe of none."""
    meta = row.get("probe_metadata")
    if isinstance(meta, dict):
        for key in keys:
            if key in meta:
                return f"{key}={meta[key]}"
    return ""


def judged(summary: pd.DataFrame) -> bool:
    """Whether a summary has the judge's accuracy for some memory (the run was judged)."""
    return "judge_accuracy" in summary and summary["judge_accuracy"].notna().any()


def category_grid(results: Results, column: str = "correct") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The mean of a probe figure (``column``: ``correct``, recall, by default;
    ``evidence_recall``) and the probes it is over, per memory (rows, run order, those with
    probes) and probe category (columns: the format's categories in their order, then any
    others sorted); a probe without a value for it (evidence recall of an abstention probe) is
    not counted."""
    probes = results.probes
    memories = [m for m in results.memory_order() if m in set(probes.get("memory", []))]
    present = set(probes.get("category", []))
    cats = [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
    values = pd.to_numeric(probes[column], errors="coerce") if len(probes) else probes.get(column)
    grouped = (
        probes.assign(value=values)
        .dropna(subset=["value"])
        .groupby(["memory", "category"])["value"]
    )
    accuracy = grouped.mean().unstack().reindex(index=memories, columns=cats)
    count = grouped.size().unstack().reindex(index=memories, columns=cats)
    return accuracy, count
