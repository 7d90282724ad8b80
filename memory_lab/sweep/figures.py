"""A sweep's figures per memory and run, declared as metrics, and the "which memory?" rule.

Each run folder gives one row per memory over its finished cells (a cell that failed or did
not finish is counted in ``cells``, not in the figures): evidence recall (the summary's), the
tokens each exchange puts in the prompt, the memory's own maintenance tokens per exchange (its
LLM calls and embedded tokens), its own milliseconds per exchange (its turns and reads; not the
answering model's calls, not model loading) and the run's estimated cost. Every view of a sweep
writes them through ``SWEEP_METRICS``: the same names, units and ranking everywhere.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from memory_lab.scoring.metrics import Metric, metric

EXCHANGES = "the exchanges of its finished cells"
SWEEP_METRICS = (
    metric("evidence_recall"),
    Metric(
        "prompt_tokens_per_exchange",
        "prompt tokens / exchange",
        "Prompt tokens per exchange",
        "tokens",
        EXCHANGES,
        higher_is_better=False,
        compared=False,
    ),
    Metric(
        "maintenance_tokens_per_exchange",
        "maintenance tokens / exchange",
        "Maintenance tokens per exchange (the memory's own LLM and embedded tokens)",
        "tokens",
        EXCHANGES,
        higher_is_better=False,
        compared=False,
    ),
    Metric(
        "ms_per_exchange",
        "own ms / exchange",
        "The memory's own milliseconds per exchange",
        "ms",
        EXCHANGES,
        higher_is_better=False,
        compared=False,
    ),
    Metric(
        "maintenance_usd_per_1k",
        "maintenance $ / 1,000 exchanges",
        "What the memory's own metered tokens would cost per 1,000 exchanges at gpt-4o-mini's "
        "list prices (embedded tokens at text-embedding-3-small's)",
        "usd",
        EXCHANGES,
        higher_is_better=False,
        compared=False,
    ),
    metric("est_cost_usd"),
)
BY_NAME = {m.name: m for m in SWEEP_METRICS}
LLM_PRICE, EMBEDDING_PRICE = "gpt-4o-mini", "text-embedding-3-small"
METERED = ("memory_input_tokens", "memory_output_tokens", "embedding_tokens")

# the "which memory?" rule: a memory within TIE_POINTS points of the best evidence recall
# counts as "as good", and the cheapest of those (tokens per exchange, then seconds) is the
# pick; and the best evidence recall among memories putting at most BUDGET of buffer's prompt
# tokens per exchange in the prompt
TIE_POINTS = 5.0
BUDGET = 0.25


def _finished(results: Any) -> Any:
    """``results`` narrowed to its finished (``ok``) cells."""
    cells = results.cells
    ok = cells[cells["status"] == "ok"] if "status" in cells.columns else cells
    done = set(zip(ok["memory"], ok["dialogue"], strict=True))

    def keep(frame: Any) -> Any:
        if "memory" not in frame.columns or not len(frame):
            return frame
        keys = zip(frame["memory"], frame["dialogue"], strict=True)
        return frame.loc[[k in done for k in keys]]

    return replace(
        results,
        turns=keep(results.turns),
        probes=keep(results.probes),
        cells=ok,
        usage=keep(results.usage),
    )


def maintenance_cost(llm_in: float, llm_out: float, embedded: float, exchanges: int) -> float:
    """US dollars per 1,000 exchanges of a memory's metered tokens at LLM_PRICE's and
    EMBEDDING_PRICE's list prices (``memory_lab/data/prices.json``)."""
    from memory_lab.models.accounting import load_prices

    prices = load_prices()
    llm, emb = prices[LLM_PRICE], prices[EMBEDDING_PRICE]
    usd = (
        llm_in * llm.input_per_mtok
        + llm_out * (llm.output_per_mtok or 0.0)
        + embedded * emb.input_per_mtok
    ) / 1e6
    return usd * 1000 / max(exchanges, 1)


def _metered(frames: tuple, column: str) -> float:
    """``column`` summed over the frames that have it (a missing figure counts 0)."""
    return float(sum(f[column].fillna(0).sum() for f in frames if column in f.columns))


def rows_of(results: Any) -> list[dict[str, Any]]:
    """Each memory's figures over ``results`` (all its cells), in summary order."""
    from memory_lab.results.summary import summarize

    found = []
    for _, s in summarize(results).iterrows():
        turns = results.turns[results.turns["memory"] == s["memory"]]
        probes = results.probes[results.probes["memory"] == s["memory"]]
        n = max(len(turns), 1)
        metered = [_metered((turns, probes), c) for c in METERED]
        found.append(
            {
                "memory": s["memory"],
                "exchanges": len(turns),
                "evidence_recall": float(s["evidence_recall"]),
                "prompt_tokens_per_exchange": float(turns["prompt_tokens"].sum()) / n,
                "maintenance_tokens_per_exchange": float(s["memory_tokens"]) / n,
                "ms_per_exchange": 1000 * float(s["seconds"]) / n,
                "maintenance_usd_per_1k": maintenance_cost(*metered, n),
                "est_cost_usd": s.get("est_cost_usd"),
            }
        )
    return found


def by_dialogue(results: Any, dialogue: str) -> Any:
    """``results`` narrowed to one dialogue (every frame that names dialogues)."""

    def one(frame: Any) -> Any:
        return frame[frame["dialogue"] == dialogue] if "dialogue" in frame.columns else frame

    return replace(
        results,
        turns=one(results.turns),
        probes=one(results.probes),
        cells=one(results.cells),
        usage=one(results.usage),
    )


def recall_range(results: Any) -> dict[str, tuple[float, float]]:
    """Each memory's lowest and highest evidence recall over the dialogues it finished, only
    where it finished two or more: how far one conversation can stray from the pooled figure."""
    per: dict[str, list[float]] = {}
    for dialogue in results.cells["dialogue"].unique():
        for row in rows_of(by_dialogue(results, dialogue)):
            if not math.isnan(row["evidence_recall"]):
                per.setdefault(row["memory"], []).append(row["evidence_recall"])
    return {m: (min(v), max(v)) for m, v in per.items() if len(v) > 1}


def run_rows(folder: Path, spread: bool = False) -> list[dict[str, Any]]:
    """Each memory's figures in one run folder over its finished cells, with ``cells``
    (finished/all) and, with ``spread``, its lowest and highest dialogue's evidence recall."""
    from memory_lab.results.read import read_results

    results = read_results(folder, prompts="dropped")
    cells = results.cells
    kept = _finished(results)
    figures = {r["memory"]: r for r in rows_of(kept)} if len(kept.cells) else {}
    ranges = recall_range(kept) if spread and len(kept.cells) else {}
    found = []
    for memory in results.memory_order():
        mine = cells[cells["memory"] == memory] if len(cells) else cells
        ok = int((mine["status"] == "ok").sum()) if len(mine) else 0
        row = dict(figures.get(memory, {})) if ok else {}
        row.update(memory=memory, cells=f"{ok}/{len(mine)}")
        if memory in ranges:
            row["recall_low"], row["recall_high"] = ranges[memory]
        found.append(row)
    return found


def _tokens(row: dict[str, Any]) -> float:
    return row["prompt_tokens_per_exchange"] + row["maintenance_tokens_per_exchange"]


def pick(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """The rule over a run's rows: ``best`` (the highest evidence recall), ``cheapest`` (the
    fewest tokens per exchange, prompt plus maintenance, then the fewest seconds, within
    TIE_POINTS of the best) and ``frugal`` (the best evidence recall, then the fewest tokens,
    among the memories other than buffer whose prompt is at most BUDGET of buffer's; None
    without buffer or when none fits). Memories without a figure take no part."""
    scored = [
        r for r in rows if not math.isnan(r.get("evidence_recall", math.nan)) and r.get("exchanges")
    ]
    if not scored:
        return {"best": None, "cheapest": None, "frugal": None}
    best = max(scored, key=lambda r: r["evidence_recall"])
    top = best["evidence_recall"]
    near = [r for r in scored if 100 * (top - r["evidence_recall"]) <= TIE_POINTS]
    buffer = next((r for r in scored if r["memory"] == "buffer"), None)
    limit = BUDGET * buffer["prompt_tokens_per_exchange"] if buffer else -1.0
    within = [r for r in scored if r is not buffer and r["prompt_tokens_per_exchange"] <= limit]
    return {
        "best": best,
        "cheapest": min(near, key=lambda r: (_tokens(r), r["ms_per_exchange"])),
        "frugal": max(within, key=lambda r: (r["evidence_recall"], -_tokens(r)))
        if within
        else None,
    }
