"""What a run spent by model role: the reader, the memories' models, the embeddings and the
judge, each with its tokens and their estimated cost (``role_costs``).

The summary's ``est_cost_usd`` is per memory and prices the conversation and the memories' LLM
calls at the answering model's list price and embedded tokens at the embedding model's
(``summary._est_cost``); the roles here are priced the same way, so that their sum is the sum
of the summary's column, and the judge (``--judge``), which no memory is charged with, is priced
at its own model's list price (``local`` for a model the table lacks served by Ollama or a
``--base-url`` server; no price, and so no cost, for any other model the table lacks). A dry
run's estimate (``views/finished_run.py``) prints one line per role.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from memory_lab.models.accounting import LOCAL_PRICE_MODEL, Price
from memory_lab.results.judge_costs import judge_price_entry
from memory_lab.results.read import Results


@dataclass(frozen=True)
class RoleCost:
    """One model role of a run: the model requested for it, its tokens in and out (embedded
    tokens count as in), the price table entry they are priced as (None: no entry) and the
    estimated US dollars (NaN without a price)."""

    role: str
    model: str
    input_tokens: int
    output_tokens: int
    price_model: str | None
    cost_usd: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def local(self) -> bool:
        return self.price_model == LOCAL_PRICE_MODEL


def _sum(frame: pd.DataFrame, column: str) -> int:
    if not len(frame) or column not in frame:
        return 0
    return int(pd.to_numeric(frame[column], errors="coerce").fillna(0).sum())


def _cost(price: Price | None, input_tokens: int, output_tokens: int) -> float:
    return math.nan if price is None else price.cost(input_tokens, output_tokens)


def role_costs(results: Results) -> list[RoleCost]:
    """The run's tokens and estimated cost by role, in the order reader, memory, embeddings,
    judge (the judge only where the run was judged; a role that spent nothing is left out but
    the reader). The models are those requested (a dry run's, not its offline stand-ins)."""
    spec = results.spec
    if spec is None:
        return []
    config, pricing = spec.config, spec.pricing
    turns, probes = results.turns, results.probes
    llm_price = pricing.llm
    rows = [
        RoleCost(
            "reader",
            config.llm,
            (i := _sum(turns, "prompt_tokens") + _sum(probes, "prompt_tokens")),
            (o := _sum(turns, "completion_tokens") + _sum(probes, "completion_tokens")),
            pricing.llm_model,
            _cost(llm_price, i, o),
        )
    ]
    i, o = _sum(turns, "memory_input_tokens"), _sum(turns, "memory_output_tokens")
    if i or o:
        models = dict.fromkeys([config.memory_llm, *config.roles.values()])
        rows.append(
            RoleCost("memory", ", ".join(models), i, o, pricing.llm_model, _cost(llm_price, i, o))
        )
    e = _sum(turns, "embedding_tokens") + _sum(probes, "embedding_tokens")
    if e:
        rows.append(
            RoleCost(
                "embeddings",
                config.embeddings,
                e,
                0,
                pricing.embeddings_model,
                _cost(pricing.embeddings, e, 0),
            )
        )
    if config.judge is not None:
        i, o = _sum(probes, "judge_input_tokens"), _sum(probes, "judge_output_tokens")
        entry, price, _ = judge_price_entry(config.judge, config.base_url, config.prices_file)
        rows.append(RoleCost("judge", config.judge, i, o, entry, _cost(price, i, o)))
    return rows
