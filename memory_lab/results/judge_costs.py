"""The judges that score a finished run: what they take of the run, and what they cost.

``memory-lab score BENCHMARK RUN`` judges a run after it finished, by the benchmark's declared
scorer (``memory_lab.benchmarks``). ``RunJudging`` gives its judge what the run's own models had:
its call cache (run.json's ``cache_dir``; the default one, ``$MEMORY_LAB_CACHE`` or
``~/.cache/memory-lab``, for a run.json that names none; none for a run made with ``--no-cache``),
so that judging the same replies again sends no request; its client settings (the run's request
timeout, ``MEMORY_LAB_MAX_RETRIES``); and its price table (the run's ``--prices`` file, else the
bundled one), at which the judge's tokens are estimated (the judge model's own list price; none when
the table has no entry).

Each scorer writes its judge's account (``judge_core.JudgeAccount``: the model, each prompt's
SHA-256, calls and cache hits, tokens in and out, the estimated cost) into the results folder as
``<account>.judge.json`` (``write_account``; the name its declaration gives), naming the run it
judged; ``judge_costs`` reads them back for a results folder (the accounts of its run only: one an
earlier run left in the same folder is skipped), for the summary and the report to show.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_lab.log.config import RunConfig
from memory_lab.log.safe_files import write_replacing
from memory_lab.models.accounting import LOCAL_PRICE, LOCAL_PRICE_MODEL, Price, load_prices
from memory_lab.models.providers import client_settings
from memory_lab.models.spec import ClientSettings, ModelSpec
from memory_lab.results.read import ResultsError, open_in_folder, read_run_json, spec_of
from memory_lab.scoring.judge_core import Judge, JudgeAccount, JudgeProtocol, judge_models
from memory_lab.text.limits import InputError, decode, parse_json

ACCOUNT_SUFFIX = ".judge.json"
MAX_ACCOUNT_BYTES = 1024 * 1024  # an account is a few hundred bytes
BUNDLED_PRICES = "memory_lab/data/prices.json"
_COUNTS = ("calls", "cache_hits", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class RunJudging:
    """What a judge of the finished run in ``folder`` takes of it: the call cache folder (None:
    the run was made with ``--no-cache``), the client settings and the price table file (None:
    the bundled one); ``run_id`` names the run in the judge's account."""

    folder: Path
    run_id: str | None
    cache_dir: str | None
    client: ClientSettings
    prices_file: str | None

    @classmethod
    def of(cls, folder: str | Path) -> RunJudging:
        """The run in ``folder`` as its run.json records it (defaults without one)."""
        from memory_lab.models.cache import default_cache_dir

        folder = Path(folder)
        spec = spec_of(folder, read_run_json(folder))
        config = spec.config if spec is not None else RunConfig()
        cache_dir = spec.cache_dir if spec is not None else None
        if cache_dir is None and config.cache is not False:
            cache_dir = str(default_cache_dir() if config.cache is True else Path(config.cache))
        return cls(
            folder,
            spec.run_id if spec is not None else None,
            cache_dir,
            ClientSettings.from_env(config.request_timeout),
            config.prices_file,
        )

    def judge(
        self,
        spec: str,
        *,
        base_url: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Judge:
        """The judge ``PROVIDER:MODEL`` (``judge_core.judge_models``) through the run's call
        cache, built with the run's client settings, metered and priced."""
        from memory_lab.models.cache import CallCache

        cache = CallCache(self.cache_dir) if self.cache_dir is not None else None
        with client_settings(self.client):
            (model,) = judge_models(
                spec, base_url=base_url, temperature=temperature, max_tokens=max_tokens, cache=cache
            )
        entry, price, source = self.price_entry(spec, base_url)
        return Judge(model, spec, price=price, price_model=entry, price_source=source)

    def price(self, spec: str, base_url: str | None = None) -> tuple[Price | None, str]:
        """The price of the judge model ``spec`` and the table's source (``price_entry``)."""
        _, price, source = self.price_entry(spec, base_url)
        return price, source

    def price_entry(
        self, spec: str, base_url: str | None = None
    ) -> tuple[str | None, Price | None, str]:
        """``judge_price_entry`` in the run's price table."""
        return judge_price_entry(spec, base_url, self.prices_file)


def judge_price_entry(
    spec: str, base_url: str | None, prices_file: str | None
) -> tuple[str | None, Price | None, str]:
    """A judge model's price table entry, its price and the table's source: its own entry in
    the table (``prices_file``, the bundled one when it cannot be read any more); ``local`` at
    no cost for a model the table lacks that a local server answers (Ollama, ``base_url``), as
    a run's own models are priced; the offline judge ``local`` too; else none (None, None)."""
    source = prices_file or BUNDLED_PRICES
    try:
        prices = load_prices(prices_file)
    except (OSError, ValueError):  # BadInput is a ValueError
        prices, source = load_prices(), BUNDLED_PRICES
    parsed = ModelSpec.parse(spec)
    if parsed.offline or (parsed.name not in prices and (parsed.provider == "ollama" or base_url)):
        return LOCAL_PRICE_MODEL, LOCAL_PRICE, source
    if parsed.name in prices:
        return parsed.name, prices[parsed.name], source
    return None, None, source


def account_path(folder: str | Path, scorer: str) -> Path:
    return Path(folder) / f"{scorer}{ACCOUNT_SUFFIX}"


def write_account(
    folder: str | Path, scorer: str, judge: Judge | None, protocols: Sequence[JudgeProtocol]
) -> JudgeAccount | None:
    """The account of ``judge`` (naming ``protocols``' prompts) written to the results folder as
    ``<scorer>.judge.json``, with the scorer and the run's id; None and the file removed when
    there is no model judge (an offline scoring leaves no judge bill)."""
    path = account_path(folder, scorer)
    if judge is None:
        path.unlink(missing_ok=True)
        return None
    account = judge.account(protocols)
    document = {"scorer": scorer, "run_id": read_run_json(Path(folder)).get("run_id")}
    document.update(account.to_dict())
    write_replacing(path, json.dumps(document, indent=2) + "\n")  # never through a link
    return account


@dataclass(frozen=True)
class JudgeCost:
    """One scorer's judge, as its account in a results folder records it: the model, each
    prompt's SHA-256 (by protocol), calls (cache hits among them), tokens in and out and the
    estimated cost in US dollars (None: no list price for the model)."""

    scorer: str
    judge: str
    prompt_sha256: dict[str, str]
    calls: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    est_cost_usd: float | None
    price_model: str | None = None  # the price table entry (``local``: a local server's)


def scorer_accounts() -> tuple[str, ...]:
    """The accounts the benchmarks' scorers write (each declaration's ``Scorer.account``)."""
    from memory_lab.benchmarks import benchmarks

    declared = [b.scorer for b in benchmarks().values() if b.scorer is not None]
    return tuple(dict.fromkeys(s.account for s in declared if s.account))


def judge_costs(folder: str | Path) -> list[JudgeCost]:
    """The judges that scored the run in ``folder`` after it finished, in the order of the
    benchmarks declaring them (``scorer_accounts``):
    each scorer's account read back (a regular file in the folder, at most
    ``MAX_ACCOUNT_BYTES``); an account naming another run (one an earlier run in the same folder
    left) is skipped. ResultsError naming the file and field for one that cannot be read."""
    folder = Path(folder)
    current = read_run_json(folder).get("run_id")
    costs = []
    for scorer in scorer_accounts():
        path = account_path(folder, scorer)
        if not os.path.lexists(path):
            continue
        with open_in_folder(path, MAX_ACCOUNT_BYTES, "MAX_ACCOUNT_BYTES") as fh:
            data = fh.read(MAX_ACCOUNT_BYTES + 1)
        try:
            document = parse_json(decode(data))
        except InputError as exc:
            raise ResultsError(f"{path}: {exc}") from None
        if not isinstance(document, dict):
            raise ResultsError(f"{path}: must hold an object, got {type(document).__name__}")
        if document.get("run_id") != current:
            continue
        costs.append(_cost(document, path, scorer))
    return costs


def _price_model(document: dict[str, Any]) -> str | None:
    price = document.get("price")
    model = price.get("model") if isinstance(price, dict) else None
    return model if isinstance(model, str) else None


def _cost(document: dict[str, Any], path: Path, scorer: str) -> JudgeCost:
    """A JudgeCost from an account's fields; ResultsError naming the file and field."""

    def field(name: str, ok: Any, what: str) -> Any:
        value = document.get(name)
        if not ok(value):
            raise ResultsError(f"{path}: {name}: must be {what}")
        return value

    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    def cost(value: Any) -> bool:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return value is None or (number and math.isfinite(value) and value >= 0)

    def hashes(value: Any) -> bool:
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())

    counts = {name: field(name, count, "a whole number of at least 0") for name in _COUNTS}
    return JudgeCost(
        scorer=scorer,
        judge=field("judge", lambda v: isinstance(v, str), "the judge model's name"),
        prompt_sha256=dict(field("prompt_sha256", hashes, "an object of SHA-256 texts")),
        est_cost_usd=field("est_cost_usd", cost, "null or a number of at least 0"),
        price_model=price.get("model")
        if isinstance(price := document.get("price"), dict)
        else None,
        **counts,
    )
