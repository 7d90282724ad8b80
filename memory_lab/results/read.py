"""Results folders: ``run.json`` + ``records.jsonl`` on disk, tidy DataFrames and summaries.

Records are appended and flushed as they happen, so a run that fails keeps everything recorded
before the failure. ``read_results`` turns a folder into one row per event.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memory_lab.dialogue.model import EVIDENCE_JUDGED
from memory_lab.log.record_log import ended_cells
from memory_lab.log.records import RECORD_TYPES, record_problem
from memory_lab.log.run_spec import RUN_FILE, Pricing, RunSpec, read_run_file
from memory_lab.scoring.ranks import RANK_SCORES
from memory_lab.scoring.stats import wilson_interval

RECORDS_FILE = "records.jsonl"
SUMMARY_FILE = "summary.csv"
CATEGORY_SUMMARY_FILE = "summary_by_category.csv"


@dataclass
class Results:
    """A results folder read back: run parameters and tidy frames.

    ``run`` is run.json as read (a dict, as notebooks use it); ``spec`` the same typed
    (``run_spec.RunSpec``), read from ``run`` each time it is asked for.
    """

    path: Path
    run: dict[str, Any]
    turns: pd.DataFrame
    probes: pd.DataFrame
    cells: pd.DataFrame
    usage: pd.DataFrame

    @property
    def spec(self) -> RunSpec | None:
        """The run's spec, None for a folder without run.json (RunSpecError naming the file and
        field for one that cannot be read)."""
        return RunSpec.read(self.run, str(self.path / RUN_FILE)) if self.run else None

    @property
    def pricing(self) -> Pricing:
        """The run's price table entries (empty without run.json)."""
        spec = self.spec
        return spec.pricing if spec is not None else Pricing()

    def memory_order(self) -> list[str]:
        """The run's memory labels in run order (empty without run.json)."""
        spec = self.spec
        return list(spec.memories) if spec is not None else []


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a results folder; a torn last line (a killed run) is skipped. A line
    that is no record (``records.record_problem``) is a ValueError naming the file, the line
    and the field."""
    file = Path(path) / RECORDS_FILE
    if not file.exists():
        raise FileNotFoundError(f"{path}: no {RECORDS_FILE}; is this a memory-lab results folder?")
    records = []
    lines = file.read_bytes().split(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:  # ValueError: JSON, an over-long int
            if n == len(lines):  # cut short, maybe inside a character: the kill's last write
                break
            raise ValueError(f"{file} line {n}: not valid JSON: {exc}") from None
        problem = record_problem(record)
        if problem:
            raise ValueError(f"{file} line {n}: {problem}")
        records.append(record)
    return records


def read_results(path: str | Path) -> Results:
    """Read a results folder into DataFrames: ``turns``, ``probes``, ``cells`` and ``usage``.

    Columns are the fields of the typed records (``memory_lab.log.records``), the same whether or
    not any cell failed, plus one ``param_<name>`` column per memory parameter beside the
    ``memory`` label (from ``run.json``).
    """
    folder = Path(path)
    run_file = folder / RUN_FILE
    run = read_run_file(run_file) if run_file.exists() else {}
    params = _memory_params(RunSpec.read(run, str(run_file)) if run else None)
    records = ended_cells(read_records(folder))  # a cell cut short by a kill is not shown
    frames = {}
    for kind, record_type in RECORD_TYPES.items():
        columns = record_type.columns()
        rows = [{k: v for k, v in r.items() if k != "type"} for r in records if r["type"] == kind]
        frame = pd.DataFrame(rows)
        extra = [c for c in frame.columns if c not in columns]  # fields of a newer version
        frame = frame.reindex(columns=columns + extra)
        for name in params:
            frame[f"param_{name}"] = (
                [params[name].get(m) for m in frame["memory"]]
                if len(frame)
                else pd.Series(dtype=object)
            )
        frames[kind] = frame
    return Results(folder, run, frames["turn"], frames["probe"], frames["cell"], frames["usage"])


def _memory_params(run: RunSpec | None) -> dict[str, dict[str, Any]]:
    """parameter name -> {memory label -> value} for every memory of the run."""
    out: dict[str, dict[str, Any]] = {}
    for spec in run.memory_specs if run is not None else ():
        for name, value in spec.params.items():
            shown = "+".join(map(str, value)) if isinstance(value, list) else value
            out.setdefault(name, {})[spec.label] = shown
    return out


def _mean(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def is_adversarial(row: pd.Series) -> bool:
    """A LoCoMo adversarial question (category 5): a trap about something never said."""
    meta = row.get("probe_metadata")
    return isinstance(meta, dict) and str(meta.get("locomo_category")) == "5"


def adversarial_apart(results: Results) -> bool:
    """Whether the run summarises LoCoMo's adversarial questions apart (the default)."""
    spec = results.spec
    return spec is None or spec.config.adversarial == "apart"


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
FIELD_SCORES = ["f1_locomo", "f1_mem0", "bleu1", "exact_match"]

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
    LoCoMo's adversarial questions are left out of both unless the run's config says
    ``adversarial: include`` (they stay in the per-category table). The field's scores
    (``f1_locomo``, ``f1_mem0``, ``bleu1``, ``exact_match``) are means over the probes
    ``accuracy`` is over, so LoCoMo's category 5 is never in them (mem0's convention; LoCoMo's
    own category-5 figure is in the per-category table). Costs are
    estimates: conversation and memory-LLM tokens at the answering model's price, embedded
    tokens at the embedding model's price, as named in ``run.json``. Latency (p50 and p95 of
    search and total seconds per query), tokens per query and the footprint at the dialogue's
    end close the row (``latency_and_footprint``).

    What the context limit cut closes it (``context_cuts``): prompts, prompts cut, tokens cut.

    Rank-aware retrieval: the ``RANK_SCORES`` (LongMemEval's recall@k and NDCG@k at turn and
    session level, ``memory_lab.scoring.ranks``), means over answerable probes with evidence; NaN
    for a memory that does not rank.
    """
    turns, probes = results.turns, results.probes
    if len(probes) and adversarial_apart(results):
        probes = probes[~probes.apply(is_adversarial, axis=1)]
    order = results.memory_order() or sorted(
        set(turns.get("memory", pd.Series(dtype=str)))
        | set(probes.get("memory", pd.Series(dtype=str)))
    )
    pricing = results.pricing
    rows = []
    for memory in order:
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
                "seconds": float(t["seconds"].sum() + (p["seconds"].sum() if n else 0)),
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
    on LoCoMo's category 5) and the judge's accuracy (its headline verdict, ``judge_correct``;
    NaN without a judge).

    Imported datasets keep their own category too (LoCoMo's id, LongMemEval's question type,
    BEAM's ability), in the ``source_category`` column when present.
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
    probes = probes.assign(source_category=probes.apply(_source_category, axis=1))
    rows = []
    order = results.memory_order() or sorted(probes["memory"].unique())
    for memory in order:
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


def _source_category(row: pd.Series) -> str:
    meta = row.get("probe_metadata")
    if isinstance(meta, dict):
        for key in ("locomo_category", "question_type", "beam_ability", "relation_type"):
            if key in meta:
                return f"{key}={meta[key]}"
    return ""


def judge_summary(probes: pd.DataFrame) -> pd.DataFrame:
    """Per memory: judge and string-match accuracy, their disagreement rate and verdict counts.

    ``string_accuracy`` is over all probes (the run's recall); ``judge_accuracy`` and
    ``disagreement_rate`` are over judged probes only (unparseable verdicts are counted apart).
    """
    rows = []
    for memory, group in probes.groupby("memory", sort=False):
        verdicts = group["judge_correct"]
        judged_mask = verdicts.map(lambda v: v is not None and not pd.isna(v)).astype(bool)
        judged = group[judged_mask]
        judge = judged["judge_correct"].astype(bool)
        string = judged["correct"].astype(bool)
        n = len(judged)
        rows.append(
            {
                "memory": memory,
                "probes": len(group),
                "judged": n,
                "unparseable": len(group) - n,
                "judge_accuracy": float(judge.mean()) if n else math.nan,
                "string_accuracy": float(group["correct"].astype(bool).mean()),
                "disagreement_rate": float((judge != string).mean()) if n else math.nan,
            }
        )
    columns = [
        "memory",
        "probes",
        "judged",
        "unparseable",
        "judge_accuracy",
        "string_accuracy",
        "disagreement_rate",
    ]
    return pd.DataFrame(rows, columns=columns)


# ---------------------------------------------------------------------- judge runs and agreement


def _votes(row: pd.Series) -> dict[str, list[bool | None]]:
    """A probe's verdicts: grading prompt label -> the verdict of each run, in run order."""
    verdicts = row.get("judge_verdicts")
    if isinstance(verdicts, list) and verdicts:
        out: dict[str, list[bool | None]] = {}
        for v in sorted(verdicts, key=lambda v: v["run"]):
            out.setdefault(v["prompt"], []).append(v["correct"])
        return out
    correct = row.get("judge_correct")  # a run from before several prompts and runs
    return {"p1": [None if correct is None or pd.isna(correct) else bool(correct)]}


def judge_metrics(probes: pd.DataFrame) -> pd.DataFrame:
    """Per memory: J (judge accuracy) mean and sd over runs, and agreement, for each prompt.

    Over answerable probes, the probes ``accuracy`` (string recall) is over. For the first
    grading prompt: ``judge_accuracy`` and ``judge_accuracy_sd`` (each run's accuracy over the
    probes it gave a verdict, then their mean and sample sd over runs, ``agreement.mean_sd``),
    ``judge_kappa`` (Cohen's kappa of its majority verdict against string match) and
    ``disagreement_rate`` (the share where they differ); for a prompt ``pK`` after it, the same
    columns suffixed ``_pK`` and ``judge_kappa_p1_pK`` (kappa of the two majority verdicts).
    Kappa is nan where undefined (see ``scoring/stats.py``). ``judge_runs`` is the runs per prompt,
    ``judge_unparseable`` the calls whose verdict could not be read, ``judge_tokens`` the judge's
    input and output tokens over every call (abstention probes included). Probes judged
    against their evidence (``EVIDENCE_JUDGED``) are not graded by ``--judge`` and not here.
    """
    from memory_lab.scoring.stats import cohen_kappa, majority_vote, mean_sd

    rows = []
    probes = probes[~probes["category"].isin(EVIDENCE_JUDGED)]  # not graded by --judge
    for memory, group in probes.groupby("memory", sort=False):
        votes = [_votes(r) for _, r in group.iterrows()]
        answerable = (group["category"] != "abstention").tolist()
        string = group["correct"].astype(bool).tolist()
        labels = list(dict.fromkeys(label for v in votes for label in v))
        runs = max((len(runs) for v in votes for runs in v.values()), default=0)
        tokens = pd.to_numeric(group["judge_input_tokens"], errors="coerce").fillna(0).sum()
        tokens += pd.to_numeric(group["judge_output_tokens"], errors="coerce").fillna(0).sum()
        row: dict[str, Any] = {
            "memory": memory,
            "judge_runs": runs,
            "judge_unparseable": sum(x is None for v in votes for rs in v.values() for x in rs),
            "judge_tokens": int(tokens),
        }
        majority: dict[str, list[bool | None]] = {}
        for label in labels:
            suffix = "" if label == labels[0] else f"_{label}"
            per_run = []
            for r in range(runs):
                got = [
                    v[label][r]
                    for v, ok in zip(votes, answerable, strict=True)
                    if ok and len(v.get(label, [])) > r and v[label][r] is not None
                ]
                if got:
                    per_run.append(sum(got) / len(got))
            mean, sd = mean_sd(per_run)
            majority[label] = [majority_vote(v.get(label, [])) for v in votes]
            pairs = [
                (m, s)
                for m, s, ok in zip(majority[label], string, answerable, strict=True)
                if ok and m is not None
            ]
            row[f"judge_accuracy{suffix}"] = mean
            row[f"judge_accuracy_sd{suffix}"] = sd
            row[f"judge_kappa{suffix}"] = cohen_kappa([m for m, _ in pairs], [s for _, s in pairs])
            row[f"disagreement_rate{suffix}"] = (
                sum(m != s for m, s in pairs) / len(pairs) if pairs else math.nan
            )
            if suffix:
                both = [
                    (a, b)
                    for a, b, ok in zip(
                        majority[labels[0]], majority[label], answerable, strict=True
                    )
                    if ok and a is not None and b is not None
                ]
                row[f"judge_kappa_{labels[0]}_{label}"] = cohen_kappa(
                    [a for a, _ in both], [b for _, b in both]
                )
        rows.append(row)
    return pd.DataFrame(rows)
